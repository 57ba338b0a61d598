"""bf16 vs fp32 biLM training on a short run (the bf16 lever): held-out perplexity and tokens/s.

    python scripts/precision_probe.py [--tokens 840000] [--report-only --runs-commit SHA]

Trains configs/bilm/default_cont4.yaml twice, identical apart from ``precision`` (fp32, then bf16), for
``--tokens`` tokens each (init_freeze_steps 20, a held-out evaluation every half of the run), into
runs/bilm/precision_probe_{fp32,bf16}, then writes results/bilm/precision_probe.{md,json} from their learning
curves (the first 500 held-out sentences, full softmax). ``--report-only`` reads existing run folders
(``--runs-commit``: the commit the runs were made at, when it is not the current one). Needs a CPU with
AVX512-BF16 or AMX (the trainer refuses bf16 elsewhere).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from elmo_features.util.provenance import git_commit, machine, timestamp, write_text_atomic  # noqa: E402

CONFIG = "configs/bilm/default_cont4.yaml"


def command(precision: str, tokens: int) -> list[str]:
    return ["elmo-tasks", "train-bilm", "--config", CONFIG, "--set", f"precision={precision}",
            "--set", f"out_dir=runs/bilm/precision_probe_{precision}", "--set", f"max_train_tokens={tokens}",
            "--set", f"eval_every_tokens={tokens // 2}", "--set", "init_freeze_steps=20", "--no-progress"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=840_000)
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--runs-commit", default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bilm")
    args = ap.parse_args()
    if not args.report_only:
        for p in ("fp32", "bf16"):
            subprocess.run(command(p, args.tokens), cwd=ROOT, check=True)
    runs = {}
    for p in ("fp32", "bf16"):
        folder = ROOT / "runs" / "bilm" / f"precision_probe_{p}"
        cfg = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
        curve = json.loads((folder / "curve.json").read_text(encoding="utf-8"))
        runs[p] = {"command": " ".join(command(p, cfg["max_train_tokens"])), "curve": curve,
                   "threads": cfg["threads"], "batch_tokens": cfg["batch_tokens"],
                   "init_freeze_steps": cfg["init_freeze_steps"]}
    commit = git_commit()
    m = machine()
    rows = []
    for a, b in zip(runs["fp32"]["curve"], runs["bf16"]["curve"]):
        rows.append({"tokens": a["tokens"], "step": a["step"], "fp32_mean": a["mean"], "bf16_mean": b["mean"],
                     "rel_diff": b["mean"] / a["mean"] - 1, "fp32_elapsed": a["elapsed"],
                     "bf16_elapsed": b["elapsed"]})
    md = ["# bf16 vs fp32 biLM training: a short run", "",
          f"Report written by `python scripts/precision_probe.py{' --report-only' if args.report_only else ''}` at "
          f"commit `{commit}` on {timestamp()}; the runs were made at commit `{args.runs_commit or commit}` on "
          f"{m['cpu_cores']} CPU cores ({m['cpu_model']}, bf16 matmuls in hardware: AMX), one after the other on an "
          "otherwise idle machine:", ""]
    md += [f"    {runs[p]['command']}" for p in ("fp32", "bf16")]
    md += ["", f"The shipped default biLM with a fresh softmax, {runs['fp32']['init_freeze_steps']} softmax-only steps "
           f"first, then everything trained; batches of {runs['fp32']['batch_tokens']:,} tokens, "
           f"{runs['fp32']['threads']} threads, the same seed and batches. `bf16` = `precision: bf16` "
           "(torch.autocast: bf16 matmuls with fp32 accumulation; fp32 master weights, optimizer state and "
           "evaluation). Perplexity: the first 500 held-out sentences, full softmax, in fp32.", "",
           "| tokens | step | fp32 ppl | bf16 ppl | bf16 / fp32 - 1 | fp32 s | bf16 s |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['tokens']:,} | {r['step']} | {r['fp32_mean']:.2f} | {r['bf16_mean']:.2f} | "
                  f"{100 * r['rel_diff']:+.2f}% | {r['fp32_elapsed']:.1f} | {r['bf16_elapsed']:.1f} |")
    if len(rows) >= 2:
        a, b = rows[-2], rows[-1]
        n = b["tokens"] - a["tokens"]
        f32, b16 = n / (b["fp32_elapsed"] - a["fp32_elapsed"]), n / (b["bf16_elapsed"] - a["bf16_elapsed"])
        md += ["", f"Between the last two evaluations (all parameters training, held-out evaluation included): fp32 "
               f"{f32:,.0f} tok/s, bf16 {b16:,.0f} tok/s ({b16 / f32:.2f}x)."]
    args.out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.out / "precision_probe.md", "\n".join(md) + "\n")
    write_text_atomic(args.out / "precision_probe.json", json.dumps(
        {"commit": commit, "runs_commit": args.runs_commit or commit, "machine": m, "runs": runs, "rows": rows},
        indent=1) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())

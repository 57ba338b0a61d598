"""bf16 vs fp32 on downstream results: NER dev F1 and WSD 1-NN on Senseval-2, one seed.

    python scripts/bf16_downstream.py [--out results/bench/bf16_downstream] [--bilm default]

Runs, one after the other, with the same seed and settings apart from the biLM's inference precision:
* ``elmo-tasks run configs/ner_conll2003.yaml`` (the scalar mix of the default biLM) with
  ``features.precision`` fp32 and bf16: dev and test F1;
* ``elmo-tasks wsd --config configs/wsd_semcor.yaml --features elmo`` trained on SemCor, tested on
  Senseval-2, 1-NN rows per layer only (no trained head, no probes), with ``sources.elmo.precision`` fp32
  and bf16: F1 per layer.
On a CPU without AVX512-BF16/AMX the bf16 runs use the emulated path (``ELMO_TASKS_BF16_EMULATE=1``),
which is the hardware path's arithmetic up to the fp32 summation order (docs/precision.md): the accuracy
figures carry over, the seconds do not. Each variant gets its own feature cache (cold), so the
seconds are comparable between fp32 and bf16 within this run.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from elmo_features.model.precision import bf16_cpu_support  # noqa: E402
from elmo_features.util.provenance import git_commit, machine, timestamp, write_text_atomic  # noqa: E402

WSD = REPO.parent / "shared" / "data" / "wsd"


def _run(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/bench/bf16_downstream", help="writes OUT.json and OUT.md")
    ap.add_argument("--bilm", default="default")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", help="scratch folder (default: temporary)")
    args = ap.parse_args()
    hardware, why = bf16_cpu_support()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    if not hardware:
        env["ELMO_TASKS_BF16_EMULATE"] = "1"
    work = Path(args.work or tempfile.mkdtemp(prefix="bf16_downstream_"))
    rows = {}
    for precision in ("fp32", "bf16"):
        run_dir, cache = work / f"ner-{precision}", work / f"cache-ner-{precision}"
        seconds = _run(["elmo-tasks", "run", "configs/ner_conll2003.yaml", "--set", f"features.bilm={args.bilm}",
                        "--set", f"features.precision={precision}", "--set", f"training.seed={args.seed}",
                        "--out", str(run_dir), "--cache-dir", str(cache), "--progress", "off"], env)
        m = json.loads((run_dir / "metrics.json").read_text())
        rows[f"ner/{precision}"] = {"dev_f1": m["dev"]["f1"], "test_f1": m["test"]["f1"], "seconds": round(seconds, 1),
                                    "features_seconds": m["seconds"]["features"]}
    for precision in ("fp32", "bf16"):
        out, cache = work / f"wsd-{precision}", work / f"cache-wsd-{precision}"
        seconds = _run(["elmo-tasks", "wsd", "--config", "configs/wsd_semcor.yaml", "--features", "elmo",
                        "--bilm", args.bilm, "--set", f"sources.elmo.precision={precision}", "--set", "knn=[layers]",
                        "--set", "head=null", "--set", "probes=false", "--train", str(WSD / "semcor"),
                        "--test", str(WSD / "senseval2"), "--out", str(out), "--cache-dir", str(cache), "--no-plot",
                        "--threads", "1", "--progress", "off"], env)
        scores = json.loads((out / "scores.json").read_text())
        rows[f"wsd/{precision}"] = {"scores": scores, "seconds": round(seconds, 1)}
    report = {"command": "python scripts/bf16_downstream.py " + " ".join(sys.argv[1:]), "git_commit": git_commit(REPO),
              "date": timestamp(), "machine": machine(), "bf16_hardware": hardware, "bf16_hardware_note": why,
              "emulated": not hardware, "bilm": args.bilm, "seed": args.seed, "rows": rows}
    out = REPO / args.out
    write_text_atomic(out.with_suffix(".json"), json.dumps(report, indent=1) + "\n")
    write_text_atomic(out.with_suffix(".md"), render(report))
    print(render(report))


def _wsd_layers(scores: dict) -> dict[str, float]:
    """{row label: F1 on Senseval-2} for the 1-NN rows of a ``wsd`` scores.json."""
    return {row["label"]: row["scores"]["senseval2"]["F1"] for row in scores["rows"]
            if row.get("group") == "knn" and "senseval2" in row.get("scores", {})}


def render(r: dict) -> str:
    m = r["machine"]
    path = "emulated (no bf16 in this CPU: the accuracy carries over, the seconds do not)" if r["emulated"] \
        else "hardware"
    lines = ["# bf16 vs fp32 downstream: NER dev F1 and WSD 1-NN on Senseval-2 (one seed)", "",
             f"- command: `{r['command']}`", f"- git commit: `{r['git_commit']}`, {r['date']}",
             f"- machine: {m.get('cpu_model')}, {m.get('cpu_cores')} cores; bf16 path: {path}",
             f"- biLM: `{r['bilm']}`; seed {r['seed']}", "",
             "| task | metric | fp32 | bf16 | bf16 - fp32 | seconds fp32 / bf16 |", "|---|---|---|---|---|---|"]
    a, b = r["rows"]["ner/fp32"], r["rows"]["ner/bf16"]
    for key in ("dev_f1", "test_f1"):
        lines.append(f"| NER CoNLL-2003 (scalar mix, crf_tagger) | {key.replace('_', ' ')} | {100 * a[key]:.2f} | "
                     f"{100 * b[key]:.2f} | {100 * (b[key] - a[key]):+.2f} | {a['seconds']:.0f} / {b['seconds']:.0f} |")
    wa, wb = _wsd_layers(r["rows"]["wsd/fp32"]["scores"]), _wsd_layers(r["rows"]["wsd/bf16"]["scores"])
    for name in wa:
        if name in wb:
            lines.append(f"| WSD SemCor -> Senseval-2, {name} | F1 | {wa[name]:.1f} | {wb[name]:.1f} | "
                         f"{wb[name] - wa[name]:+.1f} | {r['rows']['wsd/fp32']['seconds']:.0f} / "
                         f"{r['rows']['wsd/bf16']['seconds']:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()

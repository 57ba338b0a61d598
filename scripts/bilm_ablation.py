"""The biLM lever table: each biLM lever's effect on held-out perplexity and on downstream probes.

    python scripts/bilm_ablation.py [--out results/bilm]

Reads only measured result files (each names its own command and commit):
- the biLM reports (held-out perplexity over all of heldout.txt.gz, shipped fp16 weights; learning curves):
  results/bilm/first_default/default.json, default_charonly.json, history/default_4m.json,
  candidates/glove_prior_8m/glove_prior_8m.json, history/default_14m.json, history/default_21m.json,
  history/default_34m.json, history/default_48m.json and default.json;
- each model's NER summary (dev F1 of the scalar-mix row, 3 seeds), WSD scores (1-NN F1 of the best biLM layer
  on Senseval-2 and on ALL) and sentiment summary (5-fold CV paired bootstrap, GloVe vs GloVe + mix);
- results/bilm/train_levers*.json when present (bench/train_levers.py: threads, batch size, precision; one
  file per machine).
Writes results/bilm/ablation.{md,json} and results/bilm/learning_curves.png.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from elmo_features.util.provenance import atomic_path, git_commit, machine, write_text_atomic  # noqa: E402
from elmo_tasks.experiment.plots import pyplot  # noqa: E402

# (label, lever, bilm report, NER summary + source, WSD scores + source, sentiment summary, tokens before this run)
CAND = "results/bilm/candidates/glove_prior_8m"
MODELS = [
    ("char-only, 7.0M tokens (first default)", "baseline",
     "results/bilm/first_default/default.json", ("results/ner_conll2003/first_default/summary.json", "elmo_mix"),
     ("results/wsd/first_default/scores.json", "elmo"), None, 0),
    ("char-only, 7.0M + 4.0M tokens (`default_charonly`)", "more tokens (warm start from the first default)",
     "results/bilm/default_charonly.json", ("results/ner_conll2003/charonly_rows/summary.json", "elmo_charonly_mix"),
     ("results/wsd/scores.json", "elmo_charonly"), None, 7_003_087),
    ("GloVe prior, 4.0M tokens from scratch (the second `default`)",
     "static-vector prior (frozen GloVe 6B 50d in the token layer)",
     "results/bilm/history/default_4m.json", ("results/ner_conll2003/default_4m/summary.json", "elmo_mix"),
     ("results/wsd/default_4m/scores.json", "elmo"), "results/sentiment_polarity/default_4m/summary.json", 0),
    ("GloVe prior, 4.0M + 4.5M tokens (candidate `glove_prior_8m`)", "more tokens (warm start with its softmax)",
     f"{CAND}/glove_prior_8m.json", (f"{CAND}/ner/summary.json", "elmo_mix"), (f"{CAND}/wsd/scores.json", "elmo"),
     f"{CAND}/sentiment/summary.json", 4_002_623),
    ("GloVe prior, 8.5M + 6.0M tokens (the third `default`)", "more tokens, 2 threads (warm start with its softmax)",
     "results/bilm/history/default_14m.json", ("results/ner_conll2003/default_14m/summary.json", "elmo_mix"),
     ("results/wsd/default_14m/scores.json", "elmo"), "results/sentiment_polarity/default_14m/summary.json",
     8_510_195),
    ("GloVe prior, 14.5M + 7.0M tokens with the WordNet glosses (the fourth `default`)",
     "more tokens, 12.7% of them WordNet glosses (warm start with its softmax)",
     "results/bilm/history/default_21m.json", ("results/ner_conll2003/default_21m/summary.json", "elmo_mix"),
     ("results/wsd/default_21m/scores.json", "elmo"), "results/sentiment_polarity/default_21m/summary.json",
     14_521_431),
    ("GloVe prior, 21.5M + 13.0M tokens with the WordNet glosses, bf16 (the fifth `default`)",
     "more tokens, bf16 autocast on AMX (warm start without its softmax: fresh softmax, 80 frozen steps)",
     "results/bilm/history/default_34m.json", ("results/ner_conll2003/default_34m/summary.json", "elmo_mix"),
     ("results/wsd/default_34m/scores.json", "elmo"), "results/sentiment_polarity/default_34m/summary.json",
     21_529_027),
    ("GloVe prior, 34.5M + 14.0M tokens with the WordNet glosses, bf16 (the sixth `default`)",
     "more tokens, bf16 (warm start with its own softmax, nothing frozen)",
     "results/bilm/history/default_48m.json", ("results/ner_conll2003/default_48m/summary.json", "elmo_mix"),
     ("results/wsd/default_48m/scores.json", "elmo"), "results/sentiment_polarity/default_48m/summary.json",
     34_539_254),
    ("GloVe prior, 48.5M + 9.0M tokens with the WordNet glosses, bf16, 1 thread (`default`)",
     "more tokens, bf16 (warm start with its own softmax, nothing frozen; new shuffle)",
     "results/bilm/default.json", ("results/ner_conll2003/summary.json", "elmo_mix"),
     ("results/wsd/scores.json", "elmo"), "results/sentiment_polarity/summary.json", 48_547_290),
]


def load(path: str) -> dict | None:
    p = ROOT / path
    return json.loads(p.read_text(encoding="utf-8")) if p.exists() else None


def ner_dev(path: str, source: str) -> tuple[float, float] | None:
    s = load(path)
    for r in (s or {}).get("sources", []):
        if r["source"] == source and r.get("dev"):
            f1 = r["dev"]["f1"]
            return f1["mean"] * 100, (f1["std"] or 0.0) * 100
    return None


def wsd_best_knn(path: str, source: str) -> dict | None:
    s = load(path)
    if s is None:
        return None
    rows = [r for r in s["rows"] if r["source"] == source and r["group"] == "knn" and isinstance(r["layer"], int)]
    if not rows:
        return None
    out = {}
    for split in ("senseval2", "ALL"):
        best = max(rows, key=lambda r: r["scores"][split]["F1"])
        out[split] = (best["scores"][split]["F1"], best["layer"])
    base = next(r for r in s["rows"] if r["id"] == "wn_first_sense")["scores"]
    out["first_sense"] = {k: base[k]["F1"] for k in ("senseval2", "ALL")}
    return out


def sentiment_gain(path: str | None) -> dict | None:
    """GloVe + mix minus GloVe in 5-fold CV accuracy (x100), with the bootstrap 95% CI (the sentiment target)."""
    cv = (load(path) or {}).get("cross_validation") if path else None
    for p in (cv or {}).get("paired", []):
        if p["a"] == "glove" and p["b"] == "glove+elmo_mix":
            b = p["bootstrap"]
            return {"delta": b["delta"] * 100, "ci95": [c * 100 for c in b["ci95"]], "seeds": p["seeds"]}
    return None


def plot(curves: list[tuple[str, list[float], list[float]]], path: Path) -> None:
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for label, x, y in curves:
        ax.plot(x, y, marker="o", ms=3, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("tokens the model has seen (millions)")
    ax.set_ylabel("held-out ppl, first 500 sentences (log)")
    ax.set_title("biLM learning curves (mean of forward and backward)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/bilm")
    args = ap.parse_args()
    out = ROOT / args.out
    commit, m = git_commit(), machine()
    rows, curves = [], []
    for label, lever, report, (ner_path, ner_src), (wsd_path, wsd_src), senti_path, before in MODELS:
        rep = load(report)
        row = {"model": label, "lever": lever, "report": report}
        if rep:
            row.update(tokens=rep["tokens_seen"] + before, ppl=rep["perplexity_shipped_fp16"]["mean"],
                       train_hours=rep["train_wall_seconds"] / 3600)
            curves.append((label, [(h["tokens"] + before) / 1e6 for h in rep.get("history", [])],
                           [h["mean"] for h in rep.get("history", [])]))
        row["ner_dev_f1"] = ner_dev(ner_path, ner_src)
        row["wsd"] = wsd_best_knn(wsd_path, wsd_src)
        row["sentiment_gain"] = sentiment_gain(senti_path)
        rows.append(row)
    levers = [json.loads(f.read_text()) for f in sorted((ROOT / "results/bilm").glob("train_levers*.json"))]
    fmt = lambda v, f="{:.1f}": "-" if v is None else f.format(v)
    md = ["# biLM levers: held-out perplexity and downstream probes", "",
          f"Made by `python scripts/bilm_ablation.py` at commit `{commit}` ({m['cpu_cores']} CPU cores, "
          f"{m['cpu_model']}) from the measured result files named in each row; nothing is re-measured here.",
          "", "| model | lever | tokens seen | held-out ppl (mean, all 4,775 sentences) | NER dev F1, scalar mix "
          "(3 seeds; char-only continued: 1 seed) | WSD 1-NN best layer, Senseval-2 | WSD 1-NN best layer, ALL | "
          "sentiment 5-fold CV, GloVe + mix minus GloVe [95% CI] | training wall time |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ner = r["ner_dev_f1"]
        w = r["wsd"] or {}
        s2 = f"{w['senseval2'][0]:.1f} (layer {w['senseval2'][1]})" if w else "-"
        al = f"{w['ALL'][0]:.1f} (layer {w['ALL'][1]})" if w else "-"
        g = r["sentiment_gain"]
        sg = (f"{g['delta']:+.2f} [{g['ci95'][0]:+.2f}, {g['ci95'][1]:+.2f}], {len(g['seeds'])} "
              f"seed{'s' if len(g['seeds']) > 1 else ''}" if g else "-")
        md.append(f"| {r['model']} | {r['lever']} | {fmt(r.get('tokens'), '{:,}')} | {fmt(r.get('ppl'))} | "
                  f"{f'{ner[0]:.2f} ± {ner[1]:.2f}' if ner else '-'} | {s2} | {al} | {sg} | "
                  f"{fmt(r.get('train_hours'), '{:.2f} h')} |")
    fs = next((r["wsd"]["first_sense"] for r in rows if r["wsd"]), None)
    if fs:
        md += ["", f"WordNet first sense (the gate for WSD): Senseval-2 {fs['senseval2']:.1f}, ALL {fs['ALL']:.1f}. "
               "Models were chosen on held-out perplexity and NER dev F1, never on the WSD or sentiment test data."]
    md += ["", "Training throughput levers (real-corpus batches; compare figures within one table only):", ""]
    for lev in levers:
        md += [f"`{lev['command']}` at commit `{lev['git_commit']}`, CPU {lev['machine']['cpu_model']}, "
               f"bf16 matmul support: {lev['bf16']}.", "", "| threads | batch tokens | precision | train tok/s |",
               "|---|---|---|---|"]
        md += [f"| {m['threads']} | {m['batch_tokens']:,} | {m.get('precision', 'fp32')} | {m['tok_per_s']:,.0f} |"
               for m in lev["measurements"]]
        md += [""]
    if not levers:
        md += ["(results/bilm/train_levers*.json not measured yet: `python bench/train_levers.py`)"]
    md += ["", "Learning curves of all models: `learning_curves.png` (tokens counted from the start of each "
           "model's chain of warm starts, so a continued run begins where its starting model stopped)."]
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "ablation.md", "\n".join(md) + "\n")
    write_text_atomic(out / "ablation.json", json.dumps({"commit": commit, "rows": rows, "levers": levers},
                                                         indent=1) + "\n")
    if curves:
        plot(curves, out / "learning_curves.png")
    print("\n".join(md))


if __name__ == "__main__":
    main()

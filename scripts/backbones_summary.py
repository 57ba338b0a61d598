"""Combine the LSTM vs Transformer backbone comparison into DIR/summary.{md,json} + DIR/layers.png.

    python scripts/backbones_summary.py results/backbones

Reads only measured result files (nothing is re-measured here):

* ``results/bench/backbone_compare.json``: training and inference tokens/s of both backbones (same run);
* ``results/bilm/default.json`` (the LSTM `default`) and ``DIR/transformer.json`` (scripts/ship_default_bilm.py):
  tokens seen, training wall time, held-out perplexity of the fp16 weights;
* NER: ``results/ner_conll2003/summary.json`` (the LSTM rows of the main comparison: same config, head and
  seeds) and ``DIR/ner/summary.json`` (the Transformer rows of configs/backbones/ner.yaml),
  ``DIR/ner_layers_lstm/`` and ``DIR/ner_layers_transformer/`` (one seed per layer of each backbone);
* sentiment: ``results/sentiment_polarity/summary.json`` (LSTM rows) and ``DIR/sentiment/summary.json``
  (GloVe and the Transformer rows; 5-fold cross-validation with paired tests against GloVe);
* WSD: ``DIR/wsd/scores.json`` (1-NN per layer of both backbones, configs/backbones/wsd.yaml).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from elmo_features.util.provenance import write_text_atomic  # noqa: E402
from elmo_tasks.experiment.plots import pyplot  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def load(path: Path) -> Any | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def sources(summary: dict | None, rename: dict[str, str] | None = None) -> dict[str, dict]:
    """source name -> its summary entry (optionally renamed)."""
    if summary is None:
        return {}
    rename = rename or {}
    return {rename.get(s["source"], s["source"]): s for s in summary["sources"]}


def pm(entry: dict | None, split: str, metric: str, unit: str = "seeds") -> str:
    """'mean ± std (n units)' x100 of a compare summary entry (runs = seeds, or folds), or '-'."""
    if entry is None:
        return "-"
    m = entry[split][metric]
    n = len(entry["seeds"])
    return f"{100 * m['mean']:.2f} ± {100 * m['std']:.2f} ({n} {unit})" if n > 1 else f"{100 * m['mean']:.2f} (1 seed)"


def paired_line(summary: dict | None, b: str) -> str:
    """The paired bootstrap CI of GloVe vs ``b`` from a cross-validated compare summary."""
    cv = (summary or {}).get("cross_validation") or {}
    for p in cv.get("paired", []):
        if p["a"] == "glove" and p["b"] == b:
            lo, hi = p["bootstrap"]["ci95"]
            mc = "; ".join(f"McNemar p={v['p']:.3g}" for v in p["mcnemar"].values())
            return f"{100 * p['bootstrap']['delta']:+.2f} [{100 * lo:+.2f}, {100 * hi:+.2f}] ({mc})"
    return "-"


def wsd_rows(scores: dict | None) -> list[dict]:
    return [] if scores is None else scores["rows"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", default="results/backbones")
    args = ap.parse_args()
    out = Path(args.dir)
    bench = load(REPO / "results/bench/backbone_compare.json")
    lstm_lm, tr_lm = load(REPO / "results/bilm/default.json"), load(out / "transformer.json")
    ner = {**sources(load(REPO / "results/ner_conll2003/summary.json"),
                     {"elmo_mix": "lstm_mix", "glove+elmo_mix": "glove+lstm_mix"}),
           **sources(load(out / "ner/summary.json")), **sources(load(out / "ner_layers_lstm/summary.json")),
           **sources(load(out / "ner_layers_transformer/summary.json"))}
    sent_tr = load(out / "sentiment/summary.json")
    sent_lstm = load(REPO / "results/sentiment_polarity/summary.json")
    sent = {**sources(sent_lstm, {"elmo_mix": "lstm_mix", "glove+elmo_mix": "glove+lstm_mix"}), **sources(sent_tr)}
    wsd = load(out / "wsd/scores.json")

    md = ["# LSTM vs Transformer biLM backbones at equal training time", "",
          "Made by `python scripts/backbones_summary.py " + args.dir + "` from the measured files named below; "
          "nothing is re-measured here. Both biLMs have the same token layer (char CNN + frozen GloVe 6B 50d "
          "prior), softmax, data, optimiser and schedule shape; only the contextual stack differs (2 layers, "
          "width 128 per direction, about 2.37M parameters each). Test scores x100.", ""]
    md += ["## Language models", "", "| backbone | train tok/s (bench, 1 thread) | inference tok/s | tokens seen | "
           "training wall time | held-out perplexity (mean fwd/bwd, all 4,775 sentences) |", "|---|---|---|---|---|---|"]
    for name, lm, key in [("LSTM (`default`)", lstm_lm, "lstm"), ("Transformer", tr_lm, "transformer")]:
        b = (bench or {}).get("results", {}).get(key, {})
        tps = f"{b['train_tokens_per_s']:,.0f}" if b else "-"
        ips = f"{b['infer_tokens_per_s']:,.0f}" if b else "-"
        if lm is None:
            md.append(f"| {name} | {tps} | {ips} | not trained yet | - | - |")
            continue
        md.append(f"| {name} | {tps} | {ips} | {lm['tokens_seen']:,} | {lm['train_wall_seconds'] / 3600:.2f} h | "
                  f"{lm['perplexity_shipped_fp16']['mean']:.1f} |")
    md += ["", "Training tokens/s and inference tokens/s: `results/bench/backbone_compare.json` (same run, idle "
           "machine). The Transformer's token budget is the LSTM's 4.0M tokens times their training tok/s ratio, so "
           "both get the same CPU time; the measured wall times (each run shared the 2-core machine with one other "
           "job) are in the table.", ""]

    md += ["## NER (CoNLL-2003 test F1, crf_tagger of configs/ner_conll2003.yaml)", "",
           "| features | LSTM | Transformer |", "|---|---|---|"]
    for label, a, b in [("mix alone", "lstm_mix", "transformer_mix"), ("GloVe + mix", "glove+lstm_mix", "glove+transformer_mix")]:
        md.append(f"| {label} | {pm(ner.get(a), 'test', 'f1')} | {pm(ner.get(b), 'test', 'f1')} |")
    for layer in range(3):  # one seed per layer: a probe of what each layer knows
        md.append(f"| layer {layer} only | {pm(ner.get(f'lstm_layer{layer}'), 'test', 'f1')} | "
                  f"{pm(ner.get(f'transformer_layer{layer}'), 'test', 'f1')} |")
    md += [f"| GloVe alone (reference) | {pm(ner.get('glove'), 'test', 'f1')} | |", ""]

    md += ["## Sentiment (sentence polarity, 5-fold cross-validation over 4,000 sentences, 1 seed)", "",
           "| features | LSTM | Transformer |", "|---|---|---|"]
    for label, a, b in [("mix alone", "lstm_mix", "transformer_mix"), ("GloVe + mix", "glove+lstm_mix", "glove+transformer_mix")]:
        md.append(f"| {label} | {pm(sent.get(a), 'test', 'accuracy', 'folds')} | {pm(sent.get(b), 'test', 'accuracy', 'folds')} |")
    md += [f"| GloVe alone (reference) | {pm(sent.get('glove'), 'test', 'accuracy', 'folds')} | |", ""]
    if sent_tr is None:
        md += ["The Transformer's sentiment rows were not run (the session's CPU time went to NER and WSD): "
               "`elmo-tasks compare configs/backbones/sentiment.yaml --sources glove,transformer_mix,"
               "glove+transformer_mix --seeds 1 --results-dir results/backbones/sentiment`.", ""]
    md += [
           "Paired difference to GloVe alone (out-of-fold accuracy x100, bootstrap 95% CI): "
           f"GloVe + LSTM mix {paired_line(sent_lstm, 'glove+elmo_mix')}; "
           f"GloVe + Transformer mix {paired_line(sent_tr, 'glove+transformer_mix')}.", ""]

    md += ["## WSD 1-NN (ELMo sec. 5.3; SemCor -> Senseval-2/3, SemEval-2007; F1)", ""]
    rows = wsd_rows(wsd)
    if rows:
        tests = [t["name"] for t in wsd["tests"]] + ["ALL"]
        md += ["| row | " + " | ".join(tests) + " |", "|---|" + "---|" * len(tests)]
        for r in rows:
            md.append(f"| {r['label']} | " + " | ".join(f"{r['scores'][t]['F1']:.1f}" for t in tests) + " |")
    else:
        md.append("(not run yet: configs/backbones/wsd.yaml)")
    md.append("")
    write_text_atomic(out / "summary.md", "\n".join(md) + "\n")
    data = {"bench": bench and bench.get("results"), "lm": {"lstm": lstm_lm and {k: lstm_lm[k] for k in (
        "tokens_seen", "train_wall_seconds", "perplexity_shipped_fp16")}, "transformer": tr_lm and {k: tr_lm[k] for k in (
        "tokens_seen", "train_wall_seconds", "perplexity_shipped_fp16")}},
        "ner": {k: {"test_f1": v["test"]["f1"], "seeds": v["seeds"]} for k, v in ner.items()},
        "sentiment": {k: {"test_accuracy": v["test"]["accuracy"], "seeds": v["seeds"]} for k, v in sent.items()},
        "wsd": [{"label": r["label"], "scores": {t: r["scores"][t]["F1"] for t in r["scores"]}} for r in rows]}
    write_text_atomic(out / "summary.json", json.dumps(data, indent=1) + "\n")
    plot_layers(out, ner, rows)
    print(f"wrote {out / 'summary.md'}")


def plot_layers(out: Path, ner: dict, rows: list[dict]) -> None:
    """Per-layer NER test F1 and WSD 1-NN ALL F1 of both backbones: what each layer knows."""
    plt = pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for key, label in [("lstm", "LSTM"), ("transformer", "Transformer")]:
        f1 = [100 * ner[f"{key}_layer{i}"]["test"]["f1"]["mean"] if f"{key}_layer{i}" in ner else float("nan")
              for i in range(3)]
        axes[0].plot(range(3), f1, marker="o", label=label)
        wsd = [next((r["scores"]["ALL"]["F1"] for r in rows if r.get("source") == key and r.get("layer") == i),
                    float("nan")) for i in range(3)]
        axes[1].plot(range(3), wsd, marker="o", label=label)
    first = next((r["scores"]["ALL"]["F1"] for r in rows if r["id"] == "wn_first_sense"), None)
    if first is not None:
        axes[1].axhline(first, color="grey", linestyle="--", label="WordNet first sense")
    axes[0].set(title="NER probe (1 seed): test F1", xlabel="layer", xticks=range(3))
    axes[1].set(title="WSD 1-NN: ALL F1", xlabel="layer", xticks=range(3))
    for ax in axes:
        ax.legend()
    fig.tight_layout()
    tmp = out / ".layers.png.tmp"
    fig.savefig(tmp, format="png", dpi=120)
    tmp.replace(out / "layers.png")


if __name__ == "__main__":
    main()

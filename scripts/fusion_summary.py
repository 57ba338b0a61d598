"""Combine the fusion study (docs/fusion.md) into DIR/summary.md, DIR/summary.json and DIR/fusion_weights.png.

    python scripts/fusion_summary.py results/fusion

Reads whatever of these exists under DIR (each written by a command in docs/fusion.md):

* ``ner/``, ``sentiment/``: summary.json of ``elmo-tasks compare configs/fusion/{ner,sentiment}.yaml``;
* ``ner_output/``, ``sentiment_output/``: the same with the head's ``output_mix`` (ELMo sec. 3.3);
* ``wsd/seed*/scores.json``: ``elmo-tasks wsd --config configs/fusion/wsd.yaml``, one folder per seed;

plus each compare run's folder (metrics.json for parameter counts and the fusion's learned weights;
config.yaml + model.pt for a head's output mix). Scores are test scores x100, mean ± sample std over seeds.
A variant beats ``scalar`` "beyond seed noise" when its worst seed beats scalar's best seed (and loses
beyond noise when its best seed is below scalar's worst); a default changes only on such wins on every task.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from elmo_features.util.provenance import write_text_atomic  # noqa: E402

TASKS = [("ner", "NER (CoNLL-2003, crf_tagger)"), ("sentiment", "sentiment (sentence polarity, sentence_classifier)"),
         ("wsd", "WSD (SemCor -> Senseval-2/3 + SemEval-2007, wsd_linear)")]
BASELINE = "scalar"


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def output_mix_report(run_dir: Path) -> dict | None:
    """The learned weights of a run's head ``output_mix`` (rebuilt from config.yaml + model.pt), or None."""
    import torch
    import yaml

    from elmo_tasks.features.fusion import build_fusion

    cfg = yaml.safe_load((run_dir / "config.yaml").read_text()) if (run_dir / "config.yaml").exists() else None
    metrics = _read_json(run_dir / "metrics.json")
    section = ((cfg or {}).get("head") or {}).get("output_mix")
    if not section or metrics is None or not (run_dir / "model.pt").exists():
        return None
    feats = metrics["features"]
    feats = next((s for s in feats.get("sources", []) if "num_layers" in s), feats)  # the elmo member of a concat
    fusion = build_fusion(section, feats["num_layers"], feats["dim"])
    state = torch.load(run_dir / "model.pt", map_location="cpu", weights_only=True)["state_dict"]
    prefix = "head.output_mix.fusion."
    fusion.load_state_dict({k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)})
    return {"name": section["name"], **fusion.report()}


def compare_rows(summary: dict, output: bool) -> list[dict]:
    """Per-seed records of an ``elmo-tasks compare`` summary (run folders read when they exist)."""
    metric = summary["primary_metric"]
    out = []
    for r in summary["runs"]:
        run_dir = Path(r["run_dir"])
        m = _read_json(run_dir / "metrics.json") or {}
        feats = m.get("features") or {}
        rec = {"variant": r["source"], "seed": r["seed"], "test": 100 * r["test"][metric],
               "dev": 100 * r["dev"][metric] if r.get("dev") else None, "seconds": r["seconds"]["total"],
               "epochs": r["epochs_run"], "parameters": m.get("trainable_parameters"),
               "mix_parameters": feats.get("mix_parameters"),
               "layer_weights": feats.get("layer_weights") or r.get("mix_weights"), "command": summary["command"]}
        if output:
            head = summary["head"]["output_mix"]
            rec["variant"] = f"{r['source']} + output_mix {head['name']}"
            rep = output_mix_report(run_dir) if run_dir.exists() else None
            rec["output_layer_weights"] = (rep or {}).get("layer_weights")
        out.append(rec)
    return out


def wsd_rows(score_files: list[Path]) -> list[dict]:
    """Per-seed records of the trained-head rows of ``elmo-tasks wsd`` scores.json files (one per seed)."""
    out = []
    for f in score_files:
        s = _read_json(f)
        seed = s["config"]["training"]["seed"]
        for row in s["rows"]:
            if row["group"] != "head" or "ALL" not in row["scores"]:
                continue
            head, feats = row["head"], row["head"]["features"]
            out.append({"variant": row["source"], "seed": seed, "test": row["scores"]["ALL"]["F1"],
                        "dev": 100 * head["best_dev"]["f1"] if head.get("best_dev") else None,
                        "seconds": head["train_seconds"], "epochs": head["epochs_run"], "parameters": None,
                        "mix_parameters": feats.get("mix_parameters"), "layer_weights": feats.get("layer_weights"),
                        "command": s["command"]})
    return out


def _mean_std(values: list[float]) -> tuple[float, float | None]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def _mean_vec(vectors: list[list[float] | None]) -> list[float] | None:
    vs = [v for v in vectors if v]
    return [statistics.fmean(v[i] for v in vs) for i in range(len(vs[0]))] if vs else None


def verdict(scores: list[float], base: list[float]) -> str:
    """"better" / "worse" beyond seed noise (seed ranges do not overlap), else "within noise"."""
    if len(scores) < 2 or len(base) < 2:
        return "n/a (one seed)"
    if min(scores) > max(base):
        return "better beyond seed noise"
    if max(scores) < min(base):
        return "worse beyond seed noise"
    return "within seed noise"


def aggregate(records: list[dict]) -> list[dict]:
    """One row per variant (first-seen order): mean ± std, parameters, seconds, weights, verdict vs scalar."""
    variants = list(dict.fromkeys(r["variant"] for r in records))
    by = {v: sorted((r for r in records if r["variant"] == v), key=lambda r: r["seed"]) for v in variants}
    base = by.get(BASELINE, [])
    base_params = base[0]["parameters"] if base else None
    base_mix = base[0]["mix_parameters"] if base else None
    rows = []
    for v in variants:
        rs = by[v]
        test = [r["test"] for r in rs]
        dev = [r["dev"] for r in rs if r["dev"] is not None]
        params = rs[0]["parameters"]
        if params is not None and base_params is not None:
            added = params - base_params
        elif rs[0]["mix_parameters"] is not None and base_mix is not None:
            added = rs[0]["mix_parameters"] - base_mix  # WSD: the head's size does not change with the fusion
        else:
            added = None
        rows.append({"variant": v, "seeds": [r["seed"] for r in rs], "test_scores": test,
                     "test": dict(zip(("mean", "std"), _mean_std(test))),
                     "dev": dict(zip(("mean", "std"), _mean_std(dev))) if dev else None,
                     "fusion_parameters": rs[0]["mix_parameters"], "trainable_parameters": params,
                     "parameters_added": added, "seconds_per_run": statistics.fmean(r["seconds"] for r in rs),
                     "epochs": [r["epochs"] for r in rs], "layer_weights": _mean_vec([r["layer_weights"] for r in rs]),
                     "output_layer_weights": _mean_vec([r.get("output_layer_weights") for r in rs]),
                     "vs_scalar": "-" if v == BASELINE or not base else verdict(test, [r["test"] for r in base])})
    return rows


def recommend(tasks: dict[str, list[dict]]) -> str:
    """Which default the measurements support (the rule in the module docstring)."""
    measured = [t for t, rows in tasks.items() if rows]
    if not measured:
        return "Nothing measured yet: the default stays `scalar`."
    lines = []
    for t in measured:
        best = max(tasks[t], key=lambda r: r["test"]["mean"])
        lines.append(f"- {t}: best mean is **{best['variant']}** ({best['test']['mean']:.2f}); "
                     f"vs scalar: {best['vs_scalar']}.")
    variants = {r["variant"] for t in measured for r in tasks[t]} - {BASELINE}
    winners = []
    for v in sorted(variants):
        where = [t for t in measured if any(r["variant"] == v for r in tasks[t])]
        if all(next(r for r in tasks[t] if r["variant"] == v)["vs_scalar"] == "better beyond seed noise"
               for t in where):
            winners.append(f"{v} (on {', '.join(where)})")
    if winners:
        lines.append(f"\nBetter than scalar beyond seed noise on every task it ran: {'; '.join(winners)}. "
                     "The measurements support changing the default to it.")
    else:
        lines.append("\nNo variant beats `scalar` beyond seed noise on every task it ran: **the default stays "
                     "`scalar`** (ELMo eq. 1), and the output placement stays off.")
    return "\n".join(lines)


def _pm(stat: dict | None) -> str:
    if not stat:
        return "-"
    return f"{stat['mean']:.2f}" + (f" ± {stat['std']:.2f}" if stat["std"] is not None else " (1 seed)")


def _num(x: int | None, sign: bool = False) -> str:
    return "-" if x is None else f"{x:+,}" if sign and x else f"{x:,}"


def to_markdown(s: dict) -> str:
    lines = ["# Fusion study: how to fuse the biLM layers", "",
             "Same head, data, training and seeds per task; only the fusion of the default biLM's 3 layers "
             "(D = 256) changes (docs/fusion.md). Test scores x100 (NER span F1, sentiment accuracy, WSD F1 on "
             "ALL), mean ± sample std over seeds. *vs scalar*: better/worse beyond seed noise = the seed ranges "
             "do not overlap. Fusion params: the input fusion's; params added: trainable parameters minus the "
             "scalar row's (an output mix's fusion and output weights included).", ""]
    for key, title in TASKS:
        rows = s["tasks"].get(key) or []
        lines += [f"## {title}", ""]
        if not rows:
            lines += ["(not run yet)", ""]
            continue
        lines += ["| variant | test | dev | vs scalar | fusion params | params added | s/run | epochs | "
                  "layer share (mean over seeds) |", "|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            w = " / ".join(f"{x:.2f}" for x in r["layer_weights"]) if r["layer_weights"] else "-"
            if r.get("output_layer_weights"):
                w += "; output: " + " / ".join(f"{x:.2f}" for x in r["output_layer_weights"])
            lines.append(f"| {r['variant']} | {_pm(r['test'])} | {_pm(r['dev'])} | {r['vs_scalar']} | "
                         f"{_num(r['fusion_parameters'])} | {_num(r['parameters_added'], sign=True)} | "
                         f"{r['seconds_per_run']:.0f} | {', '.join(map(str, r['epochs']))} | {w} |")
        lines.append("")
    lines += ["## Default", "", s["recommendation"], "", "## Commands", ""]
    lines += [f"- `{c}`" for c in s["commands"]]
    lines += ["", f"Summarised by `python scripts/fusion_summary.py {s['dir']}`. Layer share: scalar = softmax "
              "weights; layer_attention = mean per-token attention over the evaluated tokens; gated = mean gate "
              "per layer, normalised; concat_project = each layer's share of the map's Frobenius norm.", ""]
    return "\n".join(lines)


def summarize(root: Path) -> dict:
    """Read the study under ``root``; return the summary dict."""
    tasks: dict[str, list[dict]] = {}
    commands: list[str] = []
    for key in ("ner", "sentiment"):
        records = []
        for sub, output in ((key, False), (f"{key}_output", True)):
            summary = _read_json(root / sub / "summary.json")
            if summary:
                records += compare_rows(summary, output)
                commands.append(summary["command"])
        tasks[key] = aggregate(records)
    wsd_files = sorted((root / "wsd").glob("seed*/scores.json"))
    records = wsd_rows(wsd_files)
    commands += list(dict.fromkeys(r["command"] for r in records))
    tasks["wsd"] = aggregate(records)
    return {"dir": str(root), "tasks": tasks, "commands": commands, "recommendation": recommend(tasks)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", type=Path, help="the study folder (results/fusion)")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    s = summarize(args.dir)
    write_text_atomic(args.dir / "summary.json", json.dumps(s, indent=1) + "\n")
    write_text_atomic(args.dir / "summary.md", to_markdown(s))
    if not args.no_plot:
        from elmo_tasks.experiment.plots import plot_layer_weights

        panels = []
        for key, title in TASKS:
            bars = [(r["variant"], r["layer_weights"]) for r in s["tasks"].get(key, []) if r["layer_weights"]
                    and "output_mix" not in r["variant"]]
            bars += [(f"{r['variant']} (the output mix)", r["output_layer_weights"])
                     for r in s["tasks"].get(key, []) if r.get("output_layer_weights")]
            panels.append((title.split(" (")[0], bars))
        plot_layer_weights(panels, args.dir / "fusion_weights.png", "learned layer shares per fusion (mean over seeds)")
    print(f"wrote {args.dir / 'summary.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

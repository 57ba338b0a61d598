"""A comparison's summary: per-source mean and std over seeds, cross-validation statistics, and the files
``compare`` writes (summary.md / .csv / .json and plots)."""
from __future__ import annotations

import csv
import io
import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from elmo_features.util.provenance import write_text_atomic

from elmo_tasks.experiment.config import RunConfig
from elmo_tasks.experiment.crossval import fold_indices, paired_tests
from elmo_tasks.experiment.plots import plot_mix_weights, plot_scores


# the frozen models a run's features report records, by the prefix of their report key (``FeatureSource.
# fingerprint_key``): a biLM, a Transformer encoder, or another source's frozen model (a plugin's default)
FROZEN_KINDS = (("bilm", "biLM"), ("encoder", "encoder"), ("vectors", "vectors"), ("model", "frozen model"))


def find_in_report(report: dict, key: str) -> Any:
    """The first value of ``key`` in a (possibly nested, concat) features report."""
    if key in report:
        return report[key]
    for sub in report.get("sources", []):
        v = find_in_report(sub, key)
        if v is not None:
            return v
    return None


def mean_std(values: list[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (None for a single value: one seed has no spread)."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def summarize(cfg: RunConfig, runs: list[dict], info: dict) -> dict:
    """Aggregate per-run records into per-source rows."""
    metric = runs[0]["primary_metric"] if runs else "?"
    sources = []
    for name in dict.fromkeys(r["source"] for r in runs):
        rs = [r for r in runs if r["source"] == name]
        row: dict[str, Any] = {"source": name, "features": cfg.compare.sources[name], "seeds": [r["seed"] for r in rs]}
        for split in ("test", "dev"):
            if all(r.get(split) for r in rs):
                keys = [k for k in rs[0][split] if k != "unseen_labels"]
                row[split] = {k: dict(zip(("mean", "std"), mean_std([r[split][k] for r in rs]))) for k in keys}
        weights = [r["mix_weights"] for r in rs if r.get("mix_weights")]
        if weights:
            row["mix_weights"] = [statistics.fmean(w[k] for w in weights) for k in range(len(weights[0]))]
            row["gamma"] = statistics.fmean(r["gamma"] for r in rs)
        if any(r.get("oov_rate") for r in rs):
            row["oov_rate"] = rs[0]["oov_rate"]
        row["seconds_per_run"] = statistics.fmean(r["seconds"]["total"] for r in rs)
        row["epochs"] = [r["epochs_run"] for r in rs]
        for kind, _ in FROZEN_KINDS:  # which frozen weights the runs used (a named model can be replaced)
            fingerprints = list(dict.fromkeys(r[f"{kind}_fingerprint"] for r in rs if r.get(f"{kind}_fingerprint")))
            if fingerprints:
                row[f"{kind}_fingerprints"] = fingerprints
        sources.append(row)
    out = {**info, "primary_metric": metric, "sources": sources, "runs": runs}
    if info.get("folds"):
        out["cross_validation"] = cross_validation(runs, info["folds"], info["fold_seed"], info["pool_size"])
    return out


def cross_validation(runs: list[dict], k: int, fold_seed: int, n: int) -> dict:
    """Out-of-fold accuracy per source and seed, and paired tests of every source against the first."""
    folds = fold_indices(n, k, fold_seed)
    correct: dict[str, dict[int, np.ndarray]] = {}
    for r in runs:
        if r.get("test_correct") is None:
            continue
        by_seed = correct.setdefault(r["source"], {})
        arr = by_seed.setdefault(r["seed"], np.full(n, -1, dtype=np.int8))
        arr[folds[r["fold"]]] = np.frombuffer(r["test_correct"].encode(), dtype=np.uint8) - ord("0")
    complete = {name: {s: a for s, a in d.items() if (a >= 0).all()} for name, d in correct.items()}
    complete = {name: d for name, d in complete.items() if d}
    oof = {name: {str(s): float(a.mean()) for s, a in d.items()} for name, d in complete.items()}
    tests = paired_tests(complete, next(iter(complete))) if len(complete) > 1 else []
    return {"folds": k, "fold_seed": fold_seed, "sentences": n, "out_of_fold_accuracy": oof, "paired": tests}


def _pm(stat: dict | None, scale: float = 100.0) -> str:
    if stat is None:
        return "-"
    if stat["std"] is None:
        return f"{stat['mean'] * scale:.2f} (1 seed)"
    return f"{stat['mean'] * scale:.2f} ± {stat['std'] * scale:.2f}"


def _bilm_note(row: dict) -> str:
    """Which biLM / encoder weights a source's runs used (fingerprint prefixes); a warning when they differ."""
    notes = []
    for kind, label in FROZEN_KINDS:
        fps = row.get(f"{kind}_fingerprints") or []
        if len(fps) > 1:
            notes.append(f"WARNING: its runs used {len(fps)} different {label}s: {', '.join(f[:12] for f in fps)}")
        elif fps:
            notes.append(f"{label} `{fps[0][:12]}`")
    return f" ({'; '.join(notes)})" if notes else ""


def _own_seeds(s: dict) -> str:
    """The sources that ran with other seeds (compare.seeds_by_source), for the summary's seeds line."""
    own = s.get("seeds_by_source") or {}
    return f" ({'; '.join(f'{n}: ' + ', '.join(map(str, ss)) for n, ss in own.items())})" if own else ""


def to_markdown(s: dict) -> str:
    m = s["primary_metric"]
    lines = [f"# {s['name']}: feature-source comparison", "",
             f"- command: `{s['command']}`",
             f"- elmo-tasks {s.get('version', 'version not recorded')}, git commit: `{s['git_commit']}`",
             f"- machine: {s['machine']['cpu_cores']} CPU cores (torch threads {s['machine']['torch_threads']}, "
             f"torch {s['machine']['torch']}, Python {s['machine']['python']})",
             f"- wall time: {s['wall_seconds']:.0f} s in total, finished {s['finished']}",
             f"- head: `{json.dumps(s['head'])}`", f"- data: `{json.dumps(s['data'])}`",
             f"- training: `{json.dumps(s['training'])}`",
             f"- seeds: {', '.join(map(str, s['seeds']))}{_own_seeds(s)}; scores are mean ± sample std over seeds, "
             f"x100; early stopping on dev {m}", "",
             f"| source | test {m} | dev {m} | other test metrics | mix weights (softmax) | gamma | OOV rate test | "
             "epochs | s/run |", "|---|---|---|---|---|---|---|---|---|"]
    for r in s["sources"]:
        test, dev = r.get("test", {}), r.get("dev", {})
        other = ", ".join(f"{k} {_pm(v)}" for k, v in test.items() if k != m)
        mix = " / ".join(f"{w:.3f}" for w in r["mix_weights"]) if r.get("mix_weights") else "-"
        gamma = f"{r['gamma']:.3f}" if r.get("gamma") is not None else "-"
        oov = f"{r['oov_rate']['test'] * 100:.2f}%" if (r.get("oov_rate") or {}).get("test") is not None else "-"
        lines.append(f"| {r['source']} | {_pm(test.get(m))} | {_pm(dev.get(m))} | {other or '-'} | {mix} | {gamma} | "
                     f"{oov} | {', '.join(map(str, r['epochs']))} | {r['seconds_per_run']:.0f} |")
    if s.get("cross_validation"):
        lines += cv_markdown(s["cross_validation"])
    lines += ["", "Feature sources:", ""]
    lines += [f"- **{r['source']}**{_bilm_note(r)}: `{json.dumps(r['features'])}`" for r in s["sources"]]
    lines += ["", "## Runs", "", f"| source | seed | dev {m} | test {m} | best epoch | features s | train s | "
              "total s | run folder |", "|---|---|---|---|---|---|---|---|---|"]
    for r in s["runs"]:
        lines.append(f"| {r['source']} | {r['seed']} | {(r.get('dev') or {}).get(m, float('nan')) * 100:.2f} | "
                     f"{(r.get('test') or {}).get(m, float('nan')) * 100:.2f} | {r['best_epoch']} | "
                     f"{r['seconds']['features']:.1f} | {r['seconds']['train']:.1f} | {r['seconds']['total']:.1f} | "
                     f"`{r['run_dir']}` |")
    unseen = {r["source"]: r["test_unseen_labels"] for r in s["runs"] if r.get("test_unseen_labels")}
    if unseen:
        lines += ["", f"Test labels never seen in training (counted as errors): {json.dumps(unseen)}"]
    return "\n".join(lines) + "\n"


def result_table(s: dict) -> str:
    """The comparison's result as text for the terminal: per source, the primary metric's mean ± std over seeds
    (x100) on test and dev, and with cross-validation the paired test against the first source."""
    m = s["primary_metric"]
    paired = {t["b"]: t for t in (s.get("cross_validation") or {}).get("paired", [])}
    first = next(iter(paired.values()))["a"] if paired else None
    head = ["source", f"test {m}", f"dev {m}", "runs"] + ([f"vs {first}: B - A [95% CI], P(B <= A)"] if paired else [])
    rows = [head]
    for r in s["sources"]:
        test, dev = r.get("test", {}), r.get("dev", {})
        row = [r["source"], _pm(test.get(m)), _pm(dev.get(m)), str(len(r["epochs"]))]
        if paired:
            t = paired.get(r["source"])
            bs = t["bootstrap"] if t else None
            row.append("-" if bs is None else f"{bs['delta'] * 100:+.2f} [{bs['ci95'][0] * 100:+.2f}, "
                                              f"{bs['ci95'][1] * 100:+.2f}], {bs['p_b_not_better']:.4f}")
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    seeds = ", ".join(map(str, s["seeds"]))
    return "\n".join([f"{s['name']}: {m} x100, mean ± sample std over seeds {seeds}"
                      + (f" and {s['cross_validation']['folds']} folds" if s.get("cross_validation") else ""),
                      *lines])


def cv_markdown(cv: dict) -> list[str]:
    """The cross-validation section: out-of-fold accuracy and paired tests against the first source (a task whose
    runs record no per-sentence correctness, such as span F1: the section says so, without those tables)."""
    lines = ["", f"## {cv['folds']}-fold cross-validation over all {cv['sentences']} sentences", "",
             f"Folds from one fixed permutation (fold_seed {cv['fold_seed']}), the same for every source; each run "
             "tests on one fold and stops early on the next. The table above averages the per-fold scores"]
    if not cv["out_of_fold_accuracy"]:
        lines[-1] += (". This task's metric is not a per-sentence score (span F1, for one, counts spans over a whole test "
                      "fold), so there is no out-of-fold accuracy per sentence and no paired tests on sentences.")
        return lines
    lines[-1] += "; below, every sentence is predicted once per seed (out of fold)."
    lines += ["", "| source | out-of-fold accuracy (per seed) |", "|---|---|"]
    for name, by_seed in cv["out_of_fold_accuracy"].items():
        lines.append(f"| {name} | " + ", ".join(f"{v * 100:.2f} (seed {k})" for k, v in by_seed.items()) + " |")
    if cv["paired"]:
        lines += ["", "Paired tests on the same sentences (B vs A; bootstrap over sentences on seed-averaged "
                  "correctness, 10,000 resamples; McNemar exact per seed: only-A-right / only-B-right, two-sided p):",
                  "", "| A | B | acc A | acc B | B - A | 95% CI | P(B <= A) bootstrap | McNemar |",
                  "|---|---|---|---|---|---|---|---|"]
        for t in cv["paired"]:
            bs = t["bootstrap"]
            mc = "; ".join(f"seed {k}: {v['only_a']}/{v['only_b']}, p={v['p']:.3g}" for k, v in t["mcnemar"].items())
            lines.append(f"| {t['a']} | {t['b']} | {t['accuracy_a'] * 100:.2f} | {t['accuracy_b'] * 100:.2f} | "
                         f"{bs['delta'] * 100:+.2f} | [{bs['ci95'][0] * 100:+.2f}, {bs['ci95'][1] * 100:+.2f}] | "
                         f"{bs['p_b_not_better']:.4f} | {mc} |")
    return lines


def to_csv(s: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["source", "seed", "split", "metric", "value"])
    for r in s["runs"]:
        for split in ("dev", "test"):
            for k, v in (r.get(split) or {}).items():
                w.writerow([r["source"], r["seed"], split, k, v])
    return buf.getvalue()


def write_summary(s: dict, results_dir: Path, plots: bool = True) -> None:
    """summary.md/.csv/.json and (with ``plots``) scores.png and mix_weights.png, each written atomically."""
    write_text_atomic(results_dir / "summary.json", json.dumps(s, indent=1) + "\n")
    write_text_atomic(results_dir / "summary.csv", to_csv(s))
    write_text_atomic(results_dir / "summary.md", to_markdown(s))
    if plots:
        plot_scores(s, results_dir / "scores.png")
        plot_mix_weights(s, results_dir / "mix_weights.png")

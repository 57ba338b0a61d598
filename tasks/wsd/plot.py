"""PNG plot: WSD F1 per biLM layer (1-NN and linear probes), with baselines and the paper's numbers."""
from __future__ import annotations

import io
from pathlib import Path

from elmo_features.util.provenance import write_bytes_atomic

from elmo_tasks.wsd.table import PUBLISHED
from elmo_tasks.experiment.plots import pyplot


def plot_f1_per_layer(summary: dict, path: str | Path) -> None:
    """F1 on ALL (or the only test set) against layer, one line per (source, method)."""
    plt = pyplot()

    tests = [t["name"] for t in summary["tests"]]
    col = "ALL" if len(tests) > 1 else tests[0]
    f1 = lambda row: row["scores"].get(col, {}).get("F1")
    fig, ax = plt.subplots(figsize=(6, 4))
    lines: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for row in summary["rows"]:
        if isinstance(row["layer"], int) and f1(row) is not None and row["group"] in ("knn", "probe"):
            method = "1-NN" if row["group"] == "knn" else "linear probe"
            lines.setdefault((row["source"], method), []).append((row["layer"], f1(row)))
    max_layer = 2
    for (source, method), pts in lines.items():
        if len(pts) < 2:
            continue
        pts.sort()
        max_layer = max(max_layer, pts[-1][0])
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", linestyle="-" if method == "1-NN" else "--",
                label=f"{source} {method}")
    layered = {source for (source, _), pts in lines.items() if len(pts) > 1}
    cycle = iter([c for c in plt.rcParams["axes.prop_cycle"].by_key()["color"][3:] if c != "#d62728"] * 10)  # no red
    styles = {"wn_first_sense": ("gray", ":"), "mfs": ("black", ":")}
    for row in summary["rows"]:
        if row["group"] == "baseline" and f1(row) is not None:
            color, ls = styles.get(row["id"], ("gray", "-."))
            ax.axhline(f1(row), color=color, linestyle=ls, linewidth=1, label=f"{row['label']} (ours)")
        elif row["group"] in ("knn", "head") and f1(row) is not None:
            if row["source"] not in layered:  # a one-layer source (e.g. GloVe): a horizontal line
                ax.axhline(f1(row), color=next(cycle), linestyle="-." if row["group"] == "knn" else "--",
                           linewidth=1, label=row["label"])
            elif not isinstance(row["layer"], int):  # average, learned mix, head on the mix
                ax.scatter([max_layer + 0.6], [f1(row)], marker="s", zorder=3, label=row["label"])
    pub = {k: v for k, _, v in PUBLISHED}
    ax.scatter([1, 2], [pub["bilm1"], pub["bilm2"]], marker="*", s=120, color="tab:red", zorder=3,
               label="paper: biLM 1-NN (published, other test sets)")
    ax.axhline(pub["wn_first_sense"], color="tab:red", linestyle=":", linewidth=1,
               label="paper: WordNet 1st sense (published)")
    ax.set_xticks(list(range(max_layer + 1)) + [max_layer + 0.6])
    ax.set_xticklabels([str(i) for i in range(max_layer + 1)] + ["mixes"])
    ax.set_xlabel("layer (0 = the biLM's token layer, or a Transformer's embedding output)")
    ax.set_ylabel(f"F1 on {col} (%)")
    ax.set_title(f"{summary['name']}: WSD F1 per layer")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    write_bytes_atomic(path, buf.getvalue())

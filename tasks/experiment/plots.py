"""PNG plots for comparisons: test scores per feature source (mean +- std), learned mix / fusion weights."""
from __future__ import annotations

import io
from pathlib import Path

from elmo_features.util.provenance import write_bytes_atomic


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (files only, no display), imported on first use: a heavy import
    that only plotting needs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    write_bytes_atomic(path, buf.getvalue())


def plot_scores(summary: dict, path: str | Path) -> None:
    """Bar chart of the test primary metric per source with sample-std error bars."""
    plt = pyplot()

    m = summary["primary_metric"]
    rows = [r for r in summary["sources"] if r.get("test")]
    names = [r["source"] for r in rows]
    means = [r["test"][m]["mean"] * 100 for r in rows]
    stds = [(r["test"][m]["std"] or 0.0) * 100 for r in rows]
    fig, ax = plt.subplots(figsize=(max(4, 1.1 * len(rows) + 1), 3.5))
    ax.bar(names, means, yerr=stds, capsize=4, color="tab:blue")
    for i, v in enumerate(means):
        ax.text(i, v, f"{v:.1f}", ha="center", va="bottom", fontsize=8)
    if means:
        lo = min(means) - 2 * max(stds + [1.0])
        ax.set_ylim(max(0.0, lo - 5), min(100.0, max(means) + max(stds) + 5))
    ax.set_ylabel(f"test {m} (x100)")
    ax.set_title(f"{summary['name']}: mean ± std over seeds {summary['seeds']}")
    ax.tick_params(axis="x", rotation=30)
    _save(fig, Path(path))
    plt.close(fig)


def plot_mix_weights(summary: dict, path: str | Path) -> None:
    """Grouped bars: the softmax mix weight of each layer, per source that learned a mix; one panel per layer
    count (a biLM's 3 layers and a Transformer's 7 hidden states side by side)."""
    plt = pyplot()

    rows = [r for r in summary["sources"] if r.get("mix_weights")]
    groups: dict[int, list[dict]] = {}
    for r in rows:
        groups.setdefault(len(r["mix_weights"]), []).append(r)
    fig, axes = plt.subplots(1, max(1, len(groups)), figsize=(5 * max(1, len(groups)), 3.5), squeeze=False)
    if not rows:
        axes[0][0].text(0.5, 0.5, "no learned mix in this comparison", ha="center", va="center")
        axes[0][0].set_axis_off()
    for ax, (L, group) in zip(axes[0], sorted(groups.items())):
        width = 0.8 / len(group)
        for k, r in enumerate(group):
            xs = [layer + (k - (len(group) - 1) / 2) * width for layer in range(L)]
            ax.bar(xs, r["mix_weights"], width, label=f"{r['source']} (gamma {r['gamma']:.2f})")
        ax.axhline(1 / L, color="gray", linestyle=":", linewidth=1, label="equal weights")
        ax.set_xticks(range(L))
        ax.set_xticklabels([f"layer {i}" for i in range(L)], fontsize=7 if L > 4 else None)
        ax.set_ylabel("softmax weight (mean over seeds)")
        ax.set_title(f"{summary['name']}: learned mix weights ({L} layers)")
        ax.legend(fontsize=7)
    _save(fig, Path(path))
    plt.close(fig)


def plot_layer_weights(panels: list[tuple[str, list[tuple[str, list[float]]]]], path: str | Path,
                       title: str = "learned layer weights") -> None:
    """One panel per task: grouped bars of each variant's per-layer share (L values summing to 1).

    ``panels`` = [(panel title, [(variant label, [w_0, ..., w_{L-1}]), ...]), ...]."""
    plt = pyplot()

    panels = [(t, rows) for t, rows in panels if rows] or [("(nothing measured yet)", [])]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.6), squeeze=False)
    for ax, (name, rows) in zip(axes[0], panels):
        if not rows:
            ax.set_axis_off()
            continue
        L = len(rows[0][1])
        width = 0.8 / len(rows)
        for k, (label, w) in enumerate(rows):
            ax.bar([i + (k - (len(rows) - 1) / 2) * width for i in range(L)], w, width, label=label)
        ax.axhline(1 / L, color="gray", linestyle=":", linewidth=1, label="equal share")
        ax.set_xticks(range(L))
        ax.set_xticklabels([f"layer {i}" for i in range(L)])
        ax.set_ylabel("share of the fused vector")
        ax.set_title(name)
        ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    fig.suptitle(title, fontsize=10)
    _save(fig, Path(path))
    plt.close(fig)

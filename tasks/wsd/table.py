"""The Markdown score table (rows as in the ELMo paper's Table 5), ours beside the published numbers."""
from __future__ import annotations

import shlex
from pathlib import Path

from elmo_features.util.provenance import write_text_atomic

from elmo_tasks.wsd.config import bilm_sources

# Peters et al. (2018), Table 5: all-words fine-grained WSD F1 on the union of the four test sets of
# Raganato et al. (2017a) (Senseval-2, Senseval-3, SemEval-2013, SemEval-2015), framework release.
PUBLISHED = [
    ("wn_first_sense", "WordNet 1st Sense Baseline", 65.9),
    ("raganato2017a", "Raganato et al. (2017a)", 69.9),
    ("iacobacci2016", "Iacobacci et al. (2016)", 70.1),
    ("cove1", "CoVe, First Layer", 59.4),
    ("cove2", "CoVe, Second Layer", 64.7),
    ("bilm1", "biLM, First layer", 67.4),
    ("bilm2", "biLM, Second layer", 69.0),
]
_PUB = {k: (label, f1) for k, label, f1 in PUBLISHED}


def _published_key(row: dict, bilm_sources: set[str]) -> str | None:
    """Which published number a measured row corresponds to (same method, same layer)."""
    if row["id"] == "wn_first_sense":
        return "wn_first_sense"
    if row["group"] == "knn" and row["source"] in bilm_sources and row["layer"] in (1, 2):
        return f"bilm{row['layer']}"
    return None


def original_command(command: str) -> str:
    """The same command on the ELMo paper's biLM: ``--features elmo --bilm original`` (whatever sources it ran)
    and its own --out folder."""
    args = shlex.split(command)
    if not args:
        return "elmo-tasks wsd --features elmo --bilm original --out results/wsd_original"
    out, i = [], 0
    while i < len(args):
        a = args[i]
        if a in ("--bilm", "--out") and i + 1 < len(args):
            i += 2
            continue
        if a == "--features":  # (one or more values)
            i += 1
            while i < len(args) and not args[i].startswith("-"):
                i += 1
            continue
        if a.startswith(("--bilm=", "--out=", "--features=")):
            i += 1
            continue
        out.append(a)
        i += 1
    return shlex.join(out + ["--features", "elmo", "--bilm", "original", "--out", "results/wsd_original"])


def _fmt(v) -> str:
    return "–" if v is None else f"{v:.1f}"


_NOTES = [
              "* 1-NN (Peters et al. 2018, sec. 5.3): the average vector of each training sense; a test instance "
              "takes the nearest (cosine) of its lemma+pos's senses seen in training, else the WordNet first sense. "
              "Multiword instances average their tokens. Layer 0 is the biLM's token layer, 1 and 2 its LSTM layers; "
              "the paper's \"first/second layer\" are layers 1 and 2. For a Transformer source, layer 0 is the "
              "embedding output and layer k the output of its k-th Transformer layer (pieces mean-pooled to words).",
              "* \"Layer chosen on held-out sentences\" (or documents): the layer whose 1-NN is most accurate on "
              "every Nth training sentence (or every sentence of every Nth document), with sense averages from the "
              "other training sentences (no test data involved); the row then uses all training sentences.",
              "* The head rows train a linear softmax over the instance's candidate senses with the project's "
              "training loop (early stopping on held-out training sentences); probes use one fixed layer.",
              "* The published ALL covers other test sets (with SemEval-2013/2015, without SemEval-2007) and the "
              "framework's release of the data; our ALL is the union of the test sets above. Compare trends, "
              "not decimals.",
]


def render_table(summary: dict) -> str:
    """Markdown: provenance, the F1 table (ours and published), the POS table, details (P/R/back-offs), notes."""
    tests = [t["name"] for t in summary["tests"]]
    cols = tests + (["ALL"] if len(tests) > 1 else [])
    lines = _header(summary, cols) + _f1_rows(summary, cols) + _pos_table(summary, cols[-1] if cols else "")
    lines += _details(summary, cols)
    lines += ["", "## Notes", "", *_NOTES, "", "To fill the same table with the official ELMo weights (the paper's "
              "model):", "", f"    {original_command(summary['command'])}", ""]
    return "\n".join(lines)


def _header(summary: dict, cols: list[str]) -> list[str]:
    """Provenance lines and the F1 table's heading."""
    return [f"# WSD: the ELMo paper's Table 5 ({summary['name']})", "",
            f"* Command: `{summary['command']}`",
            f"* elmo-tasks {summary.get('version', 'version not recorded')}, git commit: `{summary['git_commit']}`; "
            f"machine: {summary['machine'].get('cpu_cores')} CPU cores "
            f"(torch threads {summary['machine'].get('torch_threads')}); wall time {summary['seconds'] / 60:.1f} min",
            f"* Train: `{summary['train']['folder']}` ({summary['train']['instances']:,} instances); test: "
            + ", ".join(f"`{t['folder']}` ({t['instances']:,})" for t in summary["tests"]),
            f"* Sense inventory: `{summary['wordnet']}`" + _unknown_note(summary),
            "", "F1 (%) as computed by the framework's scorer. The last column is **published, not ours**: "
            "Peters et al. (2018), Table 5, F1 on the union of Senseval-2, Senseval-3, SemEval-2013 and "
            "SemEval-2015 (the framework's release), with the original ELMo biLM.", "",
            "| model | " + " | ".join(cols) + " | published F1 (paper, not ours) |",
            "|---|" + "---|" * len(cols) + "---|"]


def _f1_rows(summary: dict, cols: list[str]) -> list[str]:
    """One line per row (with the paper's figure where it has one), then the published-only rows."""
    bilm_rows = set(bilm_sources(summary["config"].get("sources", {})))
    lines, used = [], set()
    for row in summary["rows"]:
        key = _published_key(row, bilm_rows)
        pub = f"{_PUB[key][1]:.1f} ({_PUB[key][0]})" if key else ""
        if key:
            used.add(key)
        cells = [_fmt(row["scores"].get(c, {}).get("F1")) for c in cols]
        lines.append(f"| {row['label']} | " + " | ".join(cells) + f" | {pub} |")
    for key, label, f1 in PUBLISHED:
        if key not in used:
            lines.append(f"| *{label} (published only)* | " + " | ".join("–" for _ in cols) + f" | {f1:.1f} |")
    return lines


def _details(summary: dict, cols: list[str]) -> list[str]:
    """P, R, answered, back-offs and notes of each row on ALL (or the only test set)."""
    lines = ["", "Details on ALL (or the only test set): precision, recall, answered / total instances, and how "
             "many instances backed off to the WordNet first sense.", "",
             "| model | P | R | F1 | answered / total | back-offs | notes |", "|---|---|---|---|---|---|---|"]
    for row in summary["rows"]:
        s = row["scores"].get(cols[-1]) if cols else None
        if not s:
            continue
        answered = f"{s['answered']:g} / {s['total']}"
        lines.append(f"| {row['label']} | {s['P']:.1f} | {s['R']:.1f} | {s['F1']:.1f} | {answered} | "
                     f"{row.get('backoff', '') if row.get('backoff') is not None else ''} | "
                     f"{'; '.join(_row_notes(row))} |")
    return lines


def _row_notes(row: dict) -> list[str]:
    """What a row's details column says: weights, the head's mix and epochs, sense-vector choices, the dev layer."""
    notes = []
    if row.get("weights") and row["group"] == "knn" and row["layer"] in ("average", "mix", "fixed_mix"):
        notes.append("weights " + ", ".join(f"{w:.2f}" for w in row["weights"]))
    head = row.get("head")
    if head:
        fr = head.get("features", {})
        if fr.get("mix_weights"):
            notes.append("learned mix " + ", ".join(f"{w:.2f}" for w in fr["mix_weights"])
                         + f", gamma {fr.get('gamma', 0):.2f}")
        notes.append(f"best epoch {head['best_epoch']}/{head['epochs_run']}")
    if row.get("senses"):
        sv = row["senses"]
        notes.append("coverage " + ", ".join(f"{k} {v:,}" for k, v in sv["coverage"].items()))
        if sv.get("examples", "none") != "none":
            notes.append(f"WordNet's examples: {EXAMPLE_USE[sv['examples']]}")
        if sv.get("w"):
            notes.append(f"{sv['pooling']} pooling, w " + ", ".join(f"{k} {v:g}" for k, v in sv["w"].items()))
        if sv.get("prior"):
            notes.append(f"first-sense prior {sv['prior']:g} / sense number")
        notes.append(f"chosen on held-out training {sv['held_out'].get('by', 'sentences')} (scores.json: "
                     "senses.held_out)")
    if row.get("dev_choice"):
        dc = row["dev_choice"]
        unit = dc.get("by", "sentences")[:-1]
        notes.append(f"1-NN accuracy on {dc['instances']:,} held-out training instances (every {dc['every']}th "
                     f"{unit}) by layer: " + ", ".join(f"{a * 100:.1f}" for a in dc["dev_accuracy"]))
    return notes


EXAMPLE_USE = {"unseen": "added for the senses SemCor never tags", "all": "added to every sense's instances"}
POS_NAMES = (("NOUN", "nouns"), ("VERB", "verbs"), ("ADJ", "adjectives"), ("ADV", "adverbs"))


def _pos_table(summary: dict, last: str) -> list[str]:
    """F1 by part of speech over all test instances (the framework's breakdown), with the instance counts."""
    rows = [r for r in summary["rows"] if r.get("pos_scores")]
    if not rows:
        return []
    totals = {pos: rows[0]["pos_scores"].get(pos, {}).get("total", 0) for pos, _ in POS_NAMES}
    head = [f"{name} ({totals[pos]:,})" for pos, name in POS_NAMES]
    lines = ["", f"F1 (%) by part of speech over all test instances ({last}), as the framework reports it "
                 "(instances per part of speech in brackets):", "",
             "| model | " + " | ".join(head) + f" | {last} |", "|---|" + "---|" * (len(POS_NAMES) + 1)]
    for row in rows:
        cells = [_fmt(row["pos_scores"].get(pos, {}).get("F1")) for pos, _ in POS_NAMES]
        lines.append(f"| {row['label']} | " + " | ".join(cells) + f" | {_fmt(row['scores'].get(last, {}).get('F1'))} |")
    return lines


def write_table(summary: dict, path: str | Path) -> None:
    """Write render_table(summary) atomically."""
    write_text_atomic(path, render_table(summary))


def _unknown_note(summary: dict) -> str:
    """Gold keys that are not in the sense inventory, per set (none: empty)."""
    counts = [(t["name"], t.get("gold_keys_not_in_wordnet", 0)) for t in summary["tests"]]
    counts.insert(0, (summary["train"]["name"], (summary.get("train_gold_keys_not_in_wordnet") or {}).get("count", 0)))
    bad = [f"{n} {c}" for n, c in counts if c]
    if not bad:
        return "; every gold key is a sense key of it"
    return (f"; gold keys that are not: {', '.join(bad)} (kept as gold; no method can answer them, so an instance "
            "whose only gold keys are such counts as an error)")

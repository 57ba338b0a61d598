"""Why does a feature source win or lose on CoNLL-2003 NER? Break test recall down by what each source knows.

Reads the runs of one `elmo-tasks compare` (its summary.json and each run's predictions.json), the
CoNLL test file, the biLM's word vocabulary (the words it saw most often in training) and the GloVe
word list, and writes a Markdown report:

* coverage: the share of test-mention tokens each word list knows;
* recall of gold test mentions (exact span and type), per source, mean over seeds, split by
  (a) whether every token of the mention is in the biLM's vocabulary, (b) whether the mention string
      occurs as an entity in the training data, and (c) entity type; plus per-type F1.

    python scripts/ner_diagnosis.py results/ner_conll2003/summary.json \
        --out results/ner_conll2003/diagnosis.md
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from elmo_features.util.provenance import git_commit, machine, write_text_atomic
from elmo_tasks.data.conll import read_conll2003
from elmo_tasks.data.tag_schemes import tags_to_spans

Span = tuple[int, int, str]  # (start, end exclusive, type)


def spans(tags: list[str]) -> set[Span]:
    """(start, end exclusive, type) spans of one BIOES sentence (gold or constrained-decoded)."""
    return {(a, b, typ) for typ, a, b in tags_to_spans(tags, "BIOES")}


def load_word_list(path: Path) -> set[str]:
    """One word per line (the first whitespace field)."""
    with open(path, encoding="utf-8") as f:
        return {line.split()[0] for line in f if line.strip()}


def pct(x: float) -> str:
    return f"{100 * x:.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("summary", type=Path, help="summary.json written by `elmo-tasks compare`")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--bilm-vocab", type=Path, default=Path("elmo_features/models/default/vocab.txt"))
    ap.add_argument("--glove-words", type=Path, default=Path("data/glove-6b-50d/words.txt"))
    args = ap.parse_args(argv)

    summary = json.loads(args.summary.read_text())
    data = summary["data"]
    opts = data.get("reader_options") or {}
    train = read_conll2003(data["train"], **opts)
    test = read_conll2003(data["test"], **opts)
    bilm_vocab = load_word_list(args.bilm_vocab)
    glove = {w.lower() for w in load_word_list(args.glove_words)}

    train_mentions: set[str] = set()
    for s in train:
        for a, b, _ in spans(s.tags):
            train_mentions.add(" ".join(s.tokens[a:b]))

    gold: list[set[Span]] = [spans(s.tags) for s in test]
    buckets: dict[tuple[Span, int], dict[str, str]] = {}
    n_tok = n_bilm = n_glove = 0
    for k, (s, g) in enumerate(zip(test, gold)):
        for a, b, typ in g:
            toks = s.tokens[a:b]
            n_tok += len(toks)
            n_bilm += sum(t in bilm_vocab for t in toks)
            n_glove += sum(t.lower() in glove for t in toks)
            buckets[(a, b, typ), k] = {
                "biLM vocabulary": "all tokens known" if all(t in bilm_vocab for t in toks)
                else "some token unknown",
                "seen in CoNLL train": "seen" if " ".join(toks) in train_mentions else "unseen",
                "type": typ,
            }
    groups: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for b in buckets.values():
        for dim, val in b.items():
            groups[dim][val] += 1

    # recall per bucket and per-type F1, per source, mean over seeds
    recall: dict[str, dict[tuple[str, str], list[float]]] = defaultdict(lambda: defaultdict(list))
    type_f1: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    sources: list[str] = []
    for run in summary["runs"]:
        src = run["source"]
        if src not in sources:
            sources.append(src)
        preds = json.loads((Path(run["run_dir"]) / "predictions.json").read_text())["test"]
        if len(preds) != len(test):
            raise ValueError(f"{run['run_dir']}: {len(preds)} test predictions for {len(test)} sentences")
        pred = [spans(p) for p in preds]
        hit = defaultdict(int)
        for (span, k), b in buckets.items():
            if span in pred[k]:
                for dim, val in b.items():
                    hit[dim, val] += 1
        for dim, vals in groups.items():
            for val, n in vals.items():
                recall[src][dim, val].append(hit[dim, val] / n)
        for typ in groups["type"]:
            tp = sum(len({x for x in p if x[2] == typ} & {x for x in g if x[2] == typ})
                     for p, g in zip(pred, gold))
            np_ = sum(sum(x[2] == typ for x in p) for p in pred)
            ng = sum(sum(x[2] == typ for x in g) for g in gold)
            pr, rc = tp / max(np_, 1), tp / max(ng, 1)
            type_f1[src][typ].append(2 * pr * rc / max(pr + rc, 1e-12))

    m = machine()
    lines = [
        f"# {summary['name']}: where each feature source gains or loses (test set)",
        "",
        f"- command: `python {' '.join([sys.argv[0]] + (argv if argv is not None else sys.argv[1:]))}`",
        f"- runs: `{summary['command']}` at commit `{summary['git_commit']}` "
        f"({len(summary['seeds'])} seeds; numbers are means over seeds, x100)",
        f"- report git commit: `{git_commit()}`; machine: {m['cpu_cores']} CPU cores ({m['cpu_model']}), "
        f"Python {m['python']}",
        f"- biLM vocabulary: `{args.bilm_vocab}` ({len(bilm_vocab):,} words, case-sensitive, the words "
        "the biLM saw most often in training); GloVe: "
        f"`{args.glove_words}` ({len(glove):,} lowercased words)",
        "",
        "## Coverage of the test mentions' tokens",
        "",
        f"- test gold mentions: {len(buckets):,} ({n_tok:,} tokens)",
        f"- tokens in the biLM vocabulary: {pct(n_bilm / n_tok)}%",
        f"- tokens in the GloVe 6B vocabulary (lowercased): {pct(n_glove / n_tok)}%",
        "",
        "## Recall of gold test mentions (exact span and type)",
        "",
        "| split | mentions | " + " | ".join(sources) + " |",
        "|---|---:|" + "---:|" * len(sources),
    ]
    for dim, vals in groups.items():
        for val in sorted(vals, key=lambda v: -vals[v]):
            cells = [f"{100 * float(np.mean(recall[s][dim, val])):.1f}" for s in sources]
            lines.append(f"| {dim}: {val} | {vals[val]:,} | " + " | ".join(cells) + " |")
    lines += ["", "## F1 per entity type", "", "| type | " + " | ".join(sources) + " |",
              "|---|" + "---:|" * len(sources)]
    for typ in sorted(groups["type"]):
        lines.append(f"| {typ} | " + " | ".join(f"{100 * float(np.mean(type_f1[s][typ])):.1f}"
                                               for s in sources) + " |")
    text = "\n".join(lines) + "\n"
    write_text_atomic(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Probe: the gloss term of the sense-vector method scored against the context sentence as well as the target word.

The ``+ glosses`` row scores a candidate sense by ``cos(target, context vector) + w[pos] * cos(target, gloss)``, the
target being the word's vector at the chosen layer. A sentence encoder such as all-MiniLM-L6-v2 is trained to make
the mean vector of a sentence close to that of a sentence with the same meaning, so the gloss may match the whole
context sentence better than the one word. This probe adds ``u[pos] * cos(sentence mean, gloss)``, with (w, u) per
part of speech chosen on the held-out SemCor documents of the ``wsd_senses`` config; the test sets are scored only
after the choice. Layer 6, the whole gloss field, sentence pooling and full coverage, as the method chose for
MiniLM. Needs the SemCor folder and the three test sets, MiniLM's features and glosses in ``--cache-dir`` (or the
time to compute them), and WordNet 3.0 (``elmo-tasks data get wordnet-3.0``). Result: a Markdown table at ``--out``.

    python scripts/wsd_sentence_query_probe.py --data ../shared/data/wsd --cache-dir CACHE \\
        --out results/wsd_senses/minilm_sentence_query.md
"""
from __future__ import annotations

import argparse
import itertools
import shlex
import sys
import time

import numpy as np

import elmo_tasks.wsd.vectors as vectors
from elmo_features.util.provenance import git_commit, machine, write_text_atomic
from elmo_tasks.features.base import FeatureContext
from elmo_tasks.wsd.config import load_wsd_config
from elmo_tasks.wsd.data.examples import all_targets, load_inventory, to_examples
from elmo_tasks.wsd.data.reader import load_dataset
from elmo_tasks.wsd.knn import SenseSums
from elmo_tasks.wsd.run import _chunked_source, _read_tests
from elmo_tasks.wsd.sense_method import hold_out, load_graph, sense_glosses
from elmo_tasks.wsd.senses import POS, Candidates, accuracy, answer, candidate_cosines, mix, propagate

LAYER = 6  # MiniLM's layer chosen by the method for context and glosses
W_GRID = (0.0, 0.05, 0.1, 0.15, 0.25, 0.5, 0.75, 1.0)  # the word's gloss weight
U_GRID = (0.0, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)  # the sentence's gloss weight


def _empty(examples, shape):
    return np.zeros((sum(len(ex.targets) for ex in examples), 2, shape[2]), dtype=np.float32)  # (N, 2, D)


def _fill(out, row, examples, layers):
    """Row n: [the target's vector, its sentence's mean vector] at LAYER."""
    for ex, arr in zip(examples, layers, strict=True):  # arr (L, n, D)
        sentence = arr[LAYER].mean(axis=0)  # (D,)
        for t in ex.targets:
            out[row, 0], out[row, 1] = arr[LAYER, t.start:t.end].mean(axis=0), sentence
            row += 1
    return row


def cosines(targets, vecs, graph, context, gloss) -> tuple[Candidates, Candidates]:
    """The candidates' cosines with the word's vector and with the sentence's (the context cosines: the word's)."""
    cv, step = context
    return (candidate_cosines(targets, vecs[:, 0], graph, cv, step, gloss),
            candidate_cosines(targets, vecs[:, 1], graph, cv, step, gloss))


def scores(targets, cos, graph, wu):
    """Answers by ctx + w * cos(word, gloss) + u * cos(sentence, gloss), (w, u) = wu[pos]."""
    word, sent = cos
    g = [wu[p][0] * a + wu[p][1] * b for a, b, p in zip(word.gloss, sent.gloss, word.pos)]
    return answer(targets, Candidates(word.rows, word.ctx, g, word.pos, word.ranks), graph, {p: 1.0 for p in POS})[0]


def _subset(c: Candidates, idx: list[int]) -> Candidates:
    return Candidates(*[[getattr(c, f)[i] for i in idx] for f in ("rows", "ctx", "gloss", "pos", "ranks")])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="folder with semcor/, senseval2/, senseval3/, semeval2007/")
    ap.add_argument("--cache-dir", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    vectors._empty, vectors._fill = _empty, _fill
    t0 = time.perf_counter()
    cfg = load_wsd_config("wsd_senses", [], features=["minilm"], train=f"{args.data}/semcor")
    context = FeatureContext(cache_dir=args.cache_dir, progress=False)
    inventory = load_inventory(cfg.wordnet)
    train_ex = to_examples(load_dataset(f"{args.data}/semcor"), inventory)
    tests = _read_tests([f"{args.data}/{n}" for n in ("senseval2", "senseval3", "semeval2007")], inventory)
    section = cfg.sources["minilm"]
    source, chunk, _ = _chunked_source(cfg, section, train_ex, context)
    train_vecs = vectors.instance_layers(source, train_ex, "train", chunk)  # (N, 2, D)
    held = hold_out(train_ex, train_vecs, cfg.head_dev_every, cfg.dev_split)
    graph = load_graph(cfg.wordnet)
    gloss = mix(sense_glosses(section, graph, context, False, "full")["sentence"], [0.0] * LAYER + [1.0])  # (S, D)
    held_ctx = propagate(graph, held.sums.keys, held.sums.centroids([1.0, 0.0]))
    rows = ["| part of speech | held-out instances | best w (u = 0) | accuracy | best (w, u) | accuracy |",
            "|---|---|---|---|---|---|"]
    chosen, word_only = {}, {}
    held_cos = cosines(held.targets, held.vecs, graph, held_ctx, gloss)
    for pos in POS:
        idx = [i for i, t in enumerate(held.targets) if t.pos == pos]
        sub, cos = [held.targets[i] for i in idx], tuple(_subset(c, idx) for c in held_cos)
        acc = {(w, u): accuracy(sub, scores(sub, cos, graph, {pos: (w, u)}))
               for w, u in itertools.product(W_GRID, U_GRID)}
        chosen[pos] = max(acc, key=acc.get)  # (the first of equals: smaller weights come first)
        word_only[pos] = max((k for k in acc if k[1] == 0.0), key=acc.get)
        rows.append(f"| {pos} | {len(sub)} | {word_only[pos][0]:g} | {100 * acc[word_only[pos]]:.2f} | "
                    f"({chosen[pos][0]:g}, {chosen[pos][1]:g}) | {100 * acc[chosen[pos]]:.2f} |")
    held_all = {k: accuracy(held.targets, scores(held.targets, held_cos, graph, wu))
                for k, wu in (("word", word_only), ("word + sentence", chosen))}
    sums = SenseSums.from_targets(all_targets(train_ex), train_vecs)
    test_ctx = propagate(graph, sums.keys, sums.centroids([1.0, 0.0]))
    test = {k: [] for k in held_all}
    for ts in tests:  # read only now: the choices above are fixed
        cos = cosines(ts.targets, vectors.instance_layers(source, ts.examples, ts.name, chunk), graph, test_ctx, gloss)
        for k, wu in (("word", word_only), ("word + sentence", chosen)):
            a = scores(ts.targets, cos, graph, wu)
            test[k].append((sum(a.get(t.id) in t.gold for t in ts.targets), len(ts.targets)))
    rows += ["", "| gloss term | held-out accuracy | " + " | ".join(ts.name for ts in tests) + " | ALL |",
             "|---|---|" + "---|" * (len(tests) + 1)]
    for k in held_all:
        per = [100 * c / n for c, n in test[k]]
        total = 100 * sum(c for c, _ in test[k]) / sum(n for _, n in test[k])
        rows.append(f"| {k} | {100 * held_all[k]:.2f} | " + " | ".join(f"{p:.1f}" for p in per) + f" | {total:.1f} |")
    m = machine()
    head = [f"# The gloss term against the context sentence (MiniLM, layer {LAYER})", "",
            f"Command: `python {' '.join(shlex.quote(a) for a in sys.argv)}`  ",
            f"Commit: {git_commit()}; machine: {m['cpu_model']}, {m['cpu_cores']} cores ({m['cpu_flags']}), torch "
            f"{m['torch']}; {time.perf_counter() - t0:.0f} s wall.  ",
            f"Held out: {len(held.targets)} SemCor instances ({cfg.dev_split}); test accuracy (every instance is "
            "answered: F1).", ""]
    write_text_atomic(args.out, "\n".join(head + rows) + "\n")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

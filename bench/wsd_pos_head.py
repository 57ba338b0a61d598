"""The part-of-speech head of a sense file (``elmo_tasks.wsd.pos_head``) measured on SemCor's held-out documents.

Embeds what ``wsd senses`` embeds for the head (the sentences of the training documents, at most
``TRAIN_SENTENCES`` evenly spaced, and of every ``--every``-th held-out document, at most ``HELD_SENTENCES``) once,
keeping every layer, then fits the head as ``wsd senses`` does (linear, on the mean of the layers), on fewer
training sentences too (a ``--lemmas`` build's size among them), on the top layer (MiniLM's sense vectors' choice)
and with a hidden layer, and writes the accuracies with the command, commit and machine::

    HF_HUB_OFFLINE=1 python bench/wsd_pos_head.py --source minilm --train data/wsd/semcor --out results/wsd_senses/pos_head
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np

import elmo_tasks.data  # noqa: F401 (first: elmo_tasks.wsd.data.reader cannot be imported first)
from elmo_features.util.provenance import git_commit, machine, package_version, write_text_atomic
from elmo_tasks.features.base import FeatureContext, build_features
from elmo_tasks.wsd import pos_head
from elmo_tasks.wsd.config import load_wsd_config
from elmo_tasks.wsd.data.reader import load_dataset
from elmo_tasks.wsd.sense_method import held_out_sentences
from elmo_tasks.wsd.vectors import CHUNK, all_layers


def every_layer(source, sentences) -> tuple[np.ndarray, list[str]]:
    """(N, L, D) float16 arrays of every token of ``sentences`` and their tags."""
    arrays, tags = [], []
    for c in range(0, len(sentences), CHUNK):
        part = sentences[c:c + CHUNK]
        for s, a in zip(part, all_layers(source, [s.tokens for s in part], "pos"), strict=True):
            arrays.append(a.transpose(1, 0, 2).astype(np.float16))  # (n, L, D)
            tags.extend(s.pos)
        print(f"{min(c + CHUNK, len(sentences)):,} of {len(sentences):,} sentences embedded", file=sys.stderr, flush=True)
    return np.concatenate(arrays), tags


def mixed(arrays: np.ndarray, weights) -> np.ndarray:
    """(N, L, D) -> (N, D) float32 as ``pos_head.token_vectors`` (mixed, L2-normalised)."""
    return np.concatenate([pos_head.token_vectors(arrays[i:i + 8192].astype(np.float32).transpose(1, 0, 2),
                                                  weights).astype(np.float32) for i in range(0, len(arrays), 8192)])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", default="minilm", help="a source of the wsd_senses config")
    p.add_argument("--train", default="data/wsd/semcor", help="SemCor in the framework format")
    p.add_argument("--every", type=int, default=20, help="every Nth document held out (wsd_senses: 20)")
    p.add_argument("--out", required=True, help="folder for pos_head.json and pos_head.md")
    p.add_argument("--arrays", default=None, help="an .npz file keeping the embedded token vectors (reused when it "
                                                   "exists: the fits again without embedding)")
    args = p.parse_args()
    t0 = time.perf_counter()
    cfg = load_wsd_config("wsd_senses", [], features=[args.source])
    source = build_features(cfg.sources[args.source], FeatureContext(cache_dir=None))
    sentences = load_dataset(args.train).sentences
    usable = [i for i, s in enumerate(sentences) if s.tokens and len(s.pos) == len(s.tokens) and all(s.pos)]
    held = held_out_sentences([sentences[i] for i in usable], args.every, "documents")  # as train_pos_head
    fit = pos_head._spaced([i for i, h in zip(usable, held) if not h], pos_head.TRAIN_SENTENCES)
    test = pos_head._spaced([i for i, h in zip(usable, held) if h], pos_head.HELD_SENTENCES)
    t1 = time.perf_counter()
    if args.arrays and Path(args.arrays).exists():
        z = np.load(args.arrays)
        xa, tags, ha, htags = z["xa"], list(z["tags"]), z["ha"], list(z["htags"])
    else:
        xa, tags = every_layer(source, [sentences[i] for i in fit])
        ha, htags = every_layer(source, [sentences[i] for i in test])
        if args.arrays:
            np.savez(args.arrays, xa=xa, tags=np.array(tags), ha=ha, htags=np.array(htags))
    embed_s = time.perf_counter() - t1
    L = xa.shape[1]
    starts = np.cumsum([0] + [len(sentences[i].tokens) for i in fit])  # token rows of each training sentence
    rows = []
    for n, mix, hidden in ((len(fit), "mean", 0), (1000, "mean", 0), (500, "mean", 0), (len(fit), "top", 0),
                           (1000, "mean", 256)):
        weights = [1.0 / L] * L if mix == "mean" else [0.0] * (L - 1) + [1.0]
        pick = pos_head._spaced(list(range(len(fit))), n)
        idx = np.concatenate([np.arange(starts[j], starts[j + 1]) for j in pick])
        x = mixed(xa[idx], weights)
        labels = pos_head._labels([tags[i] for i in idx])
        t2 = time.perf_counter()
        head = pos_head.fit_head(x, np.array([labels.index(tags[i]) for i in idx]), labels, hidden, weights)
        fit_s = time.perf_counter() - t2
        pred = [max(q, key=q.get) for q in head.probabilities(mixed(ha, weights))]
        right = np.array([a == b for a, b in zip(pred, htags)])
        per_tag = {t: round(float(right[[h == t for h in htags]].mean()), 4) for t in ("NOUN", "VERB", "ADJ", "ADV")}
        rows.append({"train_sentences": len(pick), "train_tokens": int(len(idx)), "layers": mix, "hidden": hidden,
                     "accuracy": round(float(right.mean()), 4), "per_tag": per_tag, "fit_seconds": round(fit_s, 1)})
        print(rows[-1], file=sys.stderr, flush=True)
    docs = len({sentences[i].id.split(".", 1)[0] for i in test})
    record = {"source": args.source, "layers": L, "every": args.every, "held_out_documents": docs,
              "held_out_sentences": len(test), "held_out_tokens": len(htags), "rows": rows,
              "embed_seconds": round(embed_s, 1), "seconds": round(time.perf_counter() - t0, 1),
              "command": "HF_HUB_OFFLINE=1 python " + shlex.join(sys.argv), "git_commit": git_commit(),
              "version": package_version(), "cpu": machine()["cpu_model"], "cpus": os.cpu_count(),
              "load_average": [round(v, 1) for v in os.getloadavg()]}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "pos_head.json", json.dumps(record, indent=1) + "\n")
    lines = [f"# Part-of-speech head ({args.source}) on held-out SemCor documents", "",
             f"Held out: every {args.every}th SemCor document ({docs} documents; {len(test):,} of their sentences, "
             f"{len(htags):,} tokens, evenly spaced). Trained on the other documents' sentences (evenly spaced), "
             f"on token vectors L2-normalised after the mix of the source's {L} layers (mean: all alike; top: the "
             "last one); the 12 universal tags of SemCor's XML.", "",
             "| training sentences | tokens | layers | head | accuracy | NOUN | VERB | ADJ | ADV | fit (s) |",
             "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        kind = "linear" if not r["hidden"] else f"1 hidden layer of {r['hidden']}"
        t = r["per_tag"]
        lines.append(f"| {r['train_sentences']:,} | {r['train_tokens']:,} | {r['layers']} | {kind} | {100 * r['accuracy']:.1f} | "
                     f"{100 * t['NOUN']:.1f} | {100 * t['VERB']:.1f} | {100 * t['ADJ']:.1f} | {100 * t['ADV']:.1f} "
                     f"| {r['fit_seconds']} |")
    lines += ["", "NOUN ... ADV: the share of the held-out tokens of that gold tag that the head tags right.",
              "", f"The first row is what `elmo-tasks wsd senses --source {args.source}` stores (its defaults).", "",
              f"Command: `{record['command']}`  ", f"Commit: {record['git_commit']} (elmo-tasks {record['version']})  ",
              f"Machine: {record['cpu']}, {record['cpus']} CPUs shared with other jobs (load average "
              f"{record['load_average'][0]} at the end); embedding {record['embed_seconds']} s, all "
              f"{record['seconds']} s."]
    write_text_atomic(out / "pos_head.md", "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

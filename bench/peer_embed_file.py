"""Runs inside the AllenNLP venv (see peer_allennlp.py): embeds a text file with AllenNLP 2.10.1's ``_ElmoBiLm``.

    python peer_embed_file.py OPTIONS WEIGHTS INPUT.txt OUTPUT.hdf5 [--batch-size 64] [--threads 2]

AllenNLP 1.0 removed its ``elmo`` command; this is that command's ``embed_file`` loop (AllenNLP 0.9's
``ElmoEmbedder``), written out on 2.10.1's modules: read the file lazily, one whitespace-tokenized sentence per
line, in batches of ``--batch-size`` lines; run the biLM under ``torch.no_grad()``; write each sentence's
(3, T, D) layers as an HDF5 dataset named by its line number, as float32. ``bench/embed_rss.py --allennlp``
measures its peak RSS next to ours.
"""
from __future__ import annotations

import argparse
import sys
from itertools import islice
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peer_stubs"))
from peer_env import batch_to_ids, load_elmo_bilm, remove_sentence_boundaries  # noqa: E402  (stubs first)

import h5py  # noqa: E402
import torch  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("options")
    ap.add_argument("weights")
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    bilm = load_elmo_bilm(args.options, args.weights, args.threads)
    n = 0
    with open(args.input, encoding="utf-8") as f, h5py.File(args.output, "w") as out, torch.no_grad():
        lines = (line.split() for line in f)
        while True:
            batch = list(islice(lines, args.batch_size))
            if not batch:
                break
            res = bilm(batch_to_ids(batch))
            layers = [remove_sentence_boundaries(a, res["mask"])[0] for a in res["activations"]]  # L x (B, T, D)
            stacked = torch.stack(layers, dim=1)  # (B, L, T, D)
            for i, sent in enumerate(batch):
                out.create_dataset(str(n + i), data=stacked[i, :, : len(sent)].numpy().astype("float32"))
            n += len(batch)
    print(f"embedded {n} sentences")
    return 0


if __name__ == "__main__":
    sys.exit(main())

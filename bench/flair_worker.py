"""Runs inside the flair venv (bench/make_flair_venv.sh): flair 0.15.1's ``TransformerWordEmbeddings`` on command.

    python flair_worker.py MODEL_FOLDER SENTENCES_JSON --threads 2 --batch-size 32

Loads nothing from a hub (HF_HUB_OFFLINE=1): MODEL_FOLDER is a local model folder. Builds flair ``Sentence``s of
the pre-tokenized sentences in SENTENCES_JSON once, then answers one JSON command per stdin line with one JSON
line on stdout:

- ``{"pooling": "mean"}``: a fresh ``TransformerWordEmbeddings(layers="all", layer_mean=False,
  subtoken_pooling=...)`` (flair's defaults otherwise: long sentences strided, no context) if the pooling changed,
  then one timed pass: ``embed`` on batches of ``--batch-size`` sentences sorted by length, longest first (as
  flair's ``predict`` forms them); the stored embeddings are cleared after the timer (flair skips sentences that
  already have them). Answers ``{"seconds": ...}``.
- ``{"pooling": "mean", "save": PATH}``: the same pass, then every sentence's vectors as ``arr_i`` (L, n_i, D)
  in input order into PATH (.npz), not timed.
- a command may name another sentence file (``"sentences": PATH``), which replaces the current set from then on;
- ``{"quit": true}``: exit.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("sentences_json")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    import flair
    from flair.data import Sentence
    from flair.embeddings import TransformerWordEmbeddings

    flair.device = torch.device("cpu")
    def load(path: str) -> tuple[list, list]:
        words = json.loads(Path(path).read_text(encoding="utf-8"))
        sentences = [Sentence(list(s)) for s in words]
        order = sorted(range(len(sentences)), key=lambda i: -len(words[i]))
        return sentences, [[sentences[i] for i in order[k:k + args.batch_size]]
                           for k in range(0, len(order), args.batch_size)]

    current_file = args.sentences_json
    sentences, batches = load(current_file)
    emb, current = None, None
    print(json.dumps({"ready": True, "flair": flair.__version__, "torch": torch.__version__,
                      "transformers": __import__("transformers").__version__,
                      "capability": torch.backends.cpu.get_cpu_capability()}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd.get("quit"):
            break
        if cmd.get("sentences", current_file) != current_file:
            current_file = cmd["sentences"]
            sentences, batches = load(current_file)
        if cmd["pooling"] != current:
            emb = None
            emb = TransformerWordEmbeddings(args.model, layers="all", layer_mean=False,
                                            subtoken_pooling=cmd["pooling"], fine_tune=False)
            emb.eval()
            current = cmd["pooling"]
        t = time.perf_counter()
        with torch.no_grad():
            for b in batches:
                emb.embed(b)
        seconds = time.perf_counter() - t
        if cmd.get("save"):
            n_layers = len(emb.layer_indexes)
            arrays = []
            for s in sentences:
                v = torch.stack([tok.get_embedding() for tok in s]).cpu().numpy()  # (n, L * D), layer-major
                arrays.append(np.ascontiguousarray(v.reshape(len(s), n_layers, -1).transpose(1, 0, 2)))  # (L, n, D)
            np.savez(cmd["save"], *arrays)
        for s in sentences:
            s.clear_embeddings()
        print(json.dumps({"seconds": seconds}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

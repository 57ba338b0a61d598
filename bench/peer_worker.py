"""Runs inside the AllenNLP venv (see peer_allennlp.py): times AllenNLP 2.10.1's ``_ElmoBiLm``.

    python peer_worker.py OPTIONS WEIGHTS SENTENCES_JSON OUT_PREFIX --threads 2 --batch-size 64 --compare 2

Reads the batches (lists of tokenized sentences) from SENTENCES_JSON, converts them with
AllenNLP's ``batch_to_ids`` (not timed, as for ours), runs ``_ElmoBiLm`` (stateful, as AllenNLP
always is) under ``torch.no_grad()`` after one warm-up batch and a state reset, and writes
OUT_PREFIX.json (timing) and OUT_PREFIX.npz (layers of the first ``--compare`` batches, boundaries removed).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peer_stubs"))
from peer_env import batch_to_ids, load_elmo_bilm, remove_sentence_boundaries  # noqa: E402  (stubs first)

import numpy as np  # noqa: E402
import torch  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("options")
    ap.add_argument("weights")
    ap.add_argument("batches_json")
    ap.add_argument("out_prefix")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--compare", type=int, default=2)
    args = ap.parse_args()
    batches = json.loads(Path(args.batches_json).read_text(encoding="utf-8"))
    ids = [batch_to_ids(b) for b in batches]
    n_tokens = sum(len(s) for b in batches for s in b)
    bilm = load_elmo_bilm(args.options, args.weights, args.threads)
    saved = []
    with torch.no_grad():
        bilm(ids[0])  # warm-up
        bilm._elmo_lstm.reset_states()
        t = time.perf_counter()
        for i, x in enumerate(ids):
            out = bilm(x)
            if i < args.compare:
                layers = [remove_sentence_boundaries(a, out["mask"])[0] for a in out["activations"]]
                saved.append(torch.stack(layers).numpy())  # (L, B, T, D)
        seconds = time.perf_counter() - t
    np.savez(args.out_prefix + ".npz", *saved)
    np.save(args.out_prefix + "_ids0.npy", ids[0].numpy())
    info = {"tokens": n_tokens, "seconds": seconds, "tokens_per_s": n_tokens / seconds, "threads": args.threads,
            "torch": torch.__version__, "allennlp": __import__("allennlp.version").version.VERSION,
            "pid": os.getpid()}
    Path(args.out_prefix + ".json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Keep a trained run's output softmax next to the shipped biLM, so a later continuation can start from it.

    python scripts/export_softmax.py --run runs/bilm/default_cont6 --vocab elmo_features/models/default/vocab.txt \
        [--out dev/default_softmax.hdf5]

Shipped weights carry no softmax (elmo_features/models/*/weights.hdf5). Run folders do not survive a session,
so this copies `softmax/W` (stored float16: half the size, max rounding error about 2e-4 at these magnitudes) and `softmax/b`
(float32) from the run's export into one small HDF5 file, with the sha256 of the output vocabulary it belongs to
and the run it came from as attributes. dev/README.md says how to build an `init_from` folder from it.
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import h5py
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from elmo_features.util.provenance import atomic_path  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="a train-bilm run folder with export/weights.hdf5")
    ap.add_argument("--vocab", required=True, help="the output vocabulary the softmax rows follow")
    ap.add_argument("--out", default="dev/default_softmax.hdf5")
    args = ap.parse_args()
    weights = Path(args.run) / "export" / "weights.hdf5"
    vocab = Path(args.vocab)
    for p in (weights, vocab):
        if not p.is_file():
            print(f"export_softmax: no file {p}; train (or --resume) the run to its export first", file=sys.stderr)
            return 2
    n_words = sum(1 for _ in vocab.open(encoding="utf-8"))
    with h5py.File(weights, "r") as src:
        if "softmax" not in src:
            print(f"export_softmax: {weights} has no softmax group (a shipped model, not a run export)", file=sys.stderr)
            return 2
        w = src["softmax/W"][...]  # (vocab rows incl. specials, projection_dim)
        b = src["softmax/b"][...]  # (vocab rows,)
    if w.shape[0] != b.shape[0] or w.shape[0] < n_words:
        print(f"export_softmax: softmax has {w.shape[0]} rows, bias {b.shape[0]}, vocabulary {vocab} {n_words} words: "
              "not the same model", file=sys.stderr)
        return 2
    with atomic_path(args.out) as tmp, h5py.File(tmp, "w") as out:
        out.create_dataset("softmax/W", data=w.astype(np.float16))
        out.create_dataset("softmax/b", data=b.astype(np.float32))
        out.attrs["source"] = f"{weights}: the softmax of the run promoted to the embedded biLM"
        out.attrs["vocab_sha256"] = hashlib.sha256(vocab.read_bytes()).hexdigest()
    err = float(np.abs(w.astype(np.float16).astype(np.float32) - w).max())
    print(f"wrote {args.out}: softmax/W {w.shape} float16 (max rounding error {err:.1e}), softmax/b {b.shape}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

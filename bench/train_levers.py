"""Training throughput levers on real-corpus batches: torch threads x batch size, plus the CPU's bf16 support.

    python bench/train_levers.py [--run runs/bilm/charonly] [--steps 6] [--json results/bilm/train_levers.json]

Uses the corpus cache (prep.npz, types.txt, vocab.txt) and config of an existing train-bilm run folder,
copied to a temporary folder, and times ``steps`` optimiser steps (after one warm-up step) of the run's
model for each setting, all in this one process. Only compare figures from the same run.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import git_commit, machine, now, write_json  # noqa: E402  (also puts the repo on sys.path)
from elmo_features.training.config import TrainConfig  # noqa: E402
from elmo_features.training.data import batches_for_epoch  # noqa: E402
from elmo_features.training.trainer import Trainer  # noqa: E402


def cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", default="runs/bilm/charonly", help="a train-bilm out_dir with prep.npz and config.yaml")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batch-tokens", default="4000,12000")
    ap.add_argument("--json")
    args = ap.parse_args()
    run = Path(args.run)
    d = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
    flags = cpu_flags()
    bf16 = "yes (avx512_bf16/amx_bf16)" if flags & {"avx512_bf16", "amx_bf16"} else "no (neither avx512_bf16 nor amx_bf16)"
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("prep.npz", "prep.json", "types.txt", "vocab.txt"):
            if (run / name).exists():
                shutil.copy(run / name, Path(tmp) / name)
        d.update(out_dir=tmp, heldout_file=None, init_from=None)
        tr = Trainer(TrainConfig.from_dict(d), progress=False)
        for bt in [int(x) for x in args.batch_tokens.split(",")]:
            batches = batches_for_epoch(tr.lengths, bt, 1, 0)
            for th in [int(x) for x in args.threads.split(",")]:
                torch.set_num_threads(th)
                tr.train_step(batches[0])
                n, t0 = 0, time.perf_counter()
                for b in batches[1 : args.steps + 1]:
                    n += tr.train_step(b)[1]
                rate = n / (time.perf_counter() - t0)
                results.append({"threads": th, "batch_tokens": bt, "tok_per_s": rate, "tokens": n})
                print(f"threads {th}, batch_tokens {bt:,}: {rate:,.0f} tok/s", flush=True)
        tr.close()
    out = {"command": "python bench/train_levers.py " + " ".join(sys.argv[1:]), "git_commit": git_commit(),
           "date": now(), "machine": machine(), "bf16": bf16, "run": str(run), "measurements": results}
    if args.json:
        write_json(Path(args.json), out)


if __name__ == "__main__":
    main()

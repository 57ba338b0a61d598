"""Training throughput levers on real-corpus batches: torch threads x batch size x precision (fp32, bf16 autocast).

    python bench/train_levers.py [--run runs/bilm/charonly] [--steps 6] [--json results/bilm/train_levers.json]
    python bench/train_levers.py --config configs/bilm/default.yaml --threads 2 --batch-tokens 12000 \
        --precision fp32,bf16 --repeats 3

Uses the corpus cache (prep.npz, types.txt, vocab.txt) and config of an existing train-bilm run folder,
copied to a temporary folder; or, with ``--config``, that config's model and training files (the corpus
cache is built once in runs/bench/train_levers_prep/). Times ``steps`` optimiser steps (after one warm-up
step) of the model for each setting, all in this one process; with ``--repeats`` the settings take turns
(fp32, bf16, fp32, bf16, ...) on the same batches and the median is reported, so a change in the machine's
load hits both. bf16 (``precision: bf16``: autocast, fp32 master weights) is measured only on a CPU with
AVX512-BF16 or AMX. Only compare figures from the same run.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
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
from elmo_features.model.precision import bf16_cpu_support  # noqa: E402


def time_steps(tr: Trainer, batches, steps: int) -> tuple[float, int]:
    """(tokens/s, tokens) of ``steps`` optimiser steps after one warm-up step."""
    tr.train_step(batches[0])
    n, t0 = 0, time.perf_counter()
    for b in batches[1 : steps + 1]:
        n += tr.train_step(b)[1]
    return n / (time.perf_counter() - t0), n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", default="runs/bilm/charonly", help="a train-bilm out_dir with prep.npz and config.yaml")
    ap.add_argument("--config", help="a train-bilm config instead of --run (its corpus cache is built once)")
    ap.add_argument("--precision", default="fp32", help="comma-separated: fp32, bf16")
    ap.add_argument("--repeats", type=int, default=1, help="rounds over the settings; the median is reported")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batch-tokens", default="4000,12000")
    ap.add_argument("--json")
    args = ap.parse_args()
    has_bf16, cpu = bf16_cpu_support()
    bf16 = ("yes: " if has_bf16 else "no: ") + cpu
    precisions = [p for p in args.precision.split(",") if p]
    if "bf16" in precisions and not has_bf16:
        print(f"bf16 not measured: this CPU has no bf16 matmul instructions ({cpu})", flush=True)
        precisions.remove("bf16")
    if args.config:
        run = Path(args.config)
        d = yaml.safe_load(run.read_text(encoding="utf-8"))
        prep = Path("runs/bench/train_levers_prep")
        prep.mkdir(parents=True, exist_ok=True)
    else:
        run = prep = Path(args.run)
        d = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
    settings = [(bt, th, pr) for bt in [int(x) for x in args.batch_tokens.split(",")]
                for th in [int(x) for x in args.threads.split(",")] for pr in precisions]
    rates: dict[tuple, list[float]] = {k: [] for k in settings}
    tokens: dict[tuple, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("prep.npz", "prep.json", "types.txt", "vocab.txt"):
            if (prep / name).exists():
                shutil.copy(prep / name, Path(tmp) / name)
        d.update(out_dir=tmp, heldout_file=None, init_from=None, vocab_file=None)
        tr = Trainer(TrainConfig.from_dict(d), progress=False)
        if args.config:  # keep the corpus cache for the next run
            for name in ("prep.npz", "prep.json", "types.txt", "vocab.txt"):
                if (Path(tmp) / name).exists():
                    shutil.copy(Path(tmp) / name, prep / name)
        for _ in range(args.repeats):
            for bt, th, pr in settings:
                batches = batches_for_epoch(tr.lengths, bt, 1, 0)
                torch.set_num_threads(th)
                tr.cfg.precision = pr
                rate, n = time_steps(tr, batches, args.steps)
                rates[(bt, th, pr)].append(rate)
                tokens[(bt, th, pr)] = n
                print(f"threads {th}, batch_tokens {bt:,}, {pr}: {rate:,.0f} tok/s", flush=True)
        tr.close()
    results = [{"threads": th, "batch_tokens": bt, "precision": pr, "tok_per_s": statistics.median(rates[k]),
                "tok_per_s_runs": rates[k], "tokens": tokens[k]} for k in settings for bt, th, pr in [k]]
    for r in results:
        print(f"median: threads {r['threads']}, batch_tokens {r['batch_tokens']:,}, {r['precision']}: "
              f"{r['tok_per_s']:,.0f} tok/s")
    out = {"command": "python bench/train_levers.py " + " ".join(sys.argv[1:]), "git_commit": git_commit(),
           "date": now(), "machine": machine(), "bf16": bf16, "run": str(run), "measurements": results}
    if args.json:
        write_json(Path(args.json), out)


if __name__ == "__main__":
    main()

"""Shared helpers of the benchmarks: matmul peak, timing, batching; machine facts and atomic writes re-exported
from ``elmo_features.util.provenance`` (``write_atomic`` = ``write_text_atomic``, ``now`` = ``timestamp``)."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from elmo_features.util.provenance import git_commit, machine, timestamp, write_text_atomic  # noqa: E402

now, write_atomic = timestamp, write_text_atomic  # the benchmarks' names
__all__ = ["REPO", "git_commit", "machine", "now", "write_atomic", "write_json", "matmul_gflops", "make_batches",
           "time_batches"]


def matmul_gflops(threads: int, n: int = 4096, reps: int = 5) -> dict:
    """Best fp32 GFLOP/s of an (n, n) @ (n, n) product (2 n^3 FLOPs) with ``threads`` threads.

    Two GEMM libraries: ``torch_mm`` (PyTorch's default CPU matmul, MKL sgemm) and ``onednn``
    (oneDNN with a pre-packed weight, as elmo_features' inference path uses; absent if unavailable).
    ``peak`` is the higher of the two: the roofline used for the shares.
    """
    from elmo_features.model.onednn import PackedLinear

    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)

    def best(fn) -> float:
        fn()  # warm-up
        t_best = float("inf")
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            t_best = min(t_best, time.perf_counter() - t)
        return 2 * n**3 / t_best / 1e9

    out = torch.empty(n, n)
    res = {"torch_mm": best(lambda: torch.mm(a, b, out=out))}
    lin = PackedLinear(b, batch_hint=n)
    if lin.onednn:
        with torch.inference_mode():
            res["onednn"] = best(lambda: lin(a))
    res["peak"] = max(res.values())
    return res


def make_batches(corpus: list[list[str]], batch_size: int, order: str) -> list[list[list[str]]]:
    """Consecutive batches of ``batch_size`` sentences in corpus order, or after a stable sort by length."""
    if order not in ("corpus", "sorted"):
        raise ValueError(f"order must be 'corpus' or 'sorted', got {order!r}")
    sents = sorted(corpus, key=len) if order == "sorted" else list(corpus)
    return [sents[i : i + batch_size] for i in range(0, len(sents), batch_size)]


def time_batches(fn, inputs: list, n_tokens: int, warmup=None) -> dict:
    """Run ``fn`` on every input once (after one warm-up call); tokens/s over the whole pass."""
    fn(warmup if warmup is not None else inputs[0])
    t = time.perf_counter()
    for x in inputs:
        fn(x)
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "tokens_per_s": n_tokens / seconds}


def write_json(path: Path, obj) -> None:
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")

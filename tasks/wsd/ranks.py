"""``wsd senses`` under torchrun: the ranks share the embedding, rank 0 alone chooses and writes.

Every rank reads the config, WordNet and SemCor. Rank r of R streams SemCor's sentences r, r + R, ... into per-sense
sums (``semcor_sums.stream_sums``); the float64 sums and counts are added up on rank 0 (one reduce per array) and
the held-out instances' vectors gathered there in training order (``gather_streamed``). The glosses and WordNet's
usage examples are embedded in rounds of R chunks, chunk c by rank c mod R, each round's pooled vectors gathered
on rank 0, which alone writes them to its gloss cache (``senses.pooled_layers``). Rank 0 then chooses the settings,
trains the part-of-speech head and writes the sense file; the other ranks wait for it.

Waits that can be long (a slower shard, rank 0's choices) go through the group's store without a deadline
(``DataParallel.all_ok``); the collectives have ``ELMO_TASKS_DIST_TIMEOUT``. An error of one rank is told by all.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

from elmo_features.util import distributed as D

from elmo_tasks.experiment.data_parallel import DataParallel


def gather_streamed(ranks: DataParallel, streamed):
    """Every rank's ``semcor_sums.Streamed`` (of its shard) added up on rank 0, as one pass over all sentences
    would give it (the sums in another order: equal up to float64 rounding); None on the other ranks."""
    with D.collective("sharing the layers' shape"):
        shapes = D.all_gather(tuple(streamed.sums.shape[1:]))
    L, Dim = max(shapes)  # ((0, 0) from a rank without sentences)
    for name in ("sums", "held_sums"):
        a = getattr(streamed, name)
        if a.shape[1:] != (L, Dim):
            setattr(streamed, name, np.zeros((a.shape[0], L, Dim)))  # (K, L, D) float64
    for name in ("sums", "counts", "held_sums", "held_counts"):
        with D.collective("adding up SemCor's sums"):
            dist.reduce(torch.from_numpy(np.ascontiguousarray(getattr(streamed, name))), dst=0)
    if len(streamed.held_vecs) == 0:
        streamed.held_vecs = np.zeros((0, L, Dim), np.float32)
    parts = D.gather_to_main((streamed.held_vecs, streamed.held_rows), "gathering the held-out vectors")
    if not ranks.is_main:
        return None
    rows = np.concatenate([p[1] for p in parts])  # (H,)
    order = np.argsort(rows, kind="stable")  # training order, as one process keeps them
    streamed.held_vecs = np.concatenate([p[0] for p in parts])[order]  # (H, L, D)
    streamed.held_rows = rows[order]
    return streamed


def round_parts(ranks: DataParallel | None, compute, what: str) -> list | None:
    """``compute()`` on every rank (None: nothing for it this round); every rank's result on rank 0 in rank order
    (None on the others). An error of any rank stops all of them, each naming it."""
    if ranks is None or ranks.world_size == 1:
        return [compute()]
    part, error = None, None
    try:
        part = compute()
    except Exception as e:  # (told to the other ranks first, then raised here)
        error = e
    message = None if error is None else (" ".join(str(error).split()) or type(error).__name__)
    with D.collective(f"embedding the {what}"):
        messages = D.all_gather(message)
    if error is not None:
        raise error
    failed = [f"rank {r}: {m}" for r, m in enumerate(messages) if m is not None]
    if failed:
        raise D.DistributedError(f"embedding the {what} failed on {'; '.join(failed)}")
    return D.gather_to_main(part, f"gathering the {what}")


def from_main(ranks: DataParallel | None, fn):
    """Rank 0's ``fn()`` on every rank (one process: ``fn()``)."""
    return fn() if ranks is None or ranks.world_size == 1 else ranks.from_main(fn)

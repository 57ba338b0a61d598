"""SemCor's instances streamed into per-sense sums: each chunk of training sentences is embedded, its annotated
instances pooled per layer and added to the sum of each gold key, and the chunk's arrays dropped (a 13-layer
encoder's per-word arrays of SemCor are ~30 GB; the sums of MiniLM's ~33k senses are 0.7 GB).

The held-out sentences (``sense_method.held_out_sentences``) go to sums of their own, and their annotated instances'
vectors are kept (a twentieth of the instances): the held-out choices need the sums of the others, the sense file
the sums of all. ``shard``: under torchrun, rank r of R streams sentences r, r + R, ... and the sums are added up
on rank 0 (``gather``).
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from elmo_features.util.memory import release_freed_memory

from elmo_tasks.wsd.data.examples import WsdSentence, all_targets
from elmo_tasks.wsd.knn import SenseSums
from elmo_tasks.wsd.sense_method import HeldOut, held_out_sentences
from elmo_tasks.wsd.senses import eta
from elmo_tasks.wsd.vectors import CHUNK, all_layers


@dataclass
class Streamed:
    """The sums of one pass over the training sentences (or one rank's shard of them).

    ``keys``: the fit keys (in the other sentences), then the keys only the held-out sentences tag; ``sums``
    (K, L, D) float64 and ``counts`` (K,) of the other sentences' instances; ``held_sums`` (Kh, L, D) float64 and
    ``held_counts`` (Kh,) of the held-out ones, for ``held_keys``; ``held_vecs`` (H, L, D) float32 of the held-out annotated instances,
    in training order (``held_rows``: their indices among all targets)."""

    keys: list[str]
    n_fit: int
    held_keys: list[str]
    sums: np.ndarray
    counts: np.ndarray
    held_sums: np.ndarray
    held_counts: np.ndarray
    held_vecs: np.ndarray
    held_rows: np.ndarray


def stream_sums(source, train_ex: Sequence[WsdSentence], every: int, by: str, progress: bool | None = None,
                chunk: int = CHUNK, shard: tuple[int, int] = (0, 1)) -> Streamed:
    """Embed the training sentences ``chunk`` at a time (rank ``shard[0]`` of ``shard[1]``: every R-th sentence)
    and add their annotated instances into the sums of ``Streamed``."""
    held = held_out_sentences(list(train_ex), every, by)
    fit_keys = sorted({k for ex, h in zip(train_ex, held) if not h for t in ex.targets for k in t.gold})
    held_only = sorted({k for ex, h in zip(train_ex, held) if h for t in ex.targets for k in t.gold} - set(fit_keys))
    keys = fit_keys + held_only
    held_keys = sorted({k for ex, h in zip(train_ex, held) if h for t in ex.targets for k in t.gold})
    row = {k: i for i, k in enumerate(keys)}
    held_row = {k: i for i, k in enumerate(held_keys)}
    first_target = np.cumsum([0] + [len(ex.targets) for ex in train_ex])  # (N_sentences + 1,)
    rank, size = shard
    mine = list(range(rank, len(train_ex), size))
    sums = held_sums = None
    counts, held_counts = np.zeros(len(keys), np.int64), np.zeros(len(held_keys), np.int64)
    held_vecs, held_rows = [], []
    t0 = time.perf_counter()
    for c in range(0, len(mine), chunk):
        part = mine[c:c + chunk]
        layers = all_layers(source, [train_ex[i].tokens for i in part], "train")  # [(L, n_i, D)]
        if sums is None:
            L, D = layers[0].shape[0], layers[0].shape[2]
            sums, held_sums = np.zeros((len(keys), L, D)), np.zeros((len(held_keys), L, D))  # (K|Kh, L, D) float64
        for i, arr in zip(part, layers, strict=True):
            ex = train_ex[i]
            if arr.shape[1] != len(ex.tokens):
                raise ValueError(f"sentence {ex.id or ex.tokens[:5]}: {len(ex.tokens)} tokens but features for "
                                 f"{arr.shape[1]}")
            total, n, at = (held_sums, held_counts, held_row) if held[i] else (sums, counts, row)
            for j, t in enumerate(ex.targets):
                v = arr[:, t.start:t.end].mean(axis=1)  # (L, D) float32, as vectors.instance_layers
                for k in dict.fromkeys(t.gold):
                    total[at[k]] += v
                    n[at[k]] += 1
                if held[i] and t.gold:
                    held_vecs.append(v)
                    held_rows.append(first_target[i] + j)
        del layers  # one chunk's arrays at a time
        release_freed_memory()  # (their freed pages out of the resident set)
        if progress is not False and (c // chunk) % 10 == 9:
            print(f"training sentences: {min(c + chunk, len(mine)):,} of {len(mine):,} embedded "
                  f"{eta(time.perf_counter() - t0, c + len(part), len(mine))}", file=sys.stderr, flush=True)
    if sums is None:  # (a rank without sentences: its sums are empty)
        sums, held_sums = np.zeros((len(keys), 0, 0)), np.zeros((len(held_keys), 0, 0))
    vecs = np.stack(held_vecs) if held_vecs else np.zeros((0,) + sums.shape[1:], np.float32)  # (H, L, D)
    return Streamed(keys, len(fit_keys), held_keys, sums, counts, held_sums, held_counts, vecs, np.asarray(held_rows, np.int64))


def held_out_of(streamed: Streamed, train_ex: Sequence[WsdSentence], every: int, by: str) -> HeldOut:
    """The ``HeldOut`` of the held-out choices: the fit keys' sums (a view, no copy), the held-out targets and vectors."""
    n = streamed.n_fit
    fit = SenseSums(streamed.keys[:n], streamed.sums[:n], streamed.counts[:n])
    targets = all_targets(list(train_ex))
    return HeldOut(every, fit, [targets[i] for i in streamed.held_rows], streamed.held_vecs, by)


def all_sums(streamed: Streamed) -> SenseSums:
    """The sums of every training instance: the held-out sentences' added into the others' (in place: the fit sums
    are gone afterwards)."""
    row = {k: i for i, k in enumerate(streamed.keys)}
    for j, k in enumerate(streamed.held_keys):
        streamed.sums[row[k]] += streamed.held_sums[j]
        streamed.counts[row[k]] += streamed.held_counts[j]
    streamed.held_sums = np.zeros((0,) + streamed.held_sums.shape[1:])  # (not a view, which would keep them)
    return SenseSums(streamed.keys, streamed.sums, streamed.counts)

"""Instance vectors for WSD: every layer of a feature source at each target (a multiword target is
the mean over its tokens).

Feature sources are the project's (``elmo_tasks.features``) or a plugin's: each gives its per-word arrays through
``FeatureSource.word_layers``: every layer (L, n, D) for a source that ``offers_layers`` (biLMs, Transformer
encoders, through their disk cache), one layer (n, d) -> (1, n, d) for the others (static vectors).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from elmo_tasks.wsd.data.examples import WsdSentence
from elmo_tasks.wsd.data.reader import WsdFormatError

CHUNK = 1024  # sentences embedded at a time where no per-word array is needed again (13 x 768 floats per token)


def all_layers(source, sentences: Sequence[Sequence[str]], split: str) -> list[np.ndarray]:
    """Per-sentence float32 arrays (L, n_i, D) with every layer the source has (its ``word_layers``)."""
    try:
        arrays = source.word_layers([list(s) for s in sentences], split)
    except TypeError as e:  # a source without per-word arrays (e.g. concat): one line, not a traceback
        raise WsdFormatError(f"WSD 1-NN needs per-word vectors: {e}") from None
    return [a[None] if a.ndim == 2 else a for a in arrays]  # (n, D) -> (1, n, D)


def instance_layers(source, examples: Sequence[WsdSentence], split: str, chunk: int | None = None,
                    on_chunk: Callable[[Sequence[WsdSentence], list[np.ndarray]], None] | None = None,
                    vectors: bool = True) -> np.ndarray | None:
    """(N, L, D) float32 instance vectors of every layer of ``source``. With ``chunk``, only ``chunk`` sentences'
    per-word arrays are in memory at a time (a 13-layer encoder's SemCor arrays alone are ~30 GB): read back from
    the disk cache when the source can (``stream_layers``: the vectors of embedding all at once), else embedded
    chunk by chunk. ``on_chunk(part, layers)`` sees each chunk's arrays (e.g. to keep what a head reads of them);
    with ``vectors=False`` nothing else is kept (None is returned)."""
    step = chunk or max(len(examples), 1)
    stream = getattr(source, "stream_layers", None)  # a FeatureSource method (not every test double has it)
    lazy = stream([list(ex.tokens) for ex in examples], split) if chunk and stream is not None else None
    out, row = None, 0
    try:
        for i in range(0, len(examples), step):
            part = examples[i:i + step]
            if lazy is not None:
                layers = [a[None] if a.ndim == 2 else a for a in lazy[i:i + step]]
            else:
                layers = all_layers(source, [ex.tokens for ex in part], split)
            if vectors:
                if out is None:
                    out = _empty(examples, layers[0].shape)
                row = _fill(out, row, part, layers)
            if on_chunk is not None:
                on_chunk(part, layers)
            del layers  # before the next chunk: one chunk's arrays at a time
    finally:
        if lazy is not None and hasattr(lazy, "close"):
            lazy.close()
    if out is None and vectors:
        raise ValueError("no WSD targets in these examples")
    return out


def _empty(examples: Sequence[WsdSentence], shape: tuple[int, ...]) -> np.ndarray:
    n = sum(len(ex.targets) for ex in examples)
    if n == 0:
        raise ValueError("no WSD targets in these examples")
    return np.zeros((n, shape[0], shape[2]), dtype=np.float32)  # (N, L, D)


def _fill(out: np.ndarray, row: int, examples: Sequence[WsdSentence], layers: Sequence[np.ndarray]) -> int:
    """Write the examples' target vectors into ``out`` from ``row``; returns the next row."""
    for ex, arr in zip(examples, layers, strict=True):
        if arr.shape[1] != len(ex.tokens):
            raise ValueError(f"sentence {ex.id or ex.tokens[:5]}: {len(ex.tokens)} tokens but features for "
                             f"{arr.shape[1]}")
        for t in ex.targets:
            out[row] = arr[:, t.start:t.end].mean(axis=1)  # (L, D)
            row += 1
    return row

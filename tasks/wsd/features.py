"""Instance vectors for WSD: every layer of a feature source at each target (a multiword target is
the mean over its tokens).

Feature sources are the project's (``tasks.features``) or a plugin's: each gives its per-word arrays through
``FeatureSource.word_layers``: every layer (L, n, D) for a source that ``offers_layers`` (biLMs, Transformer
encoders, through their disk cache), one layer (n, d) -> (1, n, d) for the others (static vectors).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from tasks.wsd.data.examples import WsdSentence
from tasks.wsd.data.reader import WsdFormatError


def all_layers(source, sentences: Sequence[Sequence[str]], split: str) -> list[np.ndarray]:
    """Per-sentence float32 arrays (L, n_i, D) with every layer the source has (its ``word_layers``)."""
    try:
        arrays = source.word_layers([list(s) for s in sentences], split)
    except TypeError as e:  # a source without per-word arrays (e.g. concat): one line, not a traceback
        raise WsdFormatError(f"WSD 1-NN needs per-word vectors: {e}") from None
    return [a[None] if a.ndim == 2 else a for a in arrays]  # (n, D) -> (1, n, D)


def instance_vectors(examples: Sequence[WsdSentence], layers: Sequence[np.ndarray]) -> np.ndarray:
    """(N, L, D) float32: mean over each target's tokens, targets in example order."""
    if len(examples) != len(layers):
        raise ValueError(f"{len(examples)} examples but {len(layers)} feature arrays")
    n = sum(len(ex.targets) for ex in examples)
    if n == 0:
        raise ValueError("no WSD targets in these examples")
    L, _, D = layers[0].shape
    out = np.zeros((n, L, D), dtype=np.float32)
    row = 0
    for ex, arr in zip(examples, layers):
        if arr.shape[1] != len(ex.tokens):
            raise ValueError(f"sentence {ex.id or ex.tokens[:5]}: {len(ex.tokens)} tokens but features for "
                             f"{arr.shape[1]}")
        for t in ex.targets:
            out[row] = arr[:, t.start:t.end].mean(axis=1)  # (L, D)
            row += 1
    return out

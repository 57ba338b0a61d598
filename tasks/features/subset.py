"""Frozen features of some tokens of a sentence only: what a head that reads a few tokens (``wsd_linear``: the
target words) keeps of a long data set's arrays. SemCor's per-word arrays of a 13-layer, 768-dimension encoder are
~30 GB; its targets' rows are ~9 GB.

A head declares the tokens it reads (``Head.token_positions``); a source whose features are computed token by token
(``FeatureSource.tokenwise``: no statistic over the batch) may then be given those rows alone. Before collation the
rows go back to their places in a zero array of the sentence's shape, so the head sees what it would have seen at
those tokens, to the last digit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np


@dataclass
class TokenSubset:
    """The rows of some tokens of one sentence's item: values (..., k, D) at positions (k,) of n tokens."""

    values: np.ndarray
    positions: np.ndarray  # (k,) int64, increasing
    n: int

    @classmethod
    def of(cls, item: np.ndarray, positions: Sequence[int]) -> "TokenSubset":
        """Keep the rows of ``positions`` of an item (..., n, D) (a copy: the full array can be freed)."""
        pos = np.array(sorted(set(positions)), dtype=np.int64)
        return cls(np.ascontiguousarray(item[..., pos, :]), pos, int(item.shape[-2]))

    def layer(self, l: int) -> "TokenSubset":
        """The rows of layer ``l`` of an all-layer item (L, k, D): the item of that fixed layer (k, D)."""
        return TokenSubset(self.values[l], self.positions, self.n)

    def dense(self) -> np.ndarray:
        """(..., n, D): the kept rows at their positions, zeros elsewhere."""
        out = np.zeros(self.values.shape[:-2] + (self.n, self.values.shape[-1]), dtype=self.values.dtype)
        out[..., self.positions, :] = self.values
        return out


def dense_items(items: Sequence[Any]) -> list[Any]:
    """Items as the source's ``collate`` takes them: token subsets made whole again, other items unchanged."""
    return [item.dense() if isinstance(item, TokenSubset) else item for item in items]


def subset_items(items: Sequence[Any], positions: Sequence[Sequence[int]]) -> list[TokenSubset]:
    """Each item (..., n_i, D) reduced to the rows of its sentence's ``positions``."""
    return [TokenSubset.of(item, pos) for item, pos in zip(items, positions, strict=True)]

"""The ELMo paper's 1-nearest-neighbour WSD (Peters et al. 2018, sec. 5.3).

Each sense key of the training corpus is represented by the average vector of its tagged instances
(an instance with several gold keys counts for each). A test instance takes, among the WordNet
candidates of its lemma+pos that were seen in training, the sense whose average is nearest by cosine;
with no candidate seen in training it backs off to the WordNet first sense.

Averages of any fixed mix of layers follow from per-layer sums, since mixing is linear:
``centroid(w) = sum_l w_l * sums[:, l] / count`` (a scale factor such as ScalarMix's gamma does not
change cosine).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy import sparse

from elmo_tasks.wsd.data.examples import WsdTarget


def mix_layers(vectors: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """(N, L, D) -> (N, D): sum_l weights[l] * vectors[:, l]."""
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (vectors.shape[1],):
        raise ValueError(f"{len(w)} layer weights for vectors with {vectors.shape[1]} layers")
    return np.einsum("nld,l->nd", vectors, w, dtype=np.float64).astype(np.float32)


class SenseSums:
    """Per-sense running sums of instance vectors for every layer: sums (K, L, D) float64, counts (K,)."""

    def __init__(self, keys: list[str], sums: np.ndarray, counts: np.ndarray) -> None:
        self.keys = keys
        self.index = {k: i for i, k in enumerate(keys)}
        self.sums = sums
        self.counts = counts

    @classmethod
    def from_targets(cls, targets: Sequence[WsdTarget], vectors: np.ndarray, chunk: int = 8192,
                     rows_of: np.ndarray | None = None) -> "SenseSums":
        """Sum vectors (N, L, D) per gold key of the targets (each key of a target once), chunk rows at a time.
        ``rows_of``: target i's vector is ``vectors[rows_of[i]]`` (a subset without copying the whole array)."""
        if not any(t.gold for t in targets):
            raise ValueError("the training targets have no gold keys")
        return cls.from_keys([t.gold for t in targets], vectors, chunk, rows_of)

    @classmethod
    def from_keys(cls, row_keys: Sequence[Sequence[str]], vectors: np.ndarray, chunk: int = 8192,
                  rows_of: np.ndarray | None = None, dtype=np.float64) -> "SenseSums":
        """Sum vectors (N, L, D) per key of ``row_keys[i]`` (the keys row i is tagged with, each once), in
        ``dtype``."""
        n = vectors.shape[0] if rows_of is None else len(rows_of)
        if len(row_keys) != n:
            raise ValueError(f"{len(row_keys)} targets but {n} vectors")
        keys = sorted({k for ks in row_keys for k in ks})
        index = {k: i for i, k in enumerate(keys)}
        rows, cols = [], []  # (target row, key index) pairs
        for r, ks in enumerate(row_keys):
            for k in dict.fromkeys(ks):
                rows.append(r)
                cols.append(index[k])
        rows_a, cols_a = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        _, L, D = vectors.shape
        sums = np.zeros((len(keys), L, D), dtype=dtype)  # (K, L, D)
        for start in range(0, n, chunk):
            sel = (rows_a >= start) & (rows_a < start + chunk)
            part = vectors[start:start + chunk] if rows_of is None else vectors[rows_of[start:start + chunk]]
            block = np.asarray(part, dtype=np.float64)  # (c, L, D)
            c = block.shape[0]
            touched, at = np.unique(cols_a[sel], return_inverse=True)  # (U,) the keys of this chunk's rows
            assign = sparse.csr_matrix((np.ones(int(sel.sum())), (at, rows_a[sel] - start)),
                                       shape=(len(touched), c))  # (U, c) 0/1
            sums[touched] += (assign @ block.reshape(c, L * D)).reshape(len(touched), L, D)  # (a chunk's keys only)
        counts = np.bincount(cols_a, minlength=len(keys)).astype(np.int64)  # (K,)
        return cls(keys, sums, counts)

    def mixed_sums(self, weights: Sequence[float]) -> np.ndarray:
        """(K, D) float64 sums of each sense's vectors for the layer mix ``weights`` (L,)."""
        return np.einsum("kld,l->kd", self.sums, np.asarray(weights, dtype=np.float64))

    def centroids(self, weights: Sequence[float]) -> np.ndarray:
        """(K, D) float32 average vector per sense for the layer mix ``weights`` (L,)."""
        return (self.mixed_sums(weights) / self.counts[:, None]).astype(np.float32)  # (K, D)


def _unit(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero)."""
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.where(n > 0, x / np.maximum(n, 1e-30), 0.0)


def nearest_sense(targets: Sequence[WsdTarget], vectors: np.ndarray, keys: list[str],
                  centroids: np.ndarray) -> tuple[dict[str, str | None], int]:
    """1-NN by cosine among seen candidates, else WordNet first sense.

    vectors: (N, D) test instance vectors; centroids: (K, D) rows for ``keys``. Returns (id -> key or None
    when WordNet lacks the lemma, number of back-offs). Ties go to the lower WordNet sense number; a zero
    test vector (e.g. all words unknown to a static table) backs off as well.
    """
    if len(targets) != vectors.shape[0]:
        raise ValueError(f"{len(targets)} targets but {vectors.shape[0]} vectors")
    if centroids.shape != (len(keys), vectors.shape[1]):
        raise ValueError(f"centroids {centroids.shape} do not match {len(keys)} keys x dim {vectors.shape[1]}")
    index = {k: i for i, k in enumerate(keys)}
    C = _unit(centroids.astype(np.float64))  # (K, D)
    V = _unit(np.asarray(vectors, dtype=np.float64))  # (N, D)
    answers: dict[str, str | None] = {}
    backoff = 0
    for n, t in enumerate(targets):
        cands = [k for k in t.candidates if k in index]
        if not cands or not V[n].any():
            answers[t.id] = t.first_sense
            backoff += 1
            continue
        sims = C[[index[k] for k in cands]] @ V[n]  # (c,)
        answers[t.id] = cands[int(np.argmax(sims))]
    return answers, backoff

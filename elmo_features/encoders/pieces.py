"""Word pieces -> words: the alignment, the windows of a long sentence, and the pooling of pieces to words.

The alignment is the fast tokenizer's own ``word_ids()`` (never string matching): piece j belongs to word
``word_ids[j]`` (None for special tokens, which are left out). A word with no piece (a token the tokenizer's
normalizer deletes, such as a lone zero-width space) gets a zero vector in every layer and is counted.

A sentence longer than the model's window (``window`` pieces, special tokens excluded) is cut into
overlapping windows that start and end on word boundaries; each window is embedded on its own (with the
model's special tokens), and each word takes its vectors from the window where it has the most context
(the largest min(pieces before it, pieces after it) inside the window; ties: the earlier window).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

POOLINGS = ("mean", "first", "last")


@dataclass(frozen=True)
class Window:
    """Words [start, end) of a sentence, embedded together; ``owns`` lists the words whose vectors it gives."""

    start: int
    end: int
    owns: tuple[int, ...]


def piece_counts(word_ids: Sequence[int | None], n_words: int) -> list[int]:
    """Pieces per word (0 for a word the tokenizer gave no piece)."""
    counts = [0] * n_words
    for w in word_ids:
        if w is not None:
            counts[w] += 1
    return counts


def plan_windows(counts: Sequence[int], window: int, stride: int) -> list[Window]:
    """Overlapping word-aligned windows of at most ``window`` pieces (a single longer word fills one window
    alone; its extra pieces are cut by the caller), each starting about ``stride`` pieces after the last."""
    n = len(counts)
    if window < 1 or not 1 <= stride <= window:
        raise ValueError(f"need window >= 1 and 1 <= stride <= window, got window={window}, stride={stride}")
    offsets = [0]
    for c in counts:
        offsets.append(offsets[-1] + c)  # offsets[i]: pieces before word i
    if offsets[-1] <= window:
        return [Window(0, n, tuple(range(n)))]
    spans: list[tuple[int, int]] = []
    s = 0
    while True:
        e = s + 1
        while e < n and offsets[e + 1] - offsets[s] <= window:
            e += 1
        spans.append((s, e))
        if e >= n:
            break
        nxt = s + 1
        while nxt < e and offsets[nxt] - offsets[s] < stride:
            nxt += 1
        s = nxt
    best: dict[int, list[int]] = {k: [] for k in range(len(spans))}
    for i in range(n):
        score = lambda k: min(offsets[i] - offsets[spans[k][0]], offsets[spans[k][1]] - offsets[i + 1])
        cands = [k for k, (a, b) in enumerate(spans) if a <= i < b]
        best[max(cands, key=lambda k: (score(k), -k))].append(i)
    return [Window(a, b, tuple(best[k])) for k, (a, b) in enumerate(spans) if best[k]]


def pool_pieces(hidden: torch.Tensor, word_index: torch.Tensor, n_slots: int, how: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Pool piece vectors to word slots.

    hidden: (L, N, D) piece vectors; word_index: (N,) int64 slot of each piece, -1 for pieces that belong to
    no word (special tokens, padding). Returns (L, n_slots, D) pooled vectors (zeros for a slot with no piece)
    and (n_slots,) piece counts.
    """
    if how not in POOLINGS:
        raise ValueError(f"unknown subword pooling {how!r}; valid: {', '.join(POOLINGS)}")
    L, N, D = hidden.shape
    keep = word_index >= 0  # (N,)
    idx = word_index[keep]  # (K,)
    counts = torch.zeros(n_slots, dtype=torch.int64, device=hidden.device).index_add_(
        0, idx, torch.ones_like(idx))  # (n_slots,)
    out = hidden.new_zeros(L, n_slots, D)  # (L, S, D)
    if how == "mean":
        out.index_add_(1, idx, hidden[:, keep])  # sums (L, S, D)
        out /= counts.clamp(min=1).to(hidden.dtype)[None, :, None]
        return out, counts
    pos = torch.arange(N, device=hidden.device)[keep]  # (K,) piece position of each kept piece
    fill = N if how == "first" else -1
    pick = torch.full((n_slots,), fill, dtype=torch.int64, device=hidden.device)
    pick = pick.scatter_reduce(0, idx, pos, reduce="amin" if how == "first" else "amax")  # (S,)
    has = counts > 0
    out[:, has] = hidden[:, pick[has]]
    return out, counts

"""Frozen static word vectors inside the token layer (the ``token_vectors`` extension of the format).

A biLM with ``token_vectors`` in its options concatenates, for every token, a frozen pretrained
word vector (e.g. GloVe 6B 50d, rows for the biLM's training vocabulary only) to the character-CNN
output before the highway layers. A token without a row gets the zero vector, so it is represented
by its characters alone, exactly as in ELMo. The lookup is keyed by the token's own characters:
the word is decoded from its 50 character ids (UTF-8 bytes, cut to 48 as ``batch_to_ids`` does),
lower-cased when ``lowercase`` is set, and looked up in ``words``.

HDF5 datasets (see docs/weights_format.md): ``token_vectors/W`` (n_words, dim) and
``token_vectors/words`` (n_words,) UTF-8 strings. Row ``i`` of ``W`` belongs to ``words[i]``.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from elmo_features.model.char_ids import BEGINNING_OF_WORD_CHARACTER, END_OF_WORD_CHARACTER

_BOW = BEGINNING_OF_WORD_CHARACTER + 1  # shifted ids as they appear in batch_to_ids output
_EOW = END_OF_WORD_CHARACTER + 1


def decode_char_ids(row: np.ndarray) -> str | None:
    """The token spelled by one row of 50 character ids, or None for a boundary/padding token."""
    if row[0] != _BOW:
        return None
    ends = np.flatnonzero(row == _EOW)
    if len(ends) == 0:
        return None
    byts = bytes((row[1 : ends[0]] - 1).astype(np.uint8).tolist())
    return byts.decode("utf-8", "ignore")


class TokenVectors(nn.Module):
    """Maps character ids (N, 50) to frozen word vectors (N, dim); unknown words get zeros.

    ``vectors`` is an (n_words, dim) float buffer (not a parameter: never trained) and ``words`` its
    row labels. ``rows(char_ids)`` gives each token's row (n_words = no vector), memoised per spelling.
    """

    def __init__(self, words: Sequence[str], vectors: np.ndarray | torch.Tensor, lowercase: bool = True):
        super().__init__()
        vectors = torch.as_tensor(np.asarray(vectors, dtype=np.float32))
        if vectors.ndim != 2 or vectors.shape[0] != len(words):
            raise ValueError(f"token vectors: {len(words)} words but a matrix of shape {tuple(vectors.shape)}")
        self.words = list(words)
        self.lowercase = lowercase
        self.dim = int(vectors.shape[1])
        table = torch.cat([vectors, vectors.new_zeros(1, self.dim)])  # last row: the zero vector
        self.register_buffer("table", table, persistent=False)  # (n_words + 1, dim)
        self._index = {w: i for i, w in enumerate(self.words)}
        self._memo: dict[bytes, int] = {}

    @property
    def n_words(self) -> int:
        return len(self.words)

    def row_of_word(self, word: str) -> int:
        """Row of ``word`` (``n_words`` when it has none)."""
        return self._index.get(word.lower() if self.lowercase else word, self.n_words)

    def rows(self, char_ids: torch.Tensor) -> torch.Tensor:
        """(N, 50) character ids -> (N,) long row indices on the same device."""
        arr = char_ids.detach().to("cpu", torch.int16).numpy()
        out = np.empty(len(arr), dtype=np.int64)
        memo = self._memo
        if len(memo) > 500_000:
            memo.clear()
        for i, row in enumerate(arr):
            key = row.tobytes()
            r = memo.get(key)
            if r is None:
                word = decode_char_ids(row)
                r = self.n_words if word is None else self.row_of_word(word)
                memo[key] = r
            out[i] = r
        return torch.from_numpy(out).to(char_ids.device)

    def forward(self, char_ids: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """(N, 50) -> (N, dim). ``rows`` (N,) may be given when already known (training)."""
        if rows is None:
            rows = self.rows(char_ids)
        return self.table[rows]  # (N, dim)


def select_vectors(vocab: Sequence[str], words: Sequence[str], vectors: np.ndarray,
                   lowercase: bool = True) -> tuple[list[str], np.ndarray]:
    """Rows of a pretrained table for the words of ``vocab`` only (lower-cased if asked), in
    first-seen order; the vectors are scaled to unit standard deviation over the kept entries."""
    index = {w: i for i, w in enumerate(words)}
    kept: list[str] = []
    seen: set[str] = set()
    for w in vocab:
        key = w.lower() if lowercase else w
        if key in index and key not in seen:
            seen.add(key)
            kept.append(key)
    if not kept:
        raise ValueError("no word of the biLM vocabulary has a pretrained vector (check the vectors' words file)")
    mat = np.asarray(vectors, dtype=np.float32)[[index[w] for w in kept]]  # (n, dim)
    std = float(mat.std())
    return kept, mat / (std if std > 0 else 1.0)

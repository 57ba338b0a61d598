"""Character-level token encoders inside a task head: a char CNN with max-pooling (Ma & Hovy 2016) or a char
BiLSTM (Lample et al. 2016), named under a head's ``chars:`` option (registry ``CHAR_ENCODERS``).

Characters are the token's own Unicode code points (Python ``str`` items, no normalisation, case kept). The
character vocabulary is built from the training tokens (``build_char_vocab``, saved in the head's vocab.json);
id 0 is padding, id 1 an unknown character (one never seen in training, or seen fewer than ``min_count``
times), ids 2.. the vocabulary in sorted order.

Truncation rule for long tokens: a token with more than ``max_length`` characters keeps its first
``max_length - max_length // 2`` and its last ``max_length // 2`` characters (prefix and suffix carry the
morphology; the middle of a long URL or number carries little). Tokens of ``max_length`` or fewer characters
are encoded whole.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from elmo_features.util.errors import ConfigError
from elmo_features.util.schema import Int, Num, key

from elmo_tasks.components import MAX_UNITS
from elmo_tasks.registry import CHAR_ENCODERS, class_contract

PAD, UNK = 0, 1


def truncate_token(token: str, max_length: int) -> str:
    """The characters of ``token`` the encoder sees: all of them, or the first ``max_length - max_length // 2``
    and the last ``max_length // 2`` when the token is longer than ``max_length``."""
    if len(token) <= max_length:
        return token
    tail = max_length // 2
    return token[: max_length - tail] + (token[-tail:] if tail else "")


def build_char_vocab(tokens, min_count: int = 1) -> list[str]:
    """Sorted characters occurring at least ``min_count`` times in ``tokens`` (an iterable of strings)."""
    counts = Counter(ch for tok in tokens for ch in tok)
    return sorted(ch for ch, n in counts.items() if n >= min_count)


class CharIndexer:
    """Token -> character ids with the truncation rule (cached per token string)."""

    def __init__(self, chars: list[str], max_length: int):
        self.index = {ch: i + 2 for i, ch in enumerate(chars)}
        self.max_length = max_length
        self._cache: dict[str, list[int]] = {}

    def __call__(self, token: str) -> list[int]:
        ids = self._cache.get(token)
        if ids is None:
            if len(self._cache) > 500_000:  # bounded for long prediction runs
                self._cache.clear()
            ids = [self.index.get(ch, UNK) for ch in truncate_token(token, self.max_length)]
            self._cache[token] = ids
        return ids

    def batch(self, tokens: list[str], device: torch.device | None = None) -> torch.Tensor:
        """Padded ids (U, C) of ``tokens`` (C = the longest, after truncation; at least 1)."""
        rows = [self(t) for t in tokens]
        C = max(1, max(len(r) for r in rows))
        ids = torch.zeros(len(rows), C, dtype=torch.long, device=device)  # (U, C)
        for i, r in enumerate(rows):
            if r:
                ids[i, : len(r)] = torch.tensor(r, dtype=torch.long, device=device)
        return ids


@dataclass
class CharCommonConfig:
    """Options shared by the character encoders."""

    embedding_dim: int = key(Int(min=1, max=MAX_UNITS), 30)
    max_length: int = key(Int(min=1, max=MAX_UNITS), 30,
                          doc="longer tokens: first max_length - max_length // 2 + last max_length // 2 characters")
    min_count: int = key(Int(min=1), 1, doc="training characters seen fewer times share the unknown-character id")
    dropout: float = key(Num(min=0, lt=1), 0.0, doc="on the character embeddings")


@dataclass
class CharCNNConfig(CharCommonConfig):
    """Ma & Hovy (2016): char embeddings 30, dropout 0.5, 30 filters of width 3, max-pooling."""

    filters: int = key(Int(min=1, max=MAX_UNITS), 30)
    width: int = key(Int(min=1, max=MAX_UNITS), 3, doc="odd, so every position of the token has a filter centred on it")
    dropout: float = key(Num(min=0, lt=1), 0.5)

    def check(self, where: str) -> None:
        if self.width % 2 == 0:
            raise ConfigError(f"{where}.width: must be odd, got {self.width}")


@dataclass
class CharLSTMConfig(CharCommonConfig):
    """Lample et al. (2016): char embeddings 25, a BiLSTM of 25 per direction, final states concatenated."""

    embedding_dim: int = key(Int(min=1, max=MAX_UNITS), 25)
    hidden_dim: int = key(Int(min=1, max=MAX_UNITS), 25)


class CharEncoder(nn.Module):
    """Base: ids (U, C) -> one vector per token (U, output_dim); padding never changes a token's vector."""

    output_dim: int

    def __init__(self, config: CharCommonConfig, num_chars: int):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(num_chars + 2, config.embedding_dim, padding_idx=PAD)
        self.drop = nn.Dropout(config.dropout)


CHAR_ENCODERS.set_contract(class_contract(CharEncoder))


@CHAR_ENCODERS.register("cnn")
class CharCNN(CharEncoder):
    """Embeddings -> dropout -> Conv1d (zero padding width // 2) -> tanh -> max over the token's positions."""

    Config = CharCNNConfig

    def __init__(self, config: CharCNNConfig, num_chars: int):
        super().__init__(config, num_chars)
        self.conv = nn.Conv1d(config.embedding_dim, config.filters, config.width, padding=config.width // 2)
        self.output_dim = config.filters

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """(U, C) -> (U, filters)."""
        valid = ids != PAD  # (U, C)
        valid[:, 0] = True  # an empty token (no characters) pools its one padding position
        e = self.drop(self.embed(ids))  # (U, C, E); the padding row is zero, like the conv's own zero padding
        h = torch.tanh(self.conv(e.transpose(1, 2)))  # (U, F, C)
        return h.masked_fill(~valid.unsqueeze(1), float("-inf")).max(dim=2).values  # (U, F)


@CHAR_ENCODERS.register("lstm")
class CharLSTM(CharEncoder):
    """Embeddings -> dropout -> packed BiLSTM -> [last forward state; last backward state]."""

    Config = CharLSTMConfig

    def __init__(self, config: CharLSTMConfig, num_chars: int):
        super().__init__(config, num_chars)
        self.lstm = nn.LSTM(config.embedding_dim, config.hidden_dim, batch_first=True, bidirectional=True)
        self.output_dim = 2 * config.hidden_dim

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """(U, C) -> (U, 2 * hidden_dim)."""
        lengths = (ids != PAD).sum(1).clamp(min=1).cpu()  # (U,)
        e = self.drop(self.embed(ids))  # (U, C, E)
        _, (h, _) = self.lstm(pack_padded_sequence(e, lengths, batch_first=True, enforce_sorted=False))
        return torch.cat([h[0], h[1]], dim=1)  # h: (2, U, H) -> (U, 2H)

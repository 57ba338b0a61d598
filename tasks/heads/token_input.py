"""The strong-baseline input options of ``crf_tagger`` and ``sentence_classifier`` (docs/strong_baselines.md).

The head's BiLSTM sees, per token, [features (after word dropout); character encoding; casing embedding]:

* ``chars: {name: cnn|lstm, ...}`` a character-level encoder of the token's own characters (tasks/heads/chars.py),
  its character vocabulary built from the training tokens and saved as ``vocab["chars"]``.
* ``casing_dim: N`` a learned N-dimensional embedding of the token's casing class (``casing_class``).
  GloVe 6B is lower-cased, so without this (or chars) a GloVe baseline cannot see capitals.
* ``word_dropout: p`` in training, each token's whole feature vector is replaced by zeros with probability p
  (no rescaling), so the head learns to use characters and context for unknown words. Lample et al. (2016)
  replace singleton words by an UNK embedding with p = 0.5; frozen features have no UNK row, and every token
  (not only singletons) is eligible, so useful values here are small (0.05 - 0.1).

All three are off by default, and then nothing is built: the head is exactly the plain one.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch
from torch import nn

from elmo_features.util.schema import Int, Num, key

from elmo_tasks.registry import CHAR_ENCODERS
from elmo_tasks.heads.chars import CharIndexer, build_char_vocab
from elmo_tasks.heads.variational import make_encoder

CASING_CLASSES = ("padding", "numeric", "mainly_numeric", "all_lower", "all_upper", "initial_upper",
                  "contains_digit", "other")


@lru_cache(maxsize=2**18)
def casing_class(token: str) -> int:
    """Index into CASING_CLASSES (never 0, which is padding), tested in this order: numeric (all digits),
    mainly_numeric (more than half digits), all_lower, all_upper (str.isupper: "U.S." too), initial_upper,
    contains_digit, other (punctuation, symbols, mixed case such as "iPhone")."""
    digits = sum(ch.isdigit() for ch in token)
    if token.isdigit():
        return 1
    if token and digits / len(token) > 0.5:
        return 2
    if token.islower():
        return 3
    if token.isupper():
        return 4
    if token[:1].isupper():
        return 5
    if digits:
        return 6
    return 7


@dataclass
class TokenInputOptions:
    """The options of this module, shared by the configs of the heads that take them (a dataclass base)."""

    chars: dict | None = key(default=None, doc="{name: cnn|lstm, ...}: char encoder", meta={"component": "chars"})
    casing_dim: int = key(Int(min=0), 0, doc="> 0: a learned embedding of each token's casing class")
    word_dropout: float = key(Num(min=0, lt=1), 0.0,
                              doc="training: a token's whole feature vector -> zeros with this probability")
    variational_dropout: bool = key(default=False,
                                    doc="dropout masks shared over time steps, also between BiLSTM layers")


def uses_token_input(config: Any) -> bool:
    """Whether a head config turns on any of the options of this module."""
    return config.chars is not None or config.casing_dim > 0 or config.word_dropout > 0


def char_encoder_config(section: dict) -> tuple[type, Any]:
    """(encoder class, its Config with defaults filled) for a ``chars:`` section ``{name: ..., **options}``."""
    params = {k: v for k, v in section.items() if k != "name"}
    cls = CHAR_ENCODERS.get(section["name"])
    return cls, cls.Config(**params)


def token_input_vocab(config: Any, train_examples: list) -> dict:
    """``{"chars": [...]}`` from the training tokens when ``config.chars`` is set, else {} (vocab unchanged)."""
    if config.chars is None:
        return {}
    tokens = (tok for ex in train_examples for tok in ex.tokens)
    return {"chars": build_char_vocab(tokens, char_encoder_config(config.chars)[1].min_count)}


class TokenInput(nn.Module):
    """[word-dropped features; char encoding; casing embedding] per token: (B, T, D) -> (B, T, output_dim)."""

    def __init__(self, config: Any, input_dim: int, vocab: dict):
        super().__init__()
        self.word_dropout = float(config.word_dropout)
        self.output_dim = input_dim
        self.chars = self.indexer = None
        if config.chars is not None:
            cls, char_config = char_encoder_config(config.chars)
            chars = list(vocab["chars"])
            self.chars = cls(char_config, len(chars))
            self.indexer = CharIndexer(chars, char_config.max_length)
            self.output_dim += self.chars.output_dim
        self.casing = None
        if config.casing_dim > 0:
            self.casing = nn.Embedding(len(CASING_CLASSES), config.casing_dim, padding_idx=0)
            self.output_dim += config.casing_dim

    def forward(self, x: torch.Tensor, mask: torch.Tensor, examples: list) -> torch.Tensor:
        """(B, T, D), (B, T), B examples with ``.tokens`` -> (B, T, output_dim), zero at padding."""
        B, T = mask.shape
        parts = [x]
        if self.training and self.word_dropout > 0:
            keep = torch.rand(B, T, 1, device=x.device) >= self.word_dropout  # (B, T, 1)
            parts[0] = x * keep.to(x.dtype)
        if self.chars is not None:
            parts.append(self.encode_chars(examples, mask))
        if self.casing is not None:
            ids = torch.zeros(B, T, dtype=torch.long, device=x.device)  # (B, T); 0 = padding
            ids[mask] = torch.tensor([casing_class(t) for ex in examples for t in ex.tokens], device=x.device)
            parts.append(self.casing(ids))  # (B, T, casing_dim)
        out = torch.cat(parts, dim=-1) if len(parts) > 1 else parts[0]
        return out * mask.unsqueeze(-1).to(out.dtype)

    def encode_chars(self, examples: list, mask: torch.Tensor) -> torch.Tensor:
        """Char encodings (B, T, F) of the examples' tokens (mask (B, T) left-aligned, True on the tokens);
        each distinct token string of the batch is encoded once."""
        device = mask.device
        slots: dict[str, int] = {}  # token -> row (1-based; row 0 is the zero vector of padding)
        rows = [slots.setdefault(t, len(slots) + 1) for ex in examples for t in ex.tokens]
        index = torch.zeros(mask.shape, dtype=torch.long, device=device)  # (B, T)
        index[mask] = torch.tensor(rows, dtype=torch.long, device=device)  # mask is left-aligned: row-major order
        enc = self.chars(self.indexer.batch(list(slots), device))  # (U, F)
        table = torch.cat([enc.new_zeros(1, enc.shape[1]), enc], dim=0)  # (U + 1, F)
        return table[index]  # (B, T, F)


def input_and_encoder(config: Any, input_dim: int, vocab: dict) -> tuple[TokenInput | None, nn.Module]:
    """The head's token input (None when every option is off) and the BiLSTM over it, built in that order (the
    config's ``hidden_dim``, ``num_layers``, ``dropout``, ``variational_dropout``)."""
    inputs = TokenInput(config, input_dim, vocab) if uses_token_input(config) else None
    encoder = make_encoder(inputs.output_dim if inputs is not None else input_dim, config.hidden_dim,
                           config.num_layers, config.dropout, config.variational_dropout)
    return inputs, encoder

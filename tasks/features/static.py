"""``static``: pre-trained word vectors (GloVe, word2vec, fastText), frozen; OOV rates are reported."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from elmo_features.util.arguments import uninformative_rows
from elmo_features.util.once import first_time
from elmo_features.util.schema import Int, key

from elmo_tasks.data.static_vectors import load_static_vectors
from elmo_tasks.data.types import DataFormatError
from elmo_tasks.registry import FEATURES
from elmo_tasks.features.base import FeatureContext, FeatureSource, InputPath, Memo, pad_tokens

OOV_WARN_RATE = 0.5  # a training OOV rate above it is warned about


@dataclass
class StaticConfig:
    path: str  # vectors file (text / word2vec binary / .npy matrix)
    format: Literal["auto", "text", "word2vec_bin", "npy"] = "auto"
    words_path: str | None = key(default=None, doc="word list for the .npy format")
    lowercase: bool | None = key(default=None, doc="None = auto (see elmo_tasks.data.static_vectors)")
    max_vectors: int | None = key(Int(min=1, nullable=True), None, doc="keep only the first N vectors")


def load_vectors(config: StaticConfig, memo: Memo):
    """The StaticVectors a config names (loaded once per ``memo``)."""
    args = dict(path=config.path, format=config.format, words_path=config.words_path,
                lowercase=config.lowercase, max_vectors=config.max_vectors)
    return memo.model("static " + json.dumps(args, sort_keys=True), lambda: _informative(config, args))


def _informative(config: StaticConfig, args: dict):
    """``load_static_vectors(**args)``, refused when its rows could tell no words apart (loaded when a comparison
    plans its runs: every source is checked before the first run starts)."""
    vectors = load_static_vectors(**args)
    problem = uninformative_rows(vectors.vectors)  # (V, d)
    if problem:
        first = (f" (the first {config.max_vectors} of the file: max_vectors {config.max_vectors}; raise it)"
                 if config.max_vectors is not None else "")
        raise DataFormatError(f"{problem}{first}: the features would carry no information about the word; give "
                              "other vectors", config.path)
    return vectors


@FEATURES.register("static")
class StaticFeatures(FeatureSource):
    """One frozen vector per token (OOV policy: elmo_tasks.data.static_vectors). Output (B, T, d)."""

    Config = StaticConfig
    fingerprint_key = "vectors_fingerprint"
    storage_keys = ("format",)

    @classmethod
    def describe_frozen(cls, config: StaticConfig) -> str:
        return f"vectors {config.path}"

    @classmethod
    def frozen_fingerprints(cls, config: StaticConfig, memo: Memo) -> list[str]:
        return [load_vectors(config, memo).fingerprint]

    @classmethod
    def lookup_fingerprints(cls, config: StaticConfig, memo: Memo) -> list[str]:
        return [load_vectors(config, memo).lookup_fingerprint]

    @classmethod
    def input_paths(cls, config: StaticConfig) -> list[InputPath]:
        return [InputPath("path", config.path, "path")] + (
            [InputPath("words_path", config.words_path)] if config.words_path else [])

    def __init__(self, config: StaticConfig, context: FeatureContext):
        super().__init__(config, context)
        self.vectors = load_vectors(config, context.memo)
        self.output_dim = int(self.vectors.dim)
        self.oov: dict[str, dict[str, int]] = {}  # split -> {"oov": n, "tokens": n}

    def precompute(self, sentences: list[list[str]], split: str) -> list[np.ndarray]:
        out, n_oov, n_tok = [], 0, 0
        for s in sentences:
            vecs, k = self.vectors.lookup(s)  # (n_i, d)
            out.append(np.asarray(vecs, dtype=np.float32))
            n_oov += int(k)
            n_tok += len(s)
        self.oov[split] = {"oov": n_oov, "tokens": n_tok}
        if split == "train":
            self._check_train_oov(n_oov, n_tok)
        elif n_tok and n_oov / n_tok > OOV_WARN_RATE and first_time(("oov", self.config.path, split)):
            # dev, test, predict inputs: scored, so said (once per command and split: each seed's run embeds them
            # again, and a long set is embedded in chunks)
            zero = ("every feature is zero: its scores measure the head's bias alone" if n_oov == n_tok else
                    "their vectors are zero")
            print(f"warning: {self.config.path}: {n_oov / n_tok:.0%} of the {split} tokens ({n_oov} of {n_tok}) are "
                  f"not in the vocabulary ({zero})", file=sys.stderr)
        return out

    def _check_train_oov(self, n_oov: int, n_tok: int) -> None:
        """No training word in the vocabulary is an error (zero features); more than half of them is a warning."""
        if n_tok and n_oov == n_tok:
            raise DataFormatError(f"no word of the training data ({n_tok} tokens) is in the vocabulary (OOV rate "
                                  "100%): the features would all be zero; give vectors for this language/casing",
                                  self.config.path)
        if n_tok and n_oov / n_tok > OOV_WARN_RATE and first_time(("oov", self.config.path, "train")):
            print(f"warning: {self.config.path}: {n_oov / n_tok:.0%} of the training tokens ({n_oov} of {n_tok}) "
                  "are not in the vocabulary (zero vectors)", file=sys.stderr)

    def collate(self, items: list[np.ndarray], T: int) -> torch.Tensor:
        return pad_tokens(items, T)  # (B, T, d)

    def forward(self, batch: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return batch

    def report(self) -> dict:
        rates = {s: c["oov"] / c["tokens"] if c["tokens"] else 0.0 for s, c in self.oov.items()}
        return {self.fingerprint_key: self.vectors.fingerprint, "dim": self.output_dim, "oov_rate": rates, "oov_counts": dict(self.oov),
                # entries whose word (lower-cased when the vectors are) was listed before: the first one is used
                "duplicate_words": int(self.vectors.n_duplicates), "lowercase": bool(self.vectors.lowercase)}

"""The shared part of sources that give frozen layers (L, n, D) per sentence (``elmo``, ``transformer``).

A subclass builds its frozen model once per ``Memo`` and returns an embedder (``embedder()``: a ``LayerEmbedder``,
as ``elmo_features.Embedder`` and ``TransformerEmbedder`` are); this class caches the arrays on
disk (``elmo_features.FeatureCache``, keyed by the fingerprint + sentences + dtype) and in memory (``Memo``),
and fuses the layers with a trainable fusion (``mix``, default ELMo's scalar mix) or picks one fixed layer.
"""
from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from elmo_features import FeatureCache
from elmo_features.util.errors import ConfigError
from elmo_features.util.devices import module_device
from elmo_features.embedding.feature_cache import cache_key

from elmo_tasks.features.base import FeatureSource, pad_tokens
from elmo_tasks.features.fusion import build_fusion


@runtime_checkable
class LayerEmbedder(Protocol):
    """The frozen model behind a layered source: per-sentence arrays (L, n_i, D), in batches (what the feature cache
    consumes) or all at once, and the content fingerprint that keys the cache."""

    num_output_layers: int
    output_dim: int
    fingerprint: str

    def embed_batches(self, sentences: Sequence[Sequence[str]]) -> Iterator[tuple[list[int], list[np.ndarray]]]:
        """(sentence indices, their arrays) per batch, in any order."""

    def embed_sentences(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """One array (L, n_i, D) per sentence, in input order."""


def check_layer_or_mix(config, where: str) -> None:
    """``layer`` (one fixed layer) and ``mix`` exclude each other; neither: ELMo's scalar mix."""
    if config.layer is not None and config.mix is not None:
        raise ConfigError(f"{where}: give either layer (one fixed layer) or mix, not both")
    if config.layer is None and config.mix is None:
        config.mix = {"name": "scalar"}


class FrozenLayerFeatures(FeatureSource):
    """Frozen layers through a trainable fusion (``config.mix``), or one fixed layer (``config.layer``).
    Output (B, T, output_dim). Subclasses set ``num_layers``, ``dim`` and ``fingerprint`` and call ``_setup()``."""

    cached_on_disk = True
    offers_layers = True
    num_layers: int
    dim: int
    fingerprint: str

    @abc.abstractmethod
    def embedder(self) -> LayerEmbedder:
        """The embedder that computes this source's arrays (on ``self.context.device``)."""

    def _setup(self, what: str) -> None:
        self.output_dim = self.dim
        if self.config.layer is not None and not 0 <= self.config.layer < self.num_layers:
            raise ConfigError(f"features.layer: {self.config.layer} is out of range; this {what} has layers "
                              f"0..{self.num_layers - 1}")
        self.mix = None
        if self.config.layer is None:
            self.mix = build_fusion(self.config.mix, self.num_layers, self.dim, "features.mix")
            self.output_dim = self.mix.output_dim

    @property
    def tokenwise(self) -> bool:
        """A fixed layer, or a fusion that mixes each token's layers alone (e.g. the scalar mix without batch norm)."""
        return self.mix is None or bool(getattr(self.mix, "tokenwise", False))

    def embed(self, sentences: list[list[str]]) -> list[np.ndarray]:
        """All layers (L, n_i, D) per sentence: from memory, the disk cache, or the model."""
        key = cache_key(self.fingerprint, sentences, self.config.cache_dtype)
        model_key = f"{self.fingerprint}|{self.config.cache_dtype}"
        arrays = self.context.memo.recall(key, model_key, sentences)  # e.g. a cross-validation fold
        if arrays is not None:
            return arrays
        embedder = self.embedder()
        if not isinstance(embedder, LayerEmbedder):  # a subclass's embedder() must give the whole protocol
            missing = [m for m in ("num_output_layers", "output_dim", "fingerprint", "embed_batches", "embed_sentences")
                       if not hasattr(embedder, m)]
            raise TypeError(f"{type(self).__name__}.embedder() gives a {type(embedder).__name__} without "
                            f"{', '.join(missing)} (see LayerEmbedder in tasks/features/layered.py)")
        if self.context.cache_dir is not None:
            arrays = FeatureCache(self.context.cache_dir).embed(embedder, sentences, dtype=self.config.cache_dtype)
        else:
            arrays = embedder.embed_sentences(sentences)
        self.context.memo.remember(key, model_key, sentences, arrays)
        return arrays

    def word_layers(self, sentences: list[list[str]], split: str) -> list[np.ndarray]:
        """All layers (L, n_i, D) per sentence, whatever the mix or fixed layer (the WSD 1-NN rows per layer)."""
        return self.embed(sentences)

    def stream_layers(self, sentences: list[list[str]], split: str) -> Sequence[np.ndarray] | None:
        """The disk cache's arrays of ``sentences`` (computed first if missing), read sentence by sentence; None
        without a cache folder."""
        if self.context.cache_dir is None:
            return None
        return FeatureCache(self.context.cache_dir).embed_lazy(self.embedder(), sentences,
                                                               dtype=self.config.cache_dtype)

    def precompute(self, sentences: list[list[str]], split: str) -> list[np.ndarray]:
        return self.items_of_layers(self.embed(sentences))

    def items_of_layers(self, layers: list[np.ndarray]) -> list[np.ndarray]:
        """All layers (L, n_i, D), or views (n_i, D) of the fixed layer."""
        if self.config.layer is not None:
            return [a[self.config.layer] for a in layers]
        return list(layers)

    def collate(self, items: list[np.ndarray], T: int) -> torch.Tensor:
        return pad_tokens(items, T)  # (B, T, D) or (L, B, T, D)

    def forward(self, batch: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.mix is None:
            return batch  # (B, T, D)
        return self.mix(batch, mask)  # (L, B, T, D) -> (B, T, D)

    def fusion_layers(self) -> tuple[int, int]:
        """(L, D) of ``layers``: all layers, or the one fixed layer."""
        return (self.num_layers if self.mix is not None else 1), self.dim

    def layers(self, batch: torch.Tensor) -> torch.Tensor:
        """The unfused layers of a collated batch: (L, B, T, D) (L = 1 with a fixed layer)."""
        return batch if self.mix is not None else batch.unsqueeze(0)

    def regularization(self) -> torch.Tensor:
        return self.mix.regularization() if self.mix is not None else torch.zeros((), device=module_device(self))

    def fusion_report(self) -> dict:
        """The layer or the fusion's parameters and learned weights."""
        if self.mix is None:
            return {"layer": self.config.layer}
        return dict(mix=self.config.mix["name"], mix_parameters=sum(
            p.numel() for p in self.mix.parameters() if p.requires_grad), **self.mix.report())

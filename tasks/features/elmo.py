"""``elmo``: frozen biLM layers, fused by a mix trained with the head (default: ELMo's scalar mix), or one layer.

The biLM runs once per data set: features are cached on disk by ``elmo_features.FeatureCache`` (keyed by
model fingerprint + sentences), and in memory in the context's ``Memo``, so several heads, seeds, folds and
source variants (layer 0/1/2, mix, concat) of one comparison reuse one embedding pass.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from elmo_features import Embedder, FeatureCache, bilm_fingerprint, resolve_bilm
from elmo_features.devices import module_device
from elmo_features.feature_cache import cache_key

from ..components import ConfigError, component_config
from ..registry import FEATURES
from .base import FeatureContext, FeatureSource, Memo, pad_tokens
from .fusion import build_fusion


@dataclass
class ElmoConfig:
    bilm: str | None = None  # "default" | a preset name | a folder with options.json + weights.hdf5 (None: default)
    options_file: str | None = None  # with weights_file: a bilm-tf/AllenNLP model's files (instead of bilm)
    weights_file: str | None = None
    layer: int | None = None  # use this single layer (0 = token layer) instead of a mix
    mix: dict | None = field(default=None, metadata={"component": "mix"})  # a fusion; default {name: scalar}
    cache_dtype: Literal["float32", "float16"] = "float32"  # on-disk precision of cached features
    precision: Literal["fp32", "bf16"] = "fp32"  # the biLM's inference matmuls (docs/precision.md); bf16 needs
    # a CPU with AVX512-BF16/AMX or CUDA, else one error line (ELMO_FEATURES_BF16_EMULATE=1: emulated, for tests)

    def check(self, where: str) -> None:
        if (self.options_file is None) != (self.weights_file is None):
            raise ConfigError(f"{where}: give both options_file and weights_file, or neither")
        if self.options_file is not None and self.bilm is not None:
            raise ConfigError(f"{where}: give either bilm or options_file + weights_file, not both")
        if self.options_file is None and self.bilm is None:
            self.bilm = "default"
        if self.layer is not None and self.mix is not None:
            raise ConfigError(f"{where}: give either layer (one fixed layer) or mix, not both")
        if self.layer is None and self.mix is None:
            self.mix = {"name": "scalar"}


def load_frozen_bilm(config: ElmoConfig, memo: Memo):
    """The frozen biLM a config names (loaded once per ``memo``)."""
    spec = {"options": config.options_file, "weights": config.weights_file} if config.options_file else config.bilm

    def load():
        with torch.random.fork_rng(devices=[]):  # building the module draws random init: a run's seeded head
            bilm = resolve_bilm(spec, precision=config.precision)  # must not depend on whether this memo held it
        bilm.eval()
        for p in bilm.parameters():
            p.requires_grad_(False)
        return bilm

    key = json.dumps(spec, sort_keys=True) + ("" if config.precision == "fp32" else f" {config.precision}")
    return memo.model("elmo " + key, load)


def section_fingerprints(section: dict, memo: Memo) -> list[str]:
    """The fingerprints of the frozen biLMs a resolved features section uses, in report order (a concat's parts
    in turn): what a run's ``report()`` records, without building the sources."""
    if section.get("name") == "elmo":
        config = component_config(FEATURES, section)
        config.check("features")
        return [bilm_fingerprint(load_frozen_bilm(config, memo))]
    return [fp for sub in section.get("sources") or [] for fp in section_fingerprints(sub, memo)]


def report_fingerprints(report: dict) -> list[str]:
    """The biLM fingerprints in a (possibly nested, concat) features report, in order."""
    own = [report["bilm_fingerprint"]] if report.get("bilm_fingerprint") else []
    return own + [fp for sub in report.get("sources") or [] for fp in report_fingerprints(sub)]


@FEATURES.register("elmo")
class ElmoFeatures(FeatureSource):
    """All biLM layers through a trainable fusion (``mix``), or one fixed layer. Output (B, T, output_dim)."""

    Config = ElmoConfig
    cached_on_disk = True

    def __init__(self, config: ElmoConfig, context: FeatureContext):
        super().__init__(config, context)
        self._frozen = (load_frozen_bilm(config, context.memo),)  # in a tuple: not a submodule, never in the state_dict
        self.num_layers = self._bilm.num_output_layers
        self.output_dim = self._bilm.output_dim
        self.fingerprint = bilm_fingerprint(self._bilm)
        if config.layer is not None and not 0 <= config.layer < self.num_layers:
            raise ConfigError(f"features.layer: {config.layer} is out of range; this biLM has layers "
                              f"0..{self.num_layers - 1}")
        self.mix = None
        if config.layer is None:
            self.mix = build_fusion(config.mix, self.num_layers, self._bilm.output_dim)
            self.output_dim = self.mix.output_dim

    @property
    def _bilm(self):
        return self._frozen[0]

    def embed(self, sentences: list[list[str]]) -> list[np.ndarray]:
        """All layers (L, n_i, D) per sentence: from memory, the disk cache, or the biLM."""
        key = cache_key(self.fingerprint, sentences, self.config.cache_dtype)
        model_key = f"{self.fingerprint}|{self.config.cache_dtype}"
        arrays = self.context.memo.recall(key, model_key, sentences)  # e.g. a cross-validation fold
        if arrays is not None:
            return arrays
        embedder = Embedder(self._bilm.to(self.context.device), progress=self.context.progress)
        if self.context.cache_dir is not None:
            arrays = FeatureCache(self.context.cache_dir).embed(embedder, sentences, dtype=self.config.cache_dtype)
        else:
            arrays = embedder.embed_sentences(sentences)
        self.context.memo.remember(key, model_key, sentences, arrays)
        return arrays

    def precompute(self, sentences: list[list[str]], split: str) -> list[np.ndarray]:
        arrays = self.embed(sentences)
        if self.config.layer is not None:
            return [a[self.config.layer] for a in arrays]  # (n_i, D) views
        return arrays  # (L, n_i, D)

    def collate(self, items: list[np.ndarray], T: int) -> torch.Tensor:
        return pad_tokens(items, T)  # (B, T, D) or (L, B, T, D)

    def forward(self, batch: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.mix is None:
            return batch  # (B, T, D)
        return self.mix(batch, mask)  # (L, B, T, D) -> (B, T, D)

    def fusion_layers(self) -> tuple[int, int]:
        """(L, D) of ``layers``: all biLM layers, or the one fixed layer."""
        return (self.num_layers if self.mix is not None else 1), self._bilm.output_dim

    def layers(self, batch: torch.Tensor) -> torch.Tensor:
        """The unfused layers of a collated batch: (L, B, T, D) (L = 1 with a fixed layer)."""
        return batch if self.mix is not None else batch.unsqueeze(0)

    def regularization(self) -> torch.Tensor:
        return self.mix.regularization() if self.mix is not None else torch.zeros((), device=module_device(self))

    def report(self) -> dict:
        out = {"bilm_fingerprint": self.fingerprint, "num_layers": self.num_layers, "dim": self._bilm.output_dim}
        if self.mix is None:
            out["layer"] = self.config.layer
        else:
            out.update(mix=self.config.mix["name"], mix_parameters=sum(
                p.numel() for p in self.mix.parameters() if p.requires_grad), **self.mix.report())
        return out

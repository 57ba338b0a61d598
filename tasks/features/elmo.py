"""``elmo``: frozen biLM layers, fused by a mix trained with the head (default: ELMo's scalar mix), or one layer.

The biLM runs once per data set: features are cached on disk by ``elmo_features.FeatureCache`` (keyed by
model fingerprint + sentences), and in memory in the context's ``Memo``, so several heads, seeds, folds and
source variants (layer 0/1/2, mix, concat) of one comparison reuse one embedding pass.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

import torch

from elmo_features import Embedder, bilm_fingerprint, resolve_bilm
from elmo_features.util.schema import key

from ..components import ConfigError
from ..registry import FEATURES
from .base import FeatureContext, Memo
from .layered import FrozenLayerFeatures, check_layer_or_mix


@dataclass
class ElmoConfig:
    bilm: str | None = key(default=None,
                           doc='"default" | a preset name | a folder with options.json + weights.hdf5 (None: default)')
    options_file: str | None = key(default=None,
                                   doc="with weights_file: a bilm-tf/AllenNLP model's files (instead of bilm)")
    weights_file: str | None = None
    layer: int | None = key(default=None, doc="use this single layer (0 = token layer) instead of a mix")
    mix: dict | None = key(default=None, doc="a fusion; default {name: scalar}", meta={"component": "mix"})
    cache_dtype: Literal["float32", "float16"] = key(default="float32", doc="on-disk precision of cached features")
    precision: Literal["fp32", "bf16"] = key(default="fp32",
                                             doc="the biLM's inference matmuls (docs/precision.md); bf16 needs a CPU "
                                                 "with AVX512-BF16/AMX or CUDA, else one error line "
                                                 "(ELMO_FEATURES_BF16_EMULATE=1: emulated, for tests)")

    def check(self, where: str) -> None:
        if (self.options_file is None) != (self.weights_file is None):
            raise ConfigError(f"{where}: give both options_file and weights_file, or neither")
        if self.options_file is not None and self.bilm is not None:
            raise ConfigError(f"{where}: give either bilm or options_file + weights_file, not both")
        if self.options_file is None and self.bilm is None:
            self.bilm = "default"
        check_layer_or_mix(self, where)


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


@FEATURES.register("elmo")
class ElmoFeatures(FrozenLayerFeatures):
    """All biLM layers through a trainable fusion (``mix``), or one fixed layer. Output (B, T, output_dim)."""

    Config = ElmoConfig

    def __init__(self, config: ElmoConfig, context: FeatureContext):
        super().__init__(config, context)
        self._frozen = (load_frozen_bilm(config, context.memo),)  # in a tuple: not a submodule, never in the state_dict
        self.num_layers = self._bilm.num_output_layers
        self.dim = self._bilm.output_dim
        self.fingerprint = bilm_fingerprint(self._bilm)
        self._setup("biLM")

    @property
    def _bilm(self):
        return self._frozen[0]

    def embedder(self) -> Embedder:
        return Embedder(self._bilm.to(self.context.device), progress=self.context.progress)

    def report(self) -> dict:
        return {"bilm_fingerprint": self.fingerprint, "num_layers": self.num_layers, "dim": self.dim,
                **self.fusion_report()}

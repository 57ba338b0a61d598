"""``elmo``: frozen biLM layers, fused by a mix trained with the head (default: ELMo's scalar mix), or one layer.

The biLM runs once per data set: features are cached on disk by ``elmo_features.FeatureCache`` (keyed by
model fingerprint + sentences), and in memory in the context's ``Memo``, so several heads, seeds, folds and
source variants (layer 0/1/2, mix, concat) of one comparison reuse one embedding pass.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from elmo_features import Embedder, bilm_fingerprint, resolve_bilm
from elmo_features.util.errors import ConfigError
from elmo_features.formats.default_model import (BILM_SPEC_FORMS, OPTIONS_NAME, WEIGHTS_NAME, empty_spec_problem,
                                                 default_model_paths, embedded_models)
from elmo_features.formats.presets import PRESETS
from elmo_features.util.paths import check_input_dir, check_input_file
from elmo_features.util.schema import key

from elmo_tasks.registry import FEATURES
from elmo_tasks.features.base import FeatureContext, InputPath, Memo
from elmo_tasks.features.layered import FrozenLayerFeatures, check_layer_or_mix


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
    precision: Literal["fp32", "bf16", "reference"] = key(
        default="fp32", doc="the biLM's inference arithmetic (docs/precision.md): fp32; bf16 matmuls (a CPU with "
                            "AVX512-BF16/AMX or CUDA, else one error line; ELMO_TASKS_BF16_EMULATE=1: emulated, for "
                            "tests); reference: AllenNLP's order of operations, slower")

    def check(self, where: str) -> None:
        if (self.options_file is None) != (self.weights_file is None):
            raise ConfigError(f"{where}: give both options_file and weights_file, or neither")
        if self.options_file is not None and self.bilm is not None:
            raise ConfigError(f"{where}: give either bilm or options_file + weights_file, not both")
        if self.options_file is None and self.bilm is None:
            self.bilm = "default"
        if problem := empty_spec_problem(self.bilm, f"{where}.bilm: biLM", BILM_SPEC_FORMS):
            raise ConfigError(problem)
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


def check_bilm_spec(spec: str, where: str) -> None:
    """A biLM named as "default", a preset or a folder with options.json + weights.hdf5 is there."""
    if spec in PRESETS:
        return  # downloaded on first use
    if spec == "default":
        for p in default_model_paths():
            check_input_file(p, f"{where} (the default biLM)", "name another biLM (a preset such as small, or a "
                                                               "folder with options.json + weights.hdf5)")
        return
    if spec in embedded_models():
        return  # shipped inside the package
    check_input_dir(spec, where, needs=(OPTIONS_NAME, WEIGHTS_NAME),
                    hint=f"valid: an embedded model ({', '.join(embedded_models())}), a preset ({', '.join(PRESETS)}) "
                         f"or a folder with {OPTIONS_NAME} + {WEIGHTS_NAME}")


def _is_bilm_folder(spec: str | None) -> bool:
    """Whether a ``bilm`` value names a folder (not "default", a preset or an embedded model)."""
    return isinstance(spec, str) and spec != "default" and spec not in PRESETS and spec not in embedded_models() and (
        "/" in spec or Path(spec).expanduser().is_dir())


@FEATURES.register("elmo")
class ElmoFeatures(FrozenLayerFeatures):
    """All biLM layers through a trainable fusion (``mix``), or one fixed layer. Output (B, T, output_dim)."""

    Config = ElmoConfig
    fingerprint_key = "bilm_fingerprint"
    storage_keys = ("bilm", "options_file", "weights_file")

    @classmethod
    def input_paths(cls, config: ElmoConfig) -> list[InputPath]:
        paths = [InputPath(k, getattr(config, k)) for k in ("options_file", "weights_file") if getattr(config, k)]
        if _is_bilm_folder(config.bilm):
            paths.append(InputPath("bilm", config.bilm, "folder"))
        return paths

    @classmethod
    def check_inputs(cls, config: ElmoConfig, where: str) -> None:
        super().check_inputs(config, where)
        if isinstance(config.bilm, str):
            check_bilm_spec(config.bilm, f"{where}.bilm")

    @classmethod
    def describe_frozen(cls, config: ElmoConfig) -> str:
        return f"biLM {config.bilm}" if config.bilm else f"biLM {config.options_file} + {config.weights_file}"

    @classmethod
    def frozen_fingerprints(cls, config: ElmoConfig, memo: Memo) -> list[str]:
        return [bilm_fingerprint(load_frozen_bilm(config, memo))]

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
        return {self.fingerprint_key: self.fingerprint, "num_layers": self.num_layers, "dim": self.dim,
                **self.fusion_report()}

"""The ELMo scalar mix and the fixed average as fusions (see elmo_tasks.features.fusion for the others).

Both are ``elmo_features.ScalarMix`` (gamma * sum_k softmax(w)_k * h_k) built from a config dataclass; their
parameters keep ScalarMix's names (``weights``, ``gamma``), so checkpoints saved before fusions existed load.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from elmo_features import ScalarMix
from elmo_features.util.errors import ConfigError
from elmo_features.util.schema import List, Num, key, settings_rule

from elmo_tasks.registry import FUSIONS


INITIAL_MAX = 100.0  # |raw weight|: a gap of 200 already puts all weight on one layer; huge ones overflow (NaN mix)


@dataclass
class ScalarMixConfig:
    layer_norm: Literal["batch", "token"] | None = key(default=None, doc="normalise each layer first (see ScalarMix)")
    l2_coef: float = key(Num(min=0), 0.0,
                         doc="L2 penalty on the raw mix weights (ELMo paper: 0.001 regularises toward an average)")
    initial: list[float] | None = key(List(Num(min=-INITIAL_MAX, max=INITIAL_MAX, as_float=True, from_str=True),
                                           nullable=True), None,
                                      doc="raw pre-softmax weights, one per layer; default zeros (equal weights)")
    trainable: bool = True

    def check(self, where: str) -> None:
        if not self.trainable and self.l2_coef:  # as momentum with adam: a setting that would act on nothing
            settings_rule(f"{where}.l2_coef: {self.l2_coef} penalises the mix weights, but trainable is false (they "
                              "stay fixed); drop l2_coef, or set trainable: true")


@FUSIONS.register("scalar")
class ScalarMixer(ScalarMix):
    """ELMo's scalar mix, trained with the head (weights and gamma): L + 1 parameters. Output (B, T, D)."""

    Config = ScalarMixConfig

    def __init__(self, config: ScalarMixConfig, num_layers: int, dim: int | None = None):
        super().__init__(num_layers, initial=config.initial, trainable=config.trainable,
                         layer_norm=config.layer_norm, l2_coef=config.l2_coef)
        self.output_dim = dim  # the layer size D (None when built without it)
        self.tokenwise = config.layer_norm != "batch"  # batch norm: statistics over every token of the batch

    @classmethod
    def parameter_count(cls, config: ScalarMixConfig, num_layers: int, dim: int) -> int:
        return num_layers + 1 if config.trainable else 0

    @classmethod
    def check_layers(cls, config: ScalarMixConfig, num_layers: int, where: str) -> None:
        """``initial`` gives one raw weight per layer of the source (ConfigError naming ``where`` before any work)."""
        initial = getattr(config, "initial", None)
        if initial is not None and len(initial) != num_layers:
            raise ConfigError(f"{where}.initial: {len(initial)} values, but this source has {num_layers} layers; give "
                              f"{num_layers} raw weights (one per layer), or remove initial")

    def report(self) -> dict:
        w = [round(float(x), 6) for x in self.normalized_weights().detach()]
        return {"mix_weights": w, "gamma": round(float(self.gamma.detach()), 6), "layer_weights": w}


@dataclass
class AverageMixConfig:
    layer_norm: Literal["batch", "token"] | None = None


@FUSIONS.register("average")
class AverageMixer(ScalarMixer):
    """The plain average of all layers (fixed equal weights, gamma 1): 0 parameters."""

    Config = AverageMixConfig

    def __init__(self, config: AverageMixConfig, num_layers: int, dim: int | None = None):
        super().__init__(ScalarMixConfig(layer_norm=config.layer_norm, trainable=False), num_layers, dim)

    @classmethod
    def parameter_count(cls, config: AverageMixConfig, num_layers: int, dim: int) -> int:
        return 0

"""Mixes of biLM layers for the "elmo" feature source: a trained scalar mix or a fixed average.

Both are ``elmo_features.ScalarMix`` (gamma * sum_k softmax(w)_k * h_k) built from a config dataclass.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from elmo_features import ScalarMix


@dataclass
class ScalarMixConfig:
    layer_norm: Literal["batch", "token"] | None = None  # normalise each layer first (see ScalarMix)
    l2_coef: float = 0.0  # L2 penalty on the raw mix weights (ELMo paper: 0.001 regularises toward an average)
    initial: list[float] | None = None  # raw pre-softmax weights; default zeros (equal weights)
    trainable: bool = True


class ScalarMixer(ScalarMix):
    """ELMo's scalar mix, trained with the head (weights and gamma)."""

    Config = ScalarMixConfig

    def __init__(self, config: ScalarMixConfig, num_layers: int):
        super().__init__(num_layers, initial=config.initial, trainable=config.trainable,
                         layer_norm=config.layer_norm, l2_coef=config.l2_coef)


@dataclass
class AverageMixConfig:
    layer_norm: Literal["batch", "token"] | None = None


class AverageMixer(ScalarMix):
    """The plain average of all layers (fixed equal weights, gamma 1)."""

    Config = AverageMixConfig

    def __init__(self, config: AverageMixConfig, num_layers: int):
        super().__init__(num_layers, trainable=False, layer_norm=config.layer_norm)

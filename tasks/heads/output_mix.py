"""ELMo's second placement (Peters et al. 2018, sec. 3.3): fused biLM layers also at the output of the task RNN.

A head with ``output_mix: {name: FUSION, ...}`` (crf_tagger, sentence_classifier) gets a second fusion of
the feature source's layers with its own weights (any registered fusion; the input keeps the source's
``mix``). The fused vectors m (after the head's dropout) are concatenated to the RNN states h, and the
output layer sees [h; m]. A linear map of a concatenation is the sum of linear maps of the parts, so the
heads add ``out(m)`` (no bias) to the scores of their existing output layer, which keeps its shape.
Parameters added: the fusion's + D' * K (D' the fusion's output size, K the number of labels).
"""
from __future__ import annotations

import torch
from torch import nn

from elmo_features.util.errors import ConfigError
from elmo_features.util.devices import module_device

from elmo_tasks.features.base import FeatureSource
from elmo_tasks.features.fusion import build_fusion


class OutputMix(nn.Module):
    """A separate fusion of the source's layers + dropout, and its output weights (D' -> K, no bias)."""

    def __init__(self, section: dict, features: FeatureSource, dropout: float, num_outputs: int):
        super().__init__()
        shape = features.fusion_layers()
        if shape is None:
            raise ConfigError(f"head.output_mix: feature source {type(features).__name__} has no layers to fuse; "
                              "use an elmo source (or a concat with one elmo member), or drop output_mix")
        num_layers, dim = shape
        self.fusion = build_fusion(section, num_layers, dim, "head.output_mix")
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(self.fusion.output_dim, num_outputs, bias=False)

    def mixed(self, layers: torch.Tensor | None, mask: torch.Tensor) -> torch.Tensor:
        """(L, B, T, D), (B, T) -> fused vectors m (B, T, D') after dropout."""
        if layers is None:
            raise ValueError("this head has an output_mix: call it with layers= (the source's unfused layers)")
        return self.drop(self.fusion(layers, mask))

    def regularization(self) -> torch.Tensor:
        return self.fusion.regularization()

    def report(self) -> dict:
        return {"parameters": sum(p.numel() for p in self.parameters() if p.requires_grad), **self.fusion.report()}


class OutputMixOption:
    """Head mixin for the ``output_mix`` option: needs ``config.output_mix``, ``config.dropout``, ``labels``, and
    ``self.output_mix = None`` set in the head's ``__init__``; ``bind_features`` builds the OutputMix."""

    def bind_features(self, features: FeatureSource) -> None:
        if self.config.output_mix is not None:
            self.output_mix = OutputMix(self.config.output_mix, features, self.config.dropout, len(self.labels))

    @property
    def uses_layers(self) -> bool:
        return self.output_mix is not None

    def regularization(self) -> torch.Tensor:
        return self.output_mix.regularization() if self.output_mix is not None else torch.zeros((), device=module_device(self))

    def report(self) -> dict:
        if self.output_mix is None:
            return {}
        return {"output_mix": {"name": self.config.output_mix["name"], **self.output_mix.report()}}

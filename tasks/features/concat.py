"""``concat``: several feature sources side by side (the ELMo paper's NER input: GloVe + ELMo mix)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from elmo_features.util.errors import ConfigError
from elmo_features.util.devices import module_device
from elmo_features.util.schema import key

from elmo_tasks.registry import FEATURES
from elmo_tasks.features.base import (FeatureContext, FeatureSource, InputPath, Memo, build_features, check_section_inputs,
                   section_fingerprints, section_frozen_description, section_input_paths)


@dataclass
class ConcatConfig:
    sources: list[dict] = key(factory=list, meta={"component": "features"},
                              doc="the feature sources whose vectors are concatenated, in order")

    def check(self, where: str) -> None:
        if len(self.sources) < 2:
            raise ConfigError(f"{where}.sources: list at least two feature sources to concatenate")


@FEATURES.register("concat")
class ConcatFeatures(FeatureSource):
    """Concatenates its sources' features along D. Output (B, T, sum of D)."""

    Config = ConcatConfig

    @classmethod
    def input_paths(cls, config: ConcatConfig) -> list[InputPath]:
        return [InputPath(f"sources[{i}].{p.key}", p.path, p.kind, p.hint)
                for i, s in enumerate(config.sources) for p in section_input_paths(s)]

    @classmethod
    def check_inputs(cls, config: ConcatConfig, where: str) -> None:
        for i, s in enumerate(config.sources):
            check_section_inputs(s, f"{where}.sources[{i}]")

    @classmethod
    def describe_frozen(cls, config: ConcatConfig) -> str:
        return "; ".join(section_frozen_description(s) for s in config.sources)

    @classmethod
    def frozen_fingerprints(cls, config: ConcatConfig, memo: Memo) -> list[str]:
        return [fp for s in config.sources for fp in section_fingerprints(s, memo)]

    def __init__(self, config: ConcatConfig, context: FeatureContext):
        super().__init__(config, context)
        self.sources = nn.ModuleList([build_features(s, context) for s in config.sources])
        self.output_dim = sum(s.output_dim for s in self.sources)

    def precompute(self, sentences: list[list[str]], split: str) -> list[tuple]:
        per_source = [s.precompute(sentences, split) for s in self.sources]
        return list(zip(*per_source))

    def collate(self, items: list[tuple], T: int) -> tuple:
        return tuple(s.collate([it[k] for it in items], T) for k, s in enumerate(self.sources))

    def forward(self, batch: tuple, mask: torch.Tensor) -> torch.Tensor:
        return torch.cat([s(b, mask) for s, b in zip(self.sources, batch)], dim=-1)  # (B, T, sum D)

    def _layered(self) -> list[int]:
        return [k for k, s in enumerate(self.sources) if s.fusion_layers() is not None]

    def fusion_layers(self) -> tuple[int, int] | None:
        """The layers of the one member that has them (e.g. the elmo member of GloVe + ELMo)."""
        found = self._layered()
        if len(found) > 1:
            names = [self.config.sources[k]["name"] for k in found]
            raise ConfigError(f"features (concat): members {found} ({', '.join(names)}) all have layers; a head's "
                              "output_mix needs exactly one")
        return self.sources[found[0]].fusion_layers() if found else None

    def layers(self, batch: tuple) -> torch.Tensor:
        (k,) = self._layered()
        return self.sources[k].layers(batch[k])  # (L, B, T, D)

    def regularization(self) -> torch.Tensor:
        return sum((s.regularization() for s in self.sources), torch.zeros((), device=module_device(self)))

    def report(self) -> dict:
        return {"sources": [{"name": c["name"], **s.report()} for c, s in zip(self.config.sources, self.sources)]}

"""Registries of named components (Thinc-like): heads, feature sources, layer fusions; readers live in tasks.data.

Configs name components by these names. An entry is registered with one line, either as an object or
lazily as "module:attribute" (imported on first use), so a new head is one file in tasks/heads/ plus one
line below. A failed lookup is an error listing the valid names.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable, Iterator


class RegistryError(KeyError):
    """An unknown name was looked up in a registry."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class Registry:
    """A name -> component map; values may be lazy "module:attribute" strings."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Any] = {}

    def add(self, name: str, obj: Any) -> None:
        """Register ``obj`` (or a "module:attribute" string) under ``name``; names must be unique."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = obj

    def register(self, name: str) -> Callable[[Any], Any]:
        """Decorator form of ``add``."""

        def deco(obj: Any) -> Any:
            self.add(name, obj)
            return obj

        return deco

    def get(self, name: str) -> Any:
        """The component called ``name``; an unknown name raises RegistryError listing the valid ones."""
        if not isinstance(name, str) or name not in self._entries:
            raise RegistryError(
                f"unknown {self.kind} {name!r}; valid {self.kind} names: {', '.join(self.names()) or '(none)'}"
            )
        obj = self._entries[name]
        if isinstance(obj, str):
            module, _, attr = obj.partition(":")
            obj = getattr(importlib.import_module(module), attr)
            self._entries[name] = obj
        return obj

    def names(self) -> list[str]:
        return sorted(self._entries)

    def copy(self) -> "Registry":
        """A shallow copy (tests register extra components without touching the global registry)."""
        new = Registry(self.kind)
        new._entries = dict(self._entries)
        return new

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


# Task heads (tasks.heads.base.Head subclasses): one line per head.
HEADS = Registry("head")
HEADS.add("crf_tagger", "tasks.heads.crf_tagger:CrfTagger")
HEADS.add("sentence_classifier", "tasks.heads.sentence_classifier:SentenceClassifier")
HEADS.add("token_tagger", "tasks.heads.token_tagger:TokenTagger")
HEADS.add("wsd_linear", "tasks.heads.wsd_linear:WsdLinear")

# Feature sources (tasks.features.base.FeatureSource subclasses).
FEATURES = Registry("feature source")
FEATURES.add("elmo", "tasks.features.elmo:ElmoFeatures")
FEATURES.add("static", "tasks.features.static:StaticFeatures")
FEATURES.add("concat", "tasks.features.concat:ConcatFeatures")

# Fusions of stacked layers (L, B, T, D) -> (B, T, D'), named under ``mix:`` by the "elmo" source and by the
# heads' ``output_mix`` (tasks.features.fusion, docs/fusion.md). MIXES is the older name of the same registry.
FUSIONS = Registry("mix")
FUSIONS.add("scalar", "tasks.features.mix:ScalarMixer")
FUSIONS.add("average", "tasks.features.mix:AverageMixer")
FUSIONS.add("layer_attention", "tasks.features.fusion:LayerAttention")
FUSIONS.add("gated", "tasks.features.fusion:GatedFusion")
FUSIONS.add("concat_project", "tasks.features.fusion:ConcatProject")
MIXES = FUSIONS

# Character-level token encoders inside a head, named under ``chars:`` of crf_tagger / sentence_classifier
# (tasks/heads/chars.py, docs/strong_baselines.md).
CHAR_ENCODERS = Registry("char encoder")
CHAR_ENCODERS.add("cnn", "tasks.heads.chars:CharCNN")
CHAR_ENCODERS.add("lstm", "tasks.heads.chars:CharLSTM")


def get_reader(name: str) -> Callable[..., list]:
    """A data reader from tasks.data by name (its error lists the valid names)."""
    from tasks.data import get_reader as _get

    return _get(name)


def reader_names() -> list[str]:
    from tasks.data import READERS

    return sorted(READERS)

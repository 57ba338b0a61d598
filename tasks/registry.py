"""Registries of named components: heads, feature sources, layer fusions, char encoders, data readers.

A component registers itself where it is defined, with a decorator::

    @HEADS.register("token_tagger")
    class TokenTagger(Head): ...

and its package's ``__init__`` imports the module, so importing ``tasks.heads`` (``tasks.features``,
``tasks.data``) fills the registry before any lookup. This module imports nothing from ``tasks``: it is the
bottom layer, so every layer can register into it (docs/layers.md). Configs name components by these names;
a failed lookup is an error listing the valid names.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator


class RegistryError(KeyError):
    """An unknown name was looked up in a registry."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class Registry:
    """A name -> component map, filled by ``@registry.register(name)`` where each component is defined."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Any] = {}

    def add(self, name: str, obj: Any) -> None:
        """Register ``obj`` under ``name``; names must be unique."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = obj

    def register(self, name: str) -> Callable[[Any], Any]:
        """Decorator form of ``add``: ``@HEADS.register("crf_tagger")`` above the class."""

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
        return self._entries[name]

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

    def __len__(self) -> int:
        return len(self._entries)


# Task heads (tasks.heads.base.Head subclasses), filled by the modules of tasks/heads/.
HEADS = Registry("head")

# Feature sources (tasks.features.base.FeatureSource subclasses), filled by tasks/features/.
FEATURES = Registry("feature source")

# Fusions of stacked layers (L, B, T, D) -> (B, T, D'), named under ``mix:`` by the "elmo" source and by the
# heads' ``output_mix`` (tasks/features/mix.py and fusion.py, docs/fusion.md). MIXES is the older name.
FUSIONS = Registry("mix")
MIXES = FUSIONS

# Character-level token encoders inside a head, named under ``chars:`` of crf_tagger / sentence_classifier
# (tasks/heads/chars.py, docs/strong_baselines.md).
CHAR_ENCODERS = Registry("char encoder")

# Data readers (path, **options) -> examples, named by ``data.reader`` (tasks/data/, docs/data.md).
READERS = Registry("data reader")

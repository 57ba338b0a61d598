"""Reader lookup: configs name a reader ("conll2003", "tsv", "csv", "sst", "hf", "raganato") plus its options.

Each reader registers itself in ``tasks.registry.READERS`` where it is defined (``@READERS.register(name)``);
``tasks/data/__init__.py`` imports every reader module, so the registry is full once ``tasks.data`` is
imported.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

from elmo_features.util.schema import check_options

from ..registry import READERS, RegistryError
from .types import LabeledSentence, TaggedSentence

Reader = Callable[..., "list[TaggedSentence] | list[LabeledSentence]"]


def get_reader(name: str) -> Reader:
    """The reader registered as ``name``; unknown names raise KeyError listing the valid ones."""
    try:
        return READERS.get(name)
    except RegistryError:
        raise KeyError(f"unknown data reader {name!r}; valid: {', '.join(READERS.names())}") from None


def reader_options(name: str) -> dict[str, object]:
    """The options a reader accepts with their defaults (everything after ``path``)."""
    params = list(inspect.signature(get_reader(name)).parameters.values())[1:]
    return {p.name: p.default for p in params}


def read_data(name: str, path: str | Path, **options) -> list[TaggedSentence] | list[LabeledSentence]:
    """Read ``path`` with reader ``name``; unknown options raise an error listing the valid ones."""
    reader = get_reader(name)
    return reader(path, **check_options(reader, options, f"data reader {name}", ValueError))

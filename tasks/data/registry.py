"""The reader registry: configs name a reader ("conll2003", "tsv", "csv", "sst", "hf") plus its options."""
from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

from .classification import read_csv, read_tsv
from .conll import read_conll2003
from .hf import read_hf
from .sst import read_sst
from .types import LabeledSentence, TaggedSentence

Reader = Callable[..., "list[TaggedSentence] | list[LabeledSentence]"]


def read_raganato(path: str | Path, wordnet: str = "data/wordnet-3.0"):
    """WSD examples from a Raganato-framework folder (imported lazily: tasks.wsd builds on tasks.data)."""
    from tasks.wsd.examples import read_wsd

    return read_wsd(path, wordnet=wordnet)

READERS: dict[str, Reader] = {
    "conll2003": read_conll2003,
    "tsv": read_tsv,
    "csv": read_csv,
    "sst": read_sst,
    "hf": read_hf,
    "raganato": read_raganato,
}


def get_reader(name: str) -> Reader:
    """The reader registered as ``name``; unknown names raise KeyError listing the valid ones."""
    try:
        return READERS[name]
    except KeyError:
        raise KeyError(f"unknown data reader {name!r}; valid: {', '.join(sorted(READERS))}") from None


def reader_options(name: str) -> dict[str, object]:
    """The options a reader accepts with their defaults (everything after ``path``)."""
    params = list(inspect.signature(get_reader(name)).parameters.values())[1:]
    return {p.name: p.default for p in params}


def read_data(name: str, path: str | Path, **options) -> list[TaggedSentence] | list[LabeledSentence]:
    """Read ``path`` with reader ``name``; unknown options raise an error listing the valid ones."""
    valid = reader_options(name)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(unknown)} for data reader {name!r}; valid: "
                         f"{', '.join(valid) or '(none)'}")
    return get_reader(name)(path, **options)

"""Reader lookup: configs name a reader ("conll2003", "tsv", "csv", "sst", "hf", "raganato") plus its options.

Each reader registers itself in ``elmo_tasks.registry.READERS`` where it is defined (``@READERS.register(name)``);
``tasks/data/__init__.py`` imports every reader module, so the registry is full once ``elmo_tasks.data`` is
imported.
"""
from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable
from pathlib import Path

from elmo_features.util.schema import check_options
from elmo_features.util.wording import did_you_mean

from elmo_tasks.registry import PLUGIN_HINT, READERS, RegistryError
from elmo_tasks.data.types import LabeledSentence, TaggedSentence

Reader = Callable[..., "list[TaggedSentence] | list[LabeledSentence]"]


def get_reader(name: str) -> Reader:
    """The reader registered as ``name``; unknown names raise KeyError listing the valid ones."""
    try:
        return READERS.get(name)
    except RegistryError:
        raise KeyError(f"unknown data reader {name!r}{did_you_mean(name, READERS.names())}; valid: "
                       f"{', '.join(READERS.names())}; {PLUGIN_HINT}") from None


PATH_KINDS = ("file", "folder", "name")  # a reader's path: a file, a folder, or a name it resolves itself (a hub id)


def reader_path_kind(name: str) -> str:
    """What the path of reader ``name`` is (``@READERS.register(name, path_kind=...)``; default "file")."""
    return getattr(get_reader(name), "path_kind", "file")


def _reader_contract(name: str, reader) -> list[str]:
    """A reader is a callable ``reader(path, **options)`` that declares what its path is."""
    if not callable(reader):
        return ["a reader must be a function reader(path, **options) -> examples"]
    try:
        params = list(inspect.signature(reader).parameters.values())
    except (TypeError, ValueError):
        return ["its signature cannot be read; a reader is a function reader(path, **options)"]
    problems = []
    if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        problems.append("its first parameter must be the path")
    if getattr(reader, "path_kind", "file") not in PATH_KINDS:
        problems.append(f"path_kind must be one of {', '.join(PATH_KINDS)}, got {reader.path_kind!r}")
    return problems


READERS.set_contract(_reader_contract)


def reader_example_types(name: str) -> set[str]:
    """The example classes reader ``name`` returns, read from its return annotation (e.g. ``list[TaggedSentence]``
    -> {"TaggedSentence"}); empty when it declares none (not checked)."""
    try:
        ann = inspect.signature(get_reader(name)).return_annotation
    except (TypeError, ValueError):
        return set()
    if ann is inspect.Signature.empty:
        return set()
    text = ann if isinstance(ann, str) else getattr(ann, "__name__", "") + " " + str(ann)
    return {w.rsplit(".", 1)[-1] for w in re.findall(r"[A-Za-z_][\w.]*", text)} - ANNOTATION_WORDS


ANNOTATION_WORDS = {"list", "List", "Sequence", "Iterable", "Iterator", "tuple", "None", "Optional", "Union", "Any",
                    "typing", "collections", "abc", "class"}


def reader_options(name: str) -> dict[str, object]:
    """The options a reader accepts with their defaults (everything after ``path``)."""
    params = list(inspect.signature(get_reader(name)).parameters.values())[1:]
    return {p.name: p.default for p in params}


def check_reader_values(name: str, options: dict, where: str) -> None:
    """A reader's own check of its option values together (its ``check_values``, e.g. tsv/csv: two different
    columns), given the options over the reader's defaults; a ConfigError names ``where``."""
    hook = getattr(get_reader(name), "check_values", None)
    if hook is not None:
        defaults = {k: v for k, v in reader_options(name).items() if v is not inspect.Parameter.empty}
        hook({**defaults, **options}, where)


def read_data(name: str, path: str | Path, **options) -> list[TaggedSentence] | list[LabeledSentence]:
    """Read ``path`` with reader ``name``; unknown options raise an error listing the valid ones."""
    reader = get_reader(name)
    if not isinstance(path, (str, os.PathLike)) or str(path) == "":
        raise TypeError(f"read_data: path must be a data file's path (a str or Path), got {type(path).__name__} "
                        f"{path!r:.40}")
    return reader(path, **check_options(reader, options, f"data reader {name}"))

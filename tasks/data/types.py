"""Example types shared by all readers, and the error raised for malformed input files."""
from __future__ import annotations

from dataclasses import dataclass, field

from pathlib import Path

from elmo_features.util.errors import ElmoTasksError, MissingPathError, PathError
from elmo_features.util.paths import REREAD_NOTE, special_kind


@dataclass
class TaggedSentence:
    """One sentence for sequence labelling: ``tags[i]`` labels ``tokens[i]``.

    ``columns`` holds the file's other per-token columns by name (CoNLL-2003: "pos", "chunk",
    "ner"), exactly as read from the file.
    """

    tokens: list[str]
    tags: list[str]
    columns: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.tags):
            raise ValueError(f"TaggedSentence: {len(self.tokens)} tokens but {len(self.tags)} tags")
        for name, values in self.columns.items():
            if len(values) != len(self.tokens):
                raise ValueError(f"TaggedSentence: column {name!r} has {len(values)} values for "
                                 f"{len(self.tokens)} tokens")


@dataclass
class LabeledSentence:
    """One sentence (or phrase) with a single class label."""

    tokens: list[str]
    label: str


class DataFormatError(ElmoTasksError, ValueError):
    """Malformed input data; the message starts with ``file:line:`` when the position is known."""

    def __init__(self, message: str, path: object = None, line: int | None = None):
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message)
        self.path = path
        self.line = line


def check_reader_file(path: Path, what: str) -> None:
    """The file a reader reads exists and is a regular file: a MissingPathError (a FileNotFoundError) when it is
    missing, a PathError naming a folder or a named pipe, socket or device (a reader reads its file more than once)."""
    if path.is_dir():
        raise PathError(f"{path} is a folder; give the {what} itself")
    kind = special_kind(path)
    if kind:
        raise PathError(f"{path} is {kind}, not a regular file; {REREAD_NOTE}")
    if not path.is_file():
        raise MissingPathError(f"{what} not found: {path}")

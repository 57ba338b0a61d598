"""Example types shared by all readers, and the error raised for malformed input files."""
from __future__ import annotations

from dataclasses import dataclass, field

from elmo_features.util.errors import ElmoTasksError


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

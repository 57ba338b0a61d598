"""Span tag schemes (IOB1, BIO, BIOES): validity checks, detection, and conversion via spans.

* BIO (IOB2): every chunk starts with ``B-X``; ``I-X`` continues a chunk of type X.
* IOB1 (original CoNLL-2003): chunks start with ``I-X``; ``B-X`` is used only for a chunk that
  directly follows another chunk of the same type X.
* BIOES: ``S-X`` single-token chunk; otherwise ``B-X I-X* E-X``.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from elmo_features.errors import ElmoTasksError

from .types import ReaderOptionError

SCHEMES = ("IOB1", "BIO", "BIOES")
Span = tuple[str, int, int]  # (type, start, end) with end exclusive


class TagSchemeError(ElmoTasksError, ValueError):
    """An invalid tag sequence; ``index`` is the 0-based position of the offending tag."""

    def __init__(self, message: str, index: int):
        super().__init__(message)
        self.index = index


def check_scheme_name(scheme: str) -> str:
    """Return the canonical scheme name ("IOB2" is accepted for BIO) or raise listing valid ones."""
    name = scheme.upper()
    if name == "IOB2":
        name = "BIO"
    if name not in SCHEMES:
        raise ReaderOptionError(f"unknown tag scheme {scheme!r}; valid: {', '.join(SCHEMES)} (IOB2 = BIO)")
    return name


def split_tag(tag: str, index: int = 0) -> tuple[str, str | None]:
    """``"B-PER" -> ("B", "PER")``, ``"O" -> ("O", None)``; anything else raises TagSchemeError."""
    if tag == "O":
        return "O", None
    if len(tag) < 3 or tag[1] != "-" or tag[0] not in "BIES":
        raise TagSchemeError(f"malformed tag {tag!r} (expected 'O' or a B-/I-/E-/S- prefix and a type)",
                             index)
    return tag[0], tag[2:]


def tags_to_spans(tags: Sequence[str], scheme: str) -> list[Span]:
    """Decode one sentence's tags into spans, raising TagSchemeError at the first invalid tag."""
    scheme = check_scheme_name(scheme)
    allowed = {"IOB1": "BI", "BIO": "BI", "BIOES": "BIES"}[scheme]
    spans: list[Span] = []
    start, typ = -1, None  # open chunk
    for i, tag in enumerate(tags):
        prefix, t = split_tag(tag, i)
        if prefix != "O" and prefix not in allowed:
            raise TagSchemeError(f"tag {tag!r} is not valid in the {scheme} scheme", i)
        continues = typ is not None and t == typ
        if scheme == "BIOES" and typ is not None and prefix not in "IE":
            raise TagSchemeError(f"{tag!r} follows an unfinished {typ} chunk (BIOES needs E-{typ})", i)
        if prefix == "O":
            if typ is not None:
                spans.append((typ, start, i))
            start, typ = -1, None
        elif prefix == "I" and scheme == "IOB1" and not continues:
            if typ is not None:
                spans.append((typ, start, i))
            start, typ = i, t
        elif prefix in "IE":
            if not continues:
                raise TagSchemeError(f"{tag!r} does not continue a {t} chunk (previous tag "
                                     f"{tags[i - 1] if i else '<start>'!r}) in the {scheme} scheme", i)
            if prefix == "E":
                spans.append((typ, start, i + 1))
                start, typ = -1, None
        else:  # B or S
            if scheme == "IOB1" and not continues:
                raise TagSchemeError(f"{tag!r} in IOB1 must follow a chunk of the same type "
                                     f"(previous tag {tags[i - 1] if i else '<start>'!r})", i)
            if typ is not None:
                spans.append((typ, start, i))
            if prefix == "S":
                spans.append((t, i, i + 1))
                start, typ = -1, None
            else:
                start, typ = i, t
    if typ is not None:
        if scheme == "BIOES":
            raise TagSchemeError(f"sentence ends inside a {typ} chunk (BIOES needs E-{typ})", len(tags) - 1)
        spans.append((typ, start, len(tags)))
    return spans


def spans_to_tags(spans: Iterable[Span], length: int, scheme: str) -> list[str]:
    """Encode non-overlapping spans as a tag sequence of ``length`` in ``scheme``."""
    scheme = check_scheme_name(scheme)
    tags = ["O"] * length
    prev_end, prev_type = -1, None
    for typ, start, end in sorted(spans, key=lambda s: s[1]):
        if not 0 <= start < end <= length or start < prev_end:
            raise ValueError(f"bad or overlapping span {(typ, start, end)} for length {length}")
        if scheme == "BIOES" and end - start == 1:
            tags[start] = f"S-{typ}"
        else:
            for j in range(start, end):
                tags[j] = f"I-{typ}"
            if scheme == "BIO" or scheme == "BIOES" or (prev_end == start and prev_type == typ):
                tags[start] = f"B-{typ}"
            if scheme == "BIOES":
                tags[end - 1] = f"E-{typ}"
        prev_end, prev_type = end, typ
    return tags


def convert_tags(tags: Sequence[str], source: str, target: str) -> list[str]:
    """Convert one sentence's tags between schemes (validating them under ``source``)."""
    return spans_to_tags(tags_to_spans(tags, source), len(tags), target)


def iob1_to_bio(tags: Sequence[str]) -> list[str]:
    """IOB1 -> BIO (IOB2)."""
    return convert_tags(tags, "IOB1", "BIO")


def bio_to_bioes(tags: Sequence[str]) -> list[str]:
    """BIO (IOB2) -> BIOES."""
    return convert_tags(tags, "BIO", "BIOES")


def detect_scheme(sentences: Iterable[Sequence[str]]) -> str:
    """Guess the scheme of a data set: BIOES if any E-/S- tag, IOB1 if any chunk starts with I-, else BIO.

    The guess is only a guess: callers should validate every sentence under it (tags_to_spans).
    """
    iob1 = False
    for tags in sentences:
        prev_type = None
        for i, tag in enumerate(tags):
            prefix, t = split_tag(tag, i)
            if prefix in "ES":
                return "BIOES"
            if prefix == "I" and t != prev_type:
                iob1 = True
            prev_type = t
    return "IOB1" if iob1 else "BIO"

"""Span tag schemes (IOB1, BIO, BIOES): the one place that knows them.

Validity checks, detection, span extraction (strict for data files, lenient for scoring predictions),
conversion via spans, and the allowed tag transitions (the CRF's decoding constraints). Readers, the CRF
head and the span metric all use this module.

* BIO (IOB2): every chunk starts with ``B-X``; ``I-X`` continues a chunk of type X.
* IOB1 (original CoNLL-2003): chunks start with ``I-X``; ``B-X`` is used only for a chunk that
  directly follows another chunk of the same type X.
* BIOES: ``S-X`` single-token chunk; otherwise ``B-X I-X* E-X``.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from elmo_features.util.errors import ConfigError, ElmoTasksError

SCHEMES = ("IOB1", "BIO", "BIOES")
PREFIXES = {"IOB1": "BI", "BIO": "BI", "BIOES": "BIES"}  # chunk prefixes of each scheme (besides "O")
START, END = "START", "END"  # pseudo-tags before the first and after the last tag (transitions)
Span = tuple[str, int, int]  # (type, start, end) with end exclusive


class TagSchemeError(ElmoTasksError, ValueError):
    """An invalid tag sequence; ``index`` is the 0-based position of the offending tag, ``sentence`` the
    0-based sentence (when a whole data set was checked), ``scheme`` the scheme it was checked under."""

    def __init__(self, message: str, index: int, sentence: int | None = None, scheme: str | None = None):
        super().__init__(message)
        self.index = index
        self.sentence = sentence
        self.scheme = scheme


def check_scheme_name(scheme: str) -> str:
    """Return the canonical scheme name ("IOB2" is accepted for BIO) or raise listing valid ones."""
    name = scheme.upper()
    if name == "IOB2":
        name = "BIO"
    if name not in SCHEMES:
        raise ConfigError(f"unknown tag scheme {scheme!r}; valid: {', '.join(SCHEMES)} (IOB2 = BIO)")
    return name


def split_tag(tag: str, index: int = 0) -> tuple[str, str | None]:
    """``"B-PER" -> ("B", "PER")``, ``"O" -> ("O", None)``; anything else raises TagSchemeError."""
    if tag == "O":
        return "O", None
    if len(tag) < 3 or tag[1] != "-" or tag[0] not in "BIES":
        raise TagSchemeError(f"malformed tag {tag!r} (expected 'O' or a B-/I-/E-/S- prefix and a type)",
                             index)
    return tag[0], tag[2:]


def scheme_tag(tag: str, scheme: str, index: int = 0) -> tuple[str, str | None]:
    """``split_tag``, and the prefix must belong to ``scheme`` (e.g. no ``S-`` in BIO)."""
    prefix, typ = split_tag(tag, index)
    if prefix != "O" and prefix not in PREFIXES[scheme]:
        raise TagSchemeError(f"tag {tag!r} is not a valid {scheme} tag (expected O or "
                             f"{', '.join(p + '-TYPE' for p in PREFIXES[scheme])})", index)
    return prefix, typ


def tags_to_spans(tags: Sequence[str], scheme: str, strict: bool = True) -> list[Span]:
    """Decode one sentence's tags into spans.

    ``strict``: raise TagSchemeError at the first tag that is invalid in ``scheme`` (data files).
    Otherwise return only the well-formed chunks (how predictions are scored, as seqeval's strict mode):
    a tag that cannot continue or start a chunk yields nothing and ends the open chunk, which counts in
    IOB1/BIO but not in BIOES (a BIOES chunk exists only once its ``E-`` tag is seen).
    """
    scheme = check_scheme_name(scheme)
    spans: list[Span] = []
    start, typ = -1, None  # the open chunk

    def close(end: int) -> None:  # the open chunk stops before ``end``
        nonlocal start, typ
        if typ is not None and scheme != "BIOES":
            spans.append((typ, start, end))
        start, typ = -1, None

    for i, tag in enumerate(tags):
        try:
            prefix, t = scheme_tag(tag, scheme, i)
            if scheme == "BIOES" and typ is not None and prefix not in "IE":
                if strict:
                    raise TagSchemeError(f"{tag!r} follows an unfinished {typ} chunk (BIOES needs E-{typ})", i)
                start, typ = -1, None  # the unfinished chunk is dropped; this tag is read afresh
            continues = typ is not None and t == typ
            if prefix in "IE" and not continues and not (prefix == "I" and scheme == "IOB1"):
                raise TagSchemeError(f"{tag!r} does not continue a {t} chunk (previous tag "
                                     f"{tags[i - 1] if i else '<start>'!r}) in the {scheme} scheme", i)
            if prefix == "B" and scheme == "IOB1" and not continues:
                raise TagSchemeError(f"{tag!r} in IOB1 must follow a chunk of the same type "
                                     f"(previous tag {tags[i - 1] if i else '<start>'!r})", i)
        except TagSchemeError:
            if strict:
                raise
            close(i)
            continue
        if prefix == "O":
            close(i)
        elif prefix == "I":
            if not continues:  # IOB1: I- starts a chunk
                close(i)
                start, typ = i, t
        elif prefix == "E":
            spans.append((t, start, i + 1))
            start, typ = -1, None
        elif prefix == "S":
            spans.append((t, i, i + 1))
        else:  # B
            close(i)
            start, typ = i, t
    if typ is not None and scheme == "BIOES" and strict:
        raise TagSchemeError(f"sentence ends inside a {typ} chunk (BIOES needs E-{typ})", len(tags) - 1)
    close(len(tags))
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


def detect_scheme(sentences: Iterable[Sequence[str]]) -> str:
    """Guess the scheme of a data set by what most of its chunks follow: BIOES if more chunks end with an E-/S- tag
    than end with a B-/I- tag; else IOB1 if chunks start with I- more often than with a B- after another type or O
    (which IOB1 never has), else BIO. A file of one scheme with a few stray tags of another is so read as the
    scheme of most of its chunks, and validating it names the stray tags.

    The guess is only a guess: callers should validate every sentence under it (tags_to_spans).
    """
    es_ends = open_ends = i_starts = b_starts = 0
    for k, tags in enumerate(sentences):
        split = []
        for i, tag in enumerate(tags):
            try:
                split.append(split_tag(tag, i))
            except TagSchemeError as e:
                raise TagSchemeError(str(e), i, sentence=k) from None
        for i, (prefix, t) in enumerate(split):
            prev_type = split[i - 1][1] if i else None
            nxt = split[i + 1] if i + 1 < len(split) else ("O", None)
            es_ends += prefix in "ES"
            open_ends += prefix in "BI" and not (nxt[0] in "IE" and nxt[1] == t)  # a chunk ends here, not E-
            i_starts += prefix == "I" and t != prev_type
            b_starts += prefix == "B" and t != prev_type
    if es_ends and es_ends > open_ends:
        return "BIOES"
    return "IOB1" if i_starts > b_starts else "BIO"


def convert_data(sentences: Sequence[Sequence[str]], input_scheme: str, scheme: str) -> tuple[list[list[str]], str]:
    """A data set's tag sequences validated under ``input_scheme`` ("auto": detected over all of them) and
    converted to ``scheme``; -> (converted sequences, the input scheme). The TagSchemeError of the first
    invalid tag carries ``sentence``, ``index`` and ``scheme`` (None when the tag is malformed)."""
    scheme = check_scheme_name(scheme)
    source = detect_scheme(sentences) if input_scheme == "auto" else check_scheme_name(input_scheme)
    out = []
    for k, tags in enumerate(sentences):
        try:
            out.append(convert_tags(tags, source, scheme))
        except TagSchemeError as e:
            raise TagSchemeError(str(e), e.index, sentence=k, scheme=source) from None
    return out, source


# ---------------------------------------------------------------- transitions (the CRF's constraints)

def is_transition_allowed(scheme: str, from_prefix: str, from_type: str | None, to_prefix: str,
                          to_type: str | None) -> bool:
    """Whether a tag with ``to_prefix``/``to_type`` may follow one with ``from_prefix``/``from_type`` in
    ``scheme``; prefixes are "O", "B", "I", "E", "S" or START/END. The same rules as ``tags_to_spans``."""
    scheme = check_scheme_name(scheme)
    if to_prefix == START or from_prefix == END:
        return False
    same = from_type == to_type
    if scheme == "BIO":
        if from_prefix == START:
            return to_prefix in ("O", "B")
        if to_prefix == END:
            return from_prefix in ("O", "B", "I")
        return to_prefix in ("O", "B") or (to_prefix == "I" and from_prefix in ("B", "I") and same)
    if scheme == "IOB1":
        if from_prefix == START:
            return to_prefix in ("O", "I")
        if to_prefix == END:
            return from_prefix in ("O", "B", "I")
        return to_prefix in ("O", "I") or (to_prefix == "B" and from_prefix in ("B", "I") and same)
    if from_prefix == START:  # BIOES
        return to_prefix in ("O", "B", "S")
    if to_prefix == END:
        return from_prefix in ("O", "E", "S")
    return (from_prefix in ("O", "E", "S") and to_prefix in ("O", "B", "S")) or (
        from_prefix in ("B", "I") and to_prefix in ("I", "E") and same)


def allowed_transitions(scheme: str, labels: Sequence[str]) -> list[tuple[int, int]]:
    """Allowed (i, j) pairs over label indices plus START = len(labels) and END = len(labels) + 1.

    A label that is not a tag of ``scheme`` raises TagSchemeError."""
    scheme = check_scheme_name(scheme)
    parts = [scheme_tag(t, scheme, i) for i, t in enumerate(labels)] + [(START, None), (END, None)]
    return [(i, j) for i, (fp, ft) in enumerate(parts) for j, (tp, tt) in enumerate(parts)
            if is_transition_allowed(scheme, fp, ft, tp, tt)]

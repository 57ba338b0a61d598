"""CoNLL-2003 column files: ``word POS chunk NER`` per line, blank lines between sentences."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from elmo_features.util.errors import ConfigError
from elmo_features.util.text_input import iter_lines

from elmo_tasks.registry import READERS
from elmo_tasks.data.tag_schemes import TagSchemeError, check_scheme_name, convert_data
from elmo_tasks.data.types import DataFormatError, TaggedSentence, check_reader_file

CONLL2003_COLUMNS = ("word", "pos", "chunk", "ner")
SPAN_COLUMNS = ("chunk", "ner")  # columns holding span tags (scheme conversion applies)


def _read_blocks(path: Path, columns: Sequence[str]) -> list[tuple[list[int], list[list[str]]]]:
    """Sentences as (line numbers, rows); -DOCSTART- lines skipped, wrong column counts raise."""
    blocks: list[tuple[list[int], list[list[str]]]] = []
    lines: list[int] = []
    rows: list[list[str]] = []
    for lineno, line in iter_lines(path):  # the text policy of elmo_features.util.text_input (BOM, CRLF, UTF-8)
        fields = line.split()
        if not fields or fields[0] == "-DOCSTART-":
            if rows:
                blocks.append((lines, rows))
            lines, rows = [], []
            continue
        if len(fields) != len(columns):
            raise DataFormatError(f"expected {len(columns)} columns ({' '.join(columns)}), found "
                                  f"{len(fields)}: {line.rstrip()!r}", path, lineno)
        lines.append(lineno)
        rows.append(fields)
    if rows:
        blocks.append((lines, rows))
    return blocks


@READERS.register("conll2003")
def read_conll2003(path: str | Path, tag_column: str = "ner", scheme: str = "BIO",
                   input_scheme: str = "auto", columns: Sequence[str] = CONLL2003_COLUMNS,
                   ) -> list[TaggedSentence]:
    """Read a CoNLL-2003 style file into TaggedSentences.

    ``tags`` is ``tag_column`` converted from ``input_scheme`` ("auto" detects IOB1/BIO/BIOES over the
    whole file) to ``scheme`` when it is a span column ("ner", "chunk"); other columns (e.g. "pos")
    are returned as read. ``columns`` names the file's columns (first must be "word"); each
    sentence's ``columns`` holds all non-word columns as read. Empty files raise.
    """
    path = Path(path)
    columns = tuple(columns)
    if not columns or columns[0] != "word":
        raise ConfigError(f"columns: must start with 'word', got {', '.join(map(str, columns)) or 'none'}")
    if tag_column not in columns[1:]:
        raise ConfigError(f"tag_column: unknown column {tag_column!r}; valid: {', '.join(columns[1:])}")
    scheme = check_scheme_name(scheme)
    if input_scheme != "auto":
        input_scheme = check_scheme_name(input_scheme)
    check_reader_file(path, "CoNLL file")
    blocks = _read_blocks(path, columns)
    if not blocks:
        raise DataFormatError("no sentences found (empty file?)", path)
    col = columns.index(tag_column)
    all_tags = [[r[col] for r in rows] for _, rows in blocks]
    if tag_column in SPAN_COLUMNS:
        try:
            all_tags, _ = convert_data(all_tags, input_scheme, scheme)
        except TagSchemeError as e:
            how = f" ({e.scheme} scheme{', detected' if input_scheme == 'auto' else ''})" if e.scheme else ""
            raise DataFormatError(f"{tag_column} column{how}: {e}", path, blocks[e.sentence][0][e.index]) from None
    sentences = []
    for (_, rows), tags in zip(blocks, all_tags):
        others = {name: [r[j] for r in rows] for j, name in enumerate(columns) if j > 0}
        sentences.append(TaggedSentence(tokens=[r[0] for r in rows], tags=tags, columns=others))
    return sentences

"""Sentence classification files: one ``label, text`` row per line (TSV or CSV)."""
from __future__ import annotations

import csv
import gzip
import sys
from collections import Counter
from pathlib import Path

from elmo_features.util.errors import ConfigError
from elmo_features.util.once import first_time
from elmo_features.util.text_input import iter_lines

from elmo_tasks.registry import READERS
from elmo_tasks.data.tokenizer import get_tokenizer
from elmo_tasks.data.types import DataFormatError, LabeledSentence, check_reader_file

LABEL_NAMES = {"label", "labels", "class", "category", "sentiment", "polarity", "target", "y", "gold"}
TEXT_NAMES = {"text", "sentence", "sentences", "review", "content", "document", "x", "tokens", "phrase"}


def _column_index(spec: int | str, header: list[str] | None, what: str, path: Path) -> int:
    if isinstance(spec, int):
        return spec
    if header is None:
        raise DataFormatError(f"{what} {spec!r} is a column name but the file has no header row "
                              f"(use a 0-based column number)", path)
    if spec not in header:
        raise DataFormatError(f"{what} {spec!r} not in the header; columns: {', '.join(header)}", path, 1)
    return header.index(spec)


def _looks_like_header(row: list[str], label_col: int | str, text_col: int | str) -> bool:
    names = [c.strip().lower() for c in row]
    if isinstance(label_col, str) or isinstance(text_col, str):
        return True
    return (label_col < len(names) and text_col < len(names)
            and names[label_col] in LABEL_NAMES and names[text_col] in TEXT_NAMES)


def check_columns(options: dict, where: str = "reader options") -> None:
    """The label and text columns of a tsv/csv reader differ (the same one would make every sentence its own
    label): a ConfigError naming both."""
    label, text = options.get("label_column", 0), options.get("text_column", 1)
    if label == text:
        raise ConfigError(f"{where}: label_column {label!r} is also text_column {text!r}: every sentence would be its "
                          "own label; give two different columns")


def read_delimited(path: str | Path, delimiter: str = "\t", label_column: int | str = 0,
                   text_column: int | str = 1, header: bool | str = "auto",
                   tokenizer: str = "whitespace", quoting: bool = False) -> list[LabeledSentence]:
    """Read (label, text) rows; the text is tokenized with ``tokenizer`` ("whitespace" or "ptb").

    ``header="auto"`` treats the first row as a header when its label/text cells are usual column
    names (label/class/sentiment..., text/sentence/review...) or when a column is given by name.
    Every row must have as many fields as most rows have (the odd row is named); blank lines are skipped.
    """
    path = Path(path)
    tok = get_tokenizer(tokenizer)
    if header not in (True, False, "auto"):
        raise ConfigError(f"header: must be true, false or 'auto', got {header!r}")
    check_columns({"label_column": label_column, "text_column": text_column})
    check_reader_file(path, "data file")
    for _ in iter_lines(path):  # the text policy of elmo_features.util.text_input: UTF-8, no NUL (exact line on error)
        pass
    rows = _csv_rows(path, delimiter, quoting)
    n_fields = _row_width(rows, label_column, text_column, delimiter, path)
    first_line, first = rows[0]
    names = None
    if header is True or (header == "auto" and _looks_like_header(first, label_column, text_column)):
        names = [c.strip() for c in first]
        rows = rows[1:]
    li = _column_index(label_column, names, "label_column", path)
    ti = _column_index(text_column, names, "text_column", path)
    if li == ti:  # a column name and its number
        raise ConfigError(f"{path}: label_column {label_column!r} and text_column {text_column!r} are both column "
                          f"{li}: every sentence would be its own label; give two different columns")
    if max(li, ti) >= n_fields:
        raise DataFormatError(f"needs columns {li} and {ti} but the rows have {n_fields} field(s): {first!r}",
                              path, first_line)
    unread = [k + 1 for k in range(n_fields) if k not in (li, ti)]
    if unread:  # (every row has them: read none of them without a word)
        print(f"warning: {path}: its rows have {n_fields} fields; the label is field {li + 1} and the text field "
              f"{ti + 1} (label_column, text_column), field(s) {', '.join(map(str, unread))} are not read",
              file=sys.stderr)
    out: list[LabeledSentence] = []
    for lineno, row in rows:
        label, text = row[li].strip(), row[ti]
        if not label:
            raise DataFormatError("empty label", path, lineno)
        tokens = tok(text)
        if not tokens:
            raise DataFormatError("empty text", path, lineno)
        out.append(LabeledSentence(tokens=tokens, label=label))
    if not out:
        raise DataFormatError("no examples found (empty file?)", path)
    _warn_swapped_rows(out, rows, path)
    return out


def _warn_swapped_rows(examples: list[LabeledSentence], rows: list[tuple[int, list[str]]], path: Path) -> None:
    """One warning line for rows whose label and text columns look swapped: the text is (in any case) a label that
    other rows use (twice or more), and the row's own label is rarer or holds spaces (a text, not a class name)."""
    counts = Counter(e.label for e in examples)
    by_lower = Counter()
    for label, n in counts.items():
        by_lower[label.lower()] += n
    odd = [(lineno, e.label, text) for (lineno, _), e in zip(rows, examples)
           if (text := " ".join(e.tokens)).lower() != e.label.lower() and by_lower[text.lower()] >= 2
           and (counts[e.label] < by_lower[text.lower()] or any(c.isspace() for c in e.label))]  # (a common class
    # whose text is another class's name, e.g. "0<TAB>1" among many 0s and 1s, is no swap)
    if odd and first_time(("swapped columns", str(path), odd[0])):  # (once per command: each run reads the data)
        lineno, label, text = odd[0]
        more = f" (and {len(odd) - 1} more line(s))" if len(odd) > 1 else ""
        print(f"warning: {path}:{lineno}: the text is {text!r}, a label of other rows, under the label {label[:60]!r}"
              f"{more}: are the label and text columns swapped on that line? (its label would become a class)",
              file=sys.stderr)


def _csv_rows(path: Path, delimiter: str, quoting: bool) -> list[tuple[int, list[str]]]:
    """(line number, fields) of the non-blank rows."""
    rows: list[tuple[int, list[str]]] = []
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))  # (csv's default 131072 characters would refuse a
    # long document as "unparsable")
    opener = gzip.open if path.suffix.lower() == ".gz" else open  # (a .gz file is read decompressed, as every text
    with opener(path, "rt", encoding="utf-8-sig", newline="") as f:  # input is: checked by iter_lines already)
        reader = csv.reader(f, delimiter=delimiter, quoting=csv.QUOTE_MINIMAL if quoting else csv.QUOTE_NONE,
                            strict=True)
        line_start = 1
        try:
            for row in reader:
                lineno, line_start = line_start, reader.line_num + 1
                if row and any(c.strip() for c in row):
                    rows.append((lineno, row))
        except csv.Error as e:
            raise DataFormatError(f"unparsable row: {e}", path, reader.line_num) from None
    if not rows:
        raise DataFormatError("no examples found (empty file?)", path)
    return rows


def _row_width(rows: list[tuple[int, list[str]]], label_column: int | str, text_column: int | str, delimiter: str,
               path: Path) -> int:
    """The number of fields of most rows; a row with another number is an error naming its line."""
    counts = Counter(len(r) for _, r in rows)
    # the row shape of most lines, so that the odd row is the one named; in a tie, the fewest fields that still hold
    # the label and text columns (a tab typed inside a text adds a field)
    need = max(c for c in (label_column, text_column) if isinstance(c, int)) + 1 if any(
        isinstance(c, int) for c in (label_column, text_column)) else 1
    n_fields = min(counts, key=lambda n: (-counts[n], n < need, n))
    if n_fields < need:  # most lines lack the columns: another delimiter (a semicolon CSV, as some locales write)
        texts = [delimiter.join(r) for _, r in rows[:200]]
        other = next((c for c in ";\t|," if c != delimiter and sum(c in t for t in texts) >= 0.9 * len(texts)), None)
        seems = f"; the lines seem to separate fields with {other!r}: convert them" if other else ""
        raise DataFormatError(f"most lines have {n_fields} field(s) with the delimiter {delimiter!r}, but the columns "
                              f"need {need}{seems}", path, rows[0][0])
    for lineno, row in rows:
        if len(row) != n_fields:
            raise DataFormatError(f"expected {n_fields} fields (delimiter {delimiter!r}) as on most lines, found "
                                  f"{len(row)}: {row!r}", path, lineno)
    return n_fields


@READERS.register("tsv", check_values=check_columns)
def read_tsv(path: str | Path, label_column: int | str = 0, text_column: int | str = 1,
             header: bool | str = "auto", tokenizer: str = "whitespace") -> list[LabeledSentence]:
    """Tab-separated ``label<TAB>text`` (no quoting: quotes are part of the text)."""
    return read_delimited(path, "\t", label_column, text_column, header, tokenizer, quoting=False)


@READERS.register("csv", check_values=check_columns)
def read_csv(path: str | Path, label_column: int | str = 0, text_column: int | str = 1,
             header: bool | str = "auto", tokenizer: str = "whitespace") -> list[LabeledSentence]:
    """Comma-separated ``label,text`` with standard CSV quoting (``"..."``, ``""`` escapes)."""
    return read_delimited(path, ",", label_column, text_column, header, tokenizer, quoting=True)

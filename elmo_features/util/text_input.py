"""The text-input policy shared by ``embed``, ``predict``, ``train-bilm``/``eval-bilm`` and the data readers.

* Encoding: UTF-8. A byte-order mark at the start of the file is dropped; one anywhere else (two files joined
  with ``cat``) is an error naming the line, since it would stay glued to a word. Invalid UTF-8 is an error
  naming the file, line and byte column (a UTF-16 file is recognised and named as such).
* Line ends: ``\\n`` or ``\\r\\n``; a ``.gz`` file is read decompressed (one that is not gzip, truncated or
  damaged is an error naming it). A carriage return anywhere else (old-Mac ``\\r`` line ends, which would make
  the whole file one line) is an error naming the line.
* NUL bytes are an error naming the file and line (the file is binary, or UTF-16).
* Tokens: a line is split on whitespace.
* Blank (or whitespace-only) lines: where outputs are aligned with input lines (``embed``: dataset
  ``"i"`` is line ``i+1``; ``predict``: output ``i`` is line ``i+1``) a blank line is an error naming
  it, since skipping it would shift every later output. In training and evaluation corpora
  (``train-bilm`` ``train_files``/``heldout_file``, ``eval-bilm FILE``) blank lines separate documents and
  are skipped. Column formats (CoNLL) give blank lines their own meaning.
* A file without any sentence is an error naming the file.
"""
from __future__ import annotations

import codecs
import gzip
import os
import re
import zlib
from collections import Counter
from pathlib import Path
from typing import Iterable, Iterator, Literal

from elmo_features.util.errors import MissingPathError, PathError, TextInputError

BOM = b"\xef\xbb\xbf"


class BinaryFileError(TextInputError):
    """The file's first bytes say it is not text at all (compressed, an archive, UTF-16, ...): reading on, line by
    line, would only add noise to the message."""
BlankPolicy = Literal["error", "skip"]


def _open_binary(path: Path):
    if not path.exists():
        raise MissingPathError(f"input file not found: {path}")
    if path.is_dir():
        raise PathError(f"{path} is a folder; give a text file")
    return gzip.open(path, "rb") if path.suffix.lower() == ".gz" else open(path, "rb")


GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)  # what reading a .gz that is not whole gzip data raises


def gzip_problem(path: Path, error: Exception, lines: int) -> str:
    """The one-line message of a ``.gz`` file that cannot be decompressed (after ``lines`` good lines)."""
    if isinstance(error, EOFError):
        return (f"{path}: the gzip file is truncated (it ends before its end-of-stream marker, in line {lines + 1}); "
                "fetch or compress it again")
    if str(error).startswith("Not a gzipped file"):
        with open(path, "rb") as f:
            head = f.read(8)
        return (f"{path}: not a gzip file (it starts with {head!r}); the .gz suffix makes it read as gzip: rename it "
                "without .gz, or compress it (gzip)")
    return (f"{path}: damaged gzip data in line {lines + 1} ({' '.join(str(error).split())}); fetch or compress "
            "the file again")


def raw_lines(path: str | os.PathLike) -> Iterator[bytes]:
    """Every line of a file as stored (line end included; a ``.gz`` file decompressed), streamed; a ``.gz`` file
    that is not gzip, truncated or damaged is a TextInputError naming it."""
    path = Path(path)
    with _open_binary(path) as f:
        yield from gz_checked(f, path)


def gz_checked(lines: Iterable, path: Path) -> Iterator:
    """``lines`` (of a file opened from ``path``) as they come; a ``.gz`` that is not gzip, truncated or damaged is a
    TextInputError naming it (``gzip_problem``)."""
    n = 0
    try:
        for n, line in enumerate(lines, 1):
            yield line
    except GZIP_ERRORS as e:
        raise TextInputError(gzip_problem(path, e, n)) from None


SIGNATURES = [  # (first bytes, what the file is and what to do); UTF-32's marks before UTF-16's, which they start with
    (b"\xff\xfe\x00\x00", "the file is UTF-32; convert it to UTF-8 (e.g. iconv -f UTF-32 -t UTF-8 FILE)"),
    (b"\x00\x00\xfe\xff", "the file is UTF-32; convert it to UTF-8 (e.g. iconv -f UTF-32 -t UTF-8 FILE)"),
    (b"\xff\xfe", "the file is UTF-16; convert it to UTF-8 (e.g. iconv -f UTF-16 -t UTF-8 FILE)"),
    (b"\xfe\xff", "the file is UTF-16; convert it to UTF-8 (e.g. iconv -f UTF-16 -t UTF-8 FILE)"),
    (b"\x1f\x8b", "the file is gzip-compressed; decompress it (gunzip), or name it with .gz"),
    (b"\x89HDF", "the file is HDF5, not text"),
    (b"PK\x03\x04", "the file is a zip archive; unpack it"),
    (b"\xfd7zXZ", "the file is xz-compressed; decompress it (unxz)"),
    (b"\x28\xb5\x2f\xfd", "the file is zstd-compressed; decompress it (unzstd)"),
    (b"\x93NUMPY", "the file is a NumPy .npy array, not text"),
    (b"7z\xbc\xaf\x27\x1c", "the file is a 7z archive; unpack it (7z x FILE)"),
    (b"\xba\x16\x4f\x2f", "the file is a fastText model (.bin), not word vectors; give its .vec text file"),
]
# bzip2's magic and its first block's, or its end of stream (an empty stream): "BZh" alone starts words too
BZIP2 = re.compile(rb"BZh[1-9](1AY&SY|\x17rE8P\x90)")


def binary_kind(head: bytes) -> str | None:
    """What a file whose first bytes are ``head`` is, when its signature says it is not UTF-8 text (a message
    saying what to do), else None."""
    if BZIP2.match(head):
        return "the file is bzip2-compressed; decompress it (bunzip2)"
    if _lzma_alone(head):
        return "the file is lzma-compressed; decompress it (unlzma)"
    if head[257:263] in (b"ustar\x00", b"ustar ") and b"\x00" in head[:257]:  # a POSIX or GNU tar header's magic,
        # after a NUL-padded member name (text holds no NUL)
        return "the file is a tar archive; unpack it (tar xf FILE) and give the file in it"
    return next((what for sig, what in SIGNATURES if head.startswith(sig)), None)


def word2vec_binary_head(head: bytes) -> bool:
    """Whether a vectors file's first bytes ``head`` are a word2vec binary file's: a ``count dim`` header line, then a
    first row that does not read as text (a word and ``dim`` numbers, in any 8-bit encoding; a word may hold spaces,
    as in GloVe 840B)."""
    header = re.match(rb"\s*\d+\s+(\d+)\s*\r?\n", head)
    if not header:
        return False
    d = int(header.group(1))
    row = head[header.end():].split(b"\n", 1)[0]
    parts = row.decode("latin-1").split()
    numbers = parts[-min(d, len(parts) - 1):] if d >= 1 and len(parts) >= 2 else []
    try:  # a word and numbers (as many as the header says, or not: a text file whose header is wrong is text)
        return not numbers or any(b < 0x09 or 0x0d < b < 0x20 for b in row) or not [float(x) for x in numbers]
    except ValueError:
        return True


def decompressed_kind(head: bytes, path: str | os.PathLike) -> str | None:
    """What a gzip file's decompressed first bytes ``head`` are when not text (a message naming ``path``), else None."""
    kind = binary_kind(head[:512])
    if kind and kind.startswith("the file is gzip"):
        kind = "the file is gzip-compressed again; decompress it twice"
    return f"decompressed, {kind.replace('FILE', str(path))}" if kind else None


def utf16_order(raw: bytes, first: bool) -> str | None:
    """"LE" or "BE" when ``raw`` (a line split at b"\\n", or a file's first bytes; ``first``: it starts the file)
    holds NUL bytes and reads as UTF-16 text in that byte order, else None: the high bytes take one or two values (one
    of them 0) in 90% of the code units, and the text is printable, with a letter or digit. A line after the first
    may carry a UTF-16 line end's other byte (LE's NUL starts the next line, BE's ends its own). The order read as
    more characters below U+2000 wins (Latin, Cyrillic, Greek ... and the ASCII space, which the other order turns
    into unprintable ones)."""
    if b"\x00" not in raw or not raw.strip(b"\x00"):  # (no NUL: UTF-8's concern; all NUL: no text at all)
        return None
    best, score = None, -1
    for order in ("LE", "BE"):
        body = raw[1:] if order == "LE" and len(raw) % 2 and not first and raw[0] == 0 else raw
        body = body[:len(body) // 2 * 2]
        highs = body[1 if order == "LE" else 0::2]  # the code units' high bytes: in the text of one or two scripts,
        top = sum(n for _, n in Counter(highs).most_common(2))  # one or two values (0 for ASCII, 4 for Cyrillic ...)
        if 0 not in highs or 10 * top < 9 * len(highs):
            continue
        try:
            text = codecs.getincrementaldecoder(f"utf-16-{order.lower()}")().decode(body)  # (a cut pair waits)
        except UnicodeDecodeError:
            continue
        if text and all(c.isprintable() or c in "\t\r\n" for c in text) and any(c.isalnum() for c in text):
            low = sum(c < "\u2000" for c in text)
            best, score = (order, low) if low > score else (best, score)
    return best


def utf16_message(order: str) -> str:
    """What to do with UTF-16 text of byte order ``order`` that has no byte-order mark (FILE: the file's name)."""
    return f"the file looks like UTF-16 without a byte-order mark; convert it (iconv -f UTF-16{order} -t UTF-8 FILE)"


def nul_kind(raw: bytes, lineno: int) -> str | None:
    """What a line holding a NUL byte says the file is: an archive's or UTF-16's message (FILE: the file's name),
    or None for a NUL in text."""
    kind = binary_kind(raw) if lineno == 1 else None
    order = None if kind else utf16_order(raw, first=lineno == 1)
    return kind or (utf16_message(order) if order else None)


def _lzma_alone(head: bytes) -> bool:
    """The header of a legacy .lzma file: the properties byte 0x5d, then a dictionary size of 2^n or 3 * 2^(n-1)
    (4 KiB to 1.5 GiB), as xz and lzma write it ("]" and NUL bytes alone also start UTF-32 text)."""
    if len(head) < 13 or head[0] != 0x5D:
        return False
    size = int.from_bytes(head[1:5], "little")
    power = (size & (size - 1)) == 0
    three = size % 3 == 0 and ((size // 3) & (size // 3 - 1)) == 0
    return 1 << 12 <= size <= 3 << 29 and (power or three)


def decode_line(raw: bytes, path: str | os.PathLike, lineno: int) -> str:
    """One line's bytes (line end removed) -> text, or a TextInputError naming ``path:lineno``."""
    if lineno == 1 and raw.startswith(BOM):
        raw = raw[len(BOM):]
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    kind = binary_kind(raw) if lineno == 1 else None
    if kind:
        raise BinaryFileError(f"{path}:1: {kind.replace('FILE', str(path))}")
    nul = raw.find(b"\x00")  # (before the carriage return: a binary file holds both, and is told as binary)
    kind = nul_kind(raw, lineno) if nul >= 0 else None
    if kind:
        raise BinaryFileError(f"{path}:{lineno}: {kind.replace('FILE', str(path))}")
    if nul >= 0:
        raise TextInputError(f"{path}:{lineno}: NUL byte at byte column {nul + 1} (a binary file?); "
                             "the input must be UTF-8 text")
    cr = raw.find(b"\r")
    if cr >= 0:
        raise TextInputError(f"{path}:{lineno}: a carriage return (\\r) inside the line at byte column {cr + 1}: "
                             "the file has old-Mac line ends, which would join its lines; convert them to \\n "
                             f"(e.g. tr '\\r' '\\n' < {Path(path).name} > fixed.txt)")
    bom = raw.find(BOM)
    if bom >= 0:
        raise TextInputError(_bom_problem(path, lineno, bom))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TextInputError(f"{path}:{lineno}: not valid UTF-8 (byte {raw[e.start]:#04x} at byte column "
                             f"{e.start + 1}); the input must be UTF-8 text") from None


def _bom_problem(path: str | os.PathLike, lineno: int, column: int) -> str:
    return (f"{path}:{lineno}: a byte-order mark (U+FEFF) inside the file at byte column {column + 1} (files "
            "joined with cat?); it would stay glued to a word that then never matches: remove it")


def check_text(line: str, path: str | os.PathLike, lineno: int) -> None:
    """For a reader that decodes a line itself: the policy's NUL and misplaced byte-order mark checks on its text
    (a BOM at the very start of the file is for the reader to drop), as a TextInputError naming ``path:lineno``."""
    nul = line.find("\x00")
    kind = nul_kind(line.encode("utf-8", "surrogatepass"), lineno) if nul >= 0 else None
    if kind:
        raise BinaryFileError(f"{path}:{lineno}: {kind.replace('FILE', str(path))}")
    if nul >= 0:
        raise TextInputError(f"{path}:{lineno}: NUL byte at column {nul + 1} (a binary file?); "
                             "the input must be UTF-8 text")
    bom = line.find("\ufeff")
    if bom >= 0:
        raise TextInputError(_bom_problem(path, lineno, len(line[:bom].encode("utf-8"))))


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(line number, text without its line end) of every line of a UTF-8 text file (.gz ok), streamed."""
    path = Path(path)
    for lineno, raw in enumerate(raw_lines(path), 1):
        yield lineno, decode_line(raw[:-1] if raw.endswith(b"\n") else raw, path, lineno)


def iter_sentences(path: str | os.PathLike, blank_lines: BlankPolicy = "skip") -> Iterator[tuple[int, list[str]]]:
    """(line number, whitespace tokens) per sentence line; blank lines skipped or an error (module doc).

    A file without any sentence is an error."""
    n = 0
    for lineno, text in iter_lines(path):
        tokens = text.split()
        if not tokens:
            if blank_lines == "error":
                raise TextInputError(f"{path}:{lineno}: blank line; every line must hold one whitespace-tokenized "
                                     "sentence (remove the line)")
            continue
        n += 1
        yield lineno, tokens
    if n == 0:
        raise TextInputError(f"{path}: no sentences (the file is empty or blank); give one sentence per line")


def read_sentences(path: str | os.PathLike, blank_lines: BlankPolicy = "error") -> list[list[str]]:
    """All sentences of a one-sentence-per-line file (see ``iter_sentences``)."""
    return [tokens for _, tokens in iter_sentences(path, blank_lines)]

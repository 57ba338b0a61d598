"""The input of ``embed``, streamed: one checking pass, then sentences read again chunk by chunk.

``embed`` used to hold the whole file as Python lists of tokens (about 70 MB per million tokens); now its
memory stays flat in the file size: ``EmbedInput`` scans the file once (text policy of
``elmo_features.util.text_input``, sha256 of the bytes, one int32 token count per line) and keeps only those
counts (4 bytes per sentence). ``chunks`` re-reads the lines of a range; ``sentence_index`` builds the
``sentence_to_index`` JSON, the one part of the output format that is a single string of the size of the
input (``--forget-sentences`` leaves it out).
"""
from __future__ import annotations

import hashlib
import json
import shutil
import sys
from array import array
from pathlib import Path
from typing import BinaryIO, Iterator

from elmo_features.util.errors import TextInputError
from elmo_features.util.paths import check_input_file
from elmo_features.util.text_input import _open_binary, decode_line


def needs_spooling(path: str) -> bool:
    """True for input that can be read only once: ``-`` (stdin), a pipe, a FIFO, ``/dev/stdin``, ``<(...)``."""
    if path == "-":
        return True
    p = Path(path).expanduser()
    return p.exists() and not p.is_dir() and not p.is_file()


def spool_input(path: str, dest: Path, stdin: BinaryIO | None = None) -> Path:
    """Copy once-readable input to the regular file ``dest`` (read once, streamed), so that ``embed`` can check it
    and then read it again; returns ``dest``."""
    src = (stdin or sys.stdin.buffer) if path == "-" else open(Path(path).expanduser(), "rb")
    try:
        with open(dest, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
    finally:
        if path != "-":
            src.close()
    return dest



def _raw_lines(path: Path) -> Iterator[bytes]:
    """Every line of the file as stored (line end included), streamed."""
    with _open_binary(path) as f:
        yield from f


class EmbedInput:
    """A one-sentence-per-line file checked in one streaming pass (blank lines are errors: dataset "i" is
    line i+1). All problems are reported at once, the first ``max_errors`` in full."""

    def __init__(self, path: str | Path, max_errors: int = 5):
        self.path = Path(path)
        check_input_file(self.path, "embed input")
        digest, lengths, errors = hashlib.sha256(), array("i"), []
        for lineno, raw in enumerate(_raw_lines(self.path), start=1):
            digest.update(raw)
            try:
                text = self._decode(raw, lineno)
            except TextInputError as e:
                errors.append(str(e))
                lengths.append(0)
                continue
            n = len(text.split())
            if n == 0:
                errors.append(f"{self.path}:{lineno}: blank line; every line must hold one whitespace-tokenized "
                              "sentence")
            lengths.append(n)
        if errors:
            more = f"; ... and {len(errors) - max_errors} more" if len(errors) > max_errors else ""
            raise TextInputError("; ".join(errors[:max_errors]) + more)
        if not lengths:
            raise TextInputError(f"{self.path}: no sentences (the file is empty); give one sentence per line")
        self.sha256 = digest.hexdigest()
        self.lengths = lengths  # tokens per line, int32

    def _decode(self, raw: bytes, lineno: int) -> str:
        return decode_line(raw[:-1] if raw.endswith(b"\n") else raw, self.path, lineno).strip()

    def __len__(self) -> int:
        return len(self.lengths)

    def tokens(self, lo: int = 0, hi: int | None = None) -> int:
        """Number of tokens in lines [lo, hi)."""
        return sum(self.lengths[lo:hi])

    def lines(self, lo: int = 0, hi: int | None = None) -> Iterator[str]:
        """The stripped lines [lo, hi), streamed from the file (checked once already)."""
        hi = len(self) if hi is None else hi
        for i, raw in enumerate(_raw_lines(self.path)):
            if i >= hi:
                return
            if i >= lo:
                yield self._decode(raw, i + 1)

    def chunks(self, lo: int, hi: int, size: int) -> Iterator[tuple[int, list[list[str]]]]:
        """(index of the first line, tokenized lines) for lines [lo, hi) in chunks of ``size`` lines."""
        chunk, start = [], lo
        for i, line in enumerate(self.lines(lo, hi), start=lo):
            if not chunk:
                start = i
            chunk.append(line.split())
            if len(chunk) == size:
                yield start, chunk
                chunk = []
        if chunk:
            yield start, chunk

    def sentence_index(self) -> str:
        """The ``sentence_to_index`` JSON: each stripped line -> its dataset name (a repeated line maps to its
        last occurrence, as allennlp's)."""
        index: dict[str, str] = {}
        for i, line in enumerate(self.lines()):
            index[line] = str(i)
        return json.dumps(index)

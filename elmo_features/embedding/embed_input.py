"""The input of ``embed``, streamed: one checking pass, then sentences read again chunk by chunk.

``embed`` used to hold the whole file as Python lists of tokens (about 70 MB per million tokens); now its
memory stays flat in the file size: ``EmbedInput`` scans the file once (text policy of
``elmo_features.util.text_input``, sha256 of the bytes, one int32 token count per line) and keeps only those
counts (4 bytes per sentence). ``chunks`` re-reads the lines of a range; ``sentence_index`` builds the
``sentence_to_index`` JSON, the one part of the output format that is a single string of the size of the
input (``--forget-sentences`` leaves it out).
"""
from __future__ import annotations

import codecs
import hashlib
import json
import os
import shutil
import sys
import tempfile
from array import array
from pathlib import Path
from typing import BinaryIO, Iterator

from elmo_features.util.errors import PathError, TextInputError
from elmo_features.util.paths import check_input_file
from elmo_features.util.text_input import BinaryFileError, decode_line, iter_lines, nul_kind, raw_lines, read_sentences


def needs_spooling(path: str) -> bool:
    """True for input that can be read only once: ``-`` (stdin), a pipe, a FIFO, ``/dev/stdin``, ``<(...)``."""
    if path == "-":
        return True
    p = Path(path).expanduser()
    return p.exists() and not p.is_dir() and not p.is_file()


SPOOL_BLOCK = 1 << 20  # bytes read at a time
SPOOL_SPACE_EVERY = 64 << 20  # bytes between two looks at the free space
SPOOL_RESERVE = 2 << 30  # the free space the copy leaves (at most half of what was free when it started)
SNIFF_BYTES = 4096  # the first bytes of a spooled input that say what it is when it holds a NUL


class _SpoolCheck:
    """What is checked while once-readable input is copied, block by block, so that a device or a runaway producer
    (``/dev/zero``, ``/dev/urandom``, a pipe that never ends) stops at once instead of filling the disk: no NUL byte,
    valid UTF-8 (the text policy's first rules, named by the input's line and byte column), and room left on the
    copy's file system."""

    def __init__(self, name: str, folder: Path):
        self.name, self.folder = name, folder
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.lines = 0  # newlines seen so far
        self.column = 0  # bytes since the last newline
        self.size = 0  # bytes copied
        self.next_look = SPOOL_SPACE_EVERY  # when the free space is looked at again (others may write there too)
        free = shutil.disk_usage(folder).free
        self.reserve = min(SPOOL_RESERVE, free // 2)  # the free space this copy leaves
        self.limit = free - self.reserve  # the most this copy may write

    def _where(self, data: bytes, pos: int, before: int) -> tuple[str, int]:
        """(``NAME:LINE``, byte column) of offset ``pos`` in ``data``, whose first ``before`` bytes (the start of a
        character cut by the previous block) were counted already."""
        nl = data.rfind(b"\n", 0, pos)
        line = self.lines + data.count(b"\n", before, pos) + 1
        column = pos - nl if nl >= 0 else self.column - before + pos + 1
        return f"{self.name}:{line}", column

    def __call__(self, block: bytes) -> None:
        pending = self.decoder.getstate()[0]  # the start of a character cut by the previous block
        data = pending + block
        nul = block.find(b"\x00")
        kind = nul_kind(data[:SNIFF_BYTES], 1) if nul >= 0 and self.size == 0 else None
        if kind:
            raise TextInputError(f"{self.name}: {kind.replace('FILE', '-' if self.name == 'stdin' else self.name)} "
                                 "(stopped reading it)")
        if nul >= 0:
            where, column = self._where(data, len(pending) + nul, len(pending))
            raise TextInputError(f"{where}: NUL byte at byte column {column} (a binary file or a device?); the input "
                                 "must be UTF-8 text (stopped reading it)")
        try:
            self.decoder.decode(block)
        except UnicodeDecodeError as e:
            where, column = self._where(data, e.start, len(pending))
            raise TextInputError(f"{where}: not valid UTF-8 (byte {data[e.start]:#04x} at byte column {column}); the "
                                 "input must be UTF-8 text (stopped reading it)") from None
        nl = block.rfind(b"\n")
        self.column = len(block) - nl - 1 if nl >= 0 else self.column + len(block)
        self.lines += block.count(b"\n")
        self.size += len(block)
        if self.size >= self.next_look:
            self.next_look = self.size + SPOOL_SPACE_EVERY
            self.limit = min(self.limit, self.size + shutil.disk_usage(self.folder).free - self.reserve)
        if self.size > self.limit:
            raise TextInputError(f"{self.name}: stopped reading it after {self.size >> 20} MB: its copy in {self.folder} "
                                 "would leave too little free space on that file system; give a regular file as input "
                                 "(it is read in place), or free some space")


def spool_input(path: str, dest: Path, stdin: BinaryIO | None = None) -> Path:
    """Copy once-readable input to the regular file ``dest`` (read once, streamed), so that ``embed`` can check it
    and then read it again; returns ``dest``. The copy stops with a TextInputError at a NUL byte, invalid UTF-8 or
    when it would fill its file system (``_SpoolCheck``); the caller removes ``dest`` on any failure."""
    if path == "-" and stdin is None:
        stdin = getattr(sys.stdin, "buffer", None)
        if stdin is None or getattr(sys.stdin, "closed", False):  # `<&-`: Python has no standard input at all
            raise PathError("the input is '-' (standard input), but standard input is closed (<&-): give a file, or "
                            "pipe the text in")
    src = stdin if path == "-" else open(Path(path).expanduser(), "rb")
    check = _SpoolCheck("stdin" if path == "-" else path, dest.parent)
    try:
        with open(dest, "wb") as out:
            while block := src.read(SPOOL_BLOCK):
                check(block)
                out.write(block)
    finally:
        if path != "-":
            src.close()
    return dest


class EmbedInput:
    """A one-sentence-per-line file checked in one streaming pass (blank lines are errors: dataset "i" is
    line i+1). All problems are reported at once, the first ``max_errors`` in full."""

    def __init__(self, path: str | Path, max_errors: int = 5):
        self.path = Path(path)
        check_input_file(self.path, "embed input")
        digest, lengths, errors = hashlib.sha256(), array("i"), []
        for lineno, raw in enumerate(raw_lines(self.path), start=1):
            digest.update(raw)
            try:
                text = self._decode(raw, lineno)
            except BinaryFileError:
                raise  # the file is not text: its other lines say nothing more
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
        for i, raw in enumerate(raw_lines(self.path)):
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


def read_sentence_lines(path: str, whole_lines: bool = False) -> list[list[str]] | list[str]:
    """One sentence per line of a text file under the text policy, a blank line an error (outputs follow input lines:
    ``predict``, ``wsd tag``); ``-``: standard input, copied once to a temporary file (removed after) as ``embed -``
    copies it, so the same rules apply. ``whole_lines``: each line's text, for a tokenizer of the caller's own."""
    def read(p) -> list:
        sentences = read_sentences(p, blank_lines="error")  # (the checks; then the lines, as many)
        return [text for _, text in iter_lines(p)] if whole_lines else sentences

    if path != "-":
        return read(path)
    fd, name = tempfile.mkstemp(prefix=".elmo-tasks-predict.", suffix=".stdin")
    os.close(fd)
    spooled = Path(name)
    try:
        spool_input("-", spooled)
        return read(spooled)
    except TextInputError as e:  # named by the input, not by its (removed) copy
        raise TextInputError(str(e).replace(str(spooled), "stdin")) from None
    finally:
        spooled.unlink(missing_ok=True)

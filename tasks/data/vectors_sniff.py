"""What a static-vectors file is, told from its first bytes: text or a word2vec binary (even under a wrong name or
a gzip layer), and what to say about one that is not UTF-8 text."""
from __future__ import annotations

import gzip
from pathlib import Path

from elmo_features.util.text_input import GZIP_ERRORS, binary_kind, decompressed_kind, word2vec_binary_head


def gunzipped_head(path: Path) -> bytes:
    """The first 64 KB of a gzip file, decompressed (b"" when it is not whole gzip data)."""
    try:
        with gzip.open(path) as g:
            return g.read(65536)
    except GZIP_ERRORS:
        return b""


def reads_as_text(path: Path) -> bool:
    """Whether the file starts as text vectors do: UTF-8 lines, a word and numbers (after a ``count dim`` header
    that is not followed by binary rows)."""
    with open(path, "rb") as f:
        head = f.read(65536)
    if head.startswith(b"\x1f\x8b"):
        head = gunzipped_head(path)
    text = [line.decode("latin-1") for line in head.split(b"\n")[:3][:-1]]  # (any 8-bit text: the reader names
    if not text or word2vec_binary_head(head):  # an encoding that is not UTF-8)
        return False
    row = text[1] if len(text) > 1 and len(text[0].split()) == 2 and text[0].split()[0].isdigit() else text[0]
    try:
        return len(row.split()) >= 2 and bool([float(x) for x in row.split()[-1:]])
    except ValueError:
        return False


def not_text_message(path: Path, e: UnicodeDecodeError) -> str:
    """What a vectors file that is not UTF-8 text is, and what to do: its signature's kind, the word2vec binary
    hint only when it starts with a ``V d`` header line, else the decoding error."""
    with open(path, "rb") as f:
        head = f.read(65536)
    if path.suffix.lower() == ".gz":
        inner = gunzipped_head(path)
        if word2vec_binary_head(inner):
            return "a gzip-compressed word2vec binary file; give it with format='word2vec_bin'"
        if decompressed_kind(inner, path):
            return decompressed_kind(inner, path)
    kind = binary_kind(head) if path.suffix.lower() != ".gz" else None
    if kind:
        kind = kind.replace("FILE", str(path))
        return kind + "; give it with format npy (and its words file)" if head.startswith(b"\x93NUMPY") else kind
    if word2vec_binary_head(head):
        return f"not UTF-8 text ({e}) after a 'count dim' header; a word2vec binary file needs format='word2vec_bin'"
    return (f"not UTF-8 text ({e}); give word vectors as UTF-8 text (one word and its numbers per line; another "
            "encoding such as Latin-1 converts with iconv -f latin1 -t utf-8)")

"""Pretrained word vectors for the ``token_vectors`` prior: read a table, keep the biLM vocabulary's rows."""
from __future__ import annotations

import gzip
import hashlib
import os
import sys
from pathlib import Path

import numpy as np

from elmo_features.model.token_vectors import select_vectors
from elmo_features.util.arguments import check_int, uninformative_rows
from elmo_features.util.errors import ElmoTasksError
from elmo_features.util.text_input import (GZIP_ERRORS, binary_kind, check_text, decompressed_kind,
                                           word2vec_binary_head)


class VectorFileError(ElmoTasksError, ValueError):
    """A pretrained-vector file or folder is missing, malformed or of the wrong dimension."""


def read_vector_table(path: str | Path, dim: int | None = None) -> tuple[list[str], np.ndarray]:
    """(words, (V, d) float32) from a folder with ``vectors.npy`` + ``words.txt`` (as written by
    ``elmo-tasks data get glove-6b-50d``) or a GloVe-style text file (``word v1 .. vd`` per line, .gz ok; a
    word2vec/fastText ``count dim`` first line is read as a header). ``dim``, when given, must match."""
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():  # ('' would read the current folder)
        raise TypeError(f"read_vector_table: path must be a non-empty str or path, got {path!r}")
    dim = None if dim is None else check_int(dim, "read_vector_table: dim", minimum=1)
    path = Path(path)
    if path.is_dir():
        npy, wfile = path / "vectors.npy", path / "words.txt"
        for p in (npy, wfile):
            if not p.exists():
                raise VectorFileError(f"token_vectors: {p} not found (expected vectors.npy + words.txt in {path}; "
                                      "run `elmo-tasks data get glove-6b-50d`)")
        mat = np.load(npy, allow_pickle=False)
        kind = binary_kind(wfile.read_bytes()[:512])
        if kind:
            raise VectorFileError(f"token_vectors: {wfile}: {kind.replace('FILE', str(wfile))}")
        try:
            words = wfile.read_text(encoding="utf-8-sig").split("\n")  # (a byte-order mark is dropped)
        except UnicodeDecodeError as e:
            raise VectorFileError(f"token_vectors: {wfile}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset "
                                  f"{e.start}); convert it (e.g. iconv -f latin1 -t utf-8)") from None
        if words and words[-1] == "":
            words.pop()
        if mat.ndim != 2 or mat.shape[0] != len(words):
            raise VectorFileError(f"token_vectors: {npy} has shape {mat.shape} but {wfile} lists {len(words)} words")
    elif path.is_file():
        words, rows = _read_text_table(path)
        mat = np.asarray(rows, dtype=np.float32)
    else:
        raise VectorFileError(f"token_vectors: {path} not found (a vectors folder or a GloVe text file)")
    if dim is not None and mat.shape[1] != dim:
        raise VectorFileError(f"token_vectors: {path} has {mat.shape[1]}-dimensional vectors, the config says {dim}")
    if not np.isfinite(mat).all():
        raise VectorFileError(f"token_vectors: {path} holds NaN or Inf values")
    problem = uninformative_rows(mat)
    if problem:
        raise VectorFileError(f"token_vectors: {path}: {problem}: the vectors would carry no information about the "
                              "word; give other vectors")
    return words, mat.astype(np.float32)


def _read_text_table(path: Path) -> tuple[list[str], list[list[float]]]:
    """A GloVe-style text file (.gz ok): its words and rows; a file that is no UTF-8 text named as what it is."""
    with open(path, "rb") as f:
        head = f.read(65536)
    kind = binary_kind(head) if path.suffix.lower() != ".gz" else None
    if kind:
        raise VectorFileError(f"token_vectors: {path}: {kind.replace('FILE', str(path))}")
    if path.suffix.lower() == ".gz" and not head.startswith(b"\x1f\x8b"):
        raise VectorFileError(f"token_vectors: {path}: named .gz but not gzip-compressed; rename it without .gz")
    if path.suffix.lower() == ".gz":
        try:
            with gzip.open(path) as g:
                head = g.read(65536)
        except GZIP_ERRORS as e:
            raise VectorFileError(f"token_vectors: {path}: not a whole gzip file ({e})") from None
    kind = decompressed_kind(head, path) if path.suffix.lower() == ".gz" else None
    if kind:
        raise VectorFileError(f"token_vectors: {path}: {kind}")
    if word2vec_binary_head(head):
        raise VectorFileError(f"token_vectors: {path}: a word2vec binary file (a 'count dim' header, then binary "
                              "rows); token_vectors reads text vectors or a vectors.npy + words.txt folder: convert "
                              "it (e.g. gensim's save_word2vec_format(..., binary=False))")
    words, rows, width = [], [], None
    opener = gzip.open if path.suffix.lower() == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8-sig") as f:  # a byte-order mark at the start is dropped
            for lineno, line in enumerate(f, 1):
                check_text(line, path, lineno)  # NUL, a byte-order mark in the middle (elmo_features.util.text_input)
                parts = line.rstrip("\r\n").rstrip(" ").split(" ")
                if lineno == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):  # word2vec's 'count dim'
                    width = int(parts[1])
                    continue
                if len(parts) < 2:
                    continue
                width = len(parts) - 1 if width is None else width
                if len(parts) - 1 != width:
                    raise VectorFileError(f"token_vectors: {path} line {lineno}: {len(parts) - 1} values, "
                                          f"expected {width}")
                try:
                    rows.append([float(x) for x in parts[1:]])
                except ValueError:
                    raise VectorFileError(f"token_vectors: {path} line {lineno}: not a number") from None
                words.append(parts[0])
    except UnicodeDecodeError as e:
        raise VectorFileError(f"token_vectors: {path}: not UTF-8 text (byte {e.object[e.start]:#04x}); give word "
                              "vectors as UTF-8 text") from None
    except GZIP_ERRORS as e:
        raise VectorFileError(f"token_vectors: {path}: not a whole gzip file ({e})") from None
    if not rows:
        raise VectorFileError(f"token_vectors: {path} holds no vectors")
    return words, rows


def vocabulary_rows(path: str | Path, vocab: list[str], words: list[str], mat: np.ndarray,
                    lowercase: bool) -> tuple[list[str], np.ndarray]:
    """``select_vectors`` of the table read from ``path``; a table that shares no word with the vocabulary is a
    VectorFileError naming the file, the counts and the casing setting."""
    try:
        kept, selected = select_vectors(vocab, words, mat, lowercase=lowercase)
    except ValueError:
        raise VectorFileError(f"token_vectors: {path}: none of its {len(words):,} words is in the biLM vocabulary "
                              f"({len(vocab):,} words, e.g. {', '.join(vocab[:3])}); check the casing "
                              f"(token_vectors_lowercase {lowercase}) or give vectors for this corpus") from None
    if len(kept) < LOW_COVERAGE * len(vocab):
        print(f"warning: token_vectors: {path}: only {len(kept):,} of the {len(vocab):,} vocabulary words have a "
              f"vector ({len(kept) / len(vocab):.0%}); check the casing (token_vectors_lowercase {lowercase}) or the "
              "language", file=sys.stderr, flush=True)
    return kept, selected


LOW_COVERAGE = 0.5  # a smaller share of the vocabulary with a pretrained vector is warned about


def table_digest(words: list[str], mat: np.ndarray) -> str:
    """sha256 of a selected table (words and values): ties a checkpoint to the vectors it was trained with."""
    h = hashlib.sha256("\n".join(words).encode("utf-8"))
    h.update(np.ascontiguousarray(mat, dtype=np.float32).tobytes())
    return h.hexdigest()

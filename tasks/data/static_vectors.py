"""Static word vectors (GloVe, word2vec, fastText) as a token -> vector lookup with a fixed OOV policy.

Lowercasing policy: ``lowercase=None`` (auto) lowercases tokens when the vocabulary has no word with
an upper-case letter (e.g. GloVe 6B, which was trained on lower-cased text); otherwise the lookup is
case-sensitive with a fallback: exact form first, then the lower-cased form.
OOV policy: a token found under neither form is out of vocabulary and gets the ZERO vector (so it
adds nothing to averages and is identical across runs); ``lookup`` returns how many tokens were OOV
and ``coverage`` reports the OOV rate of a data set.

File formats: ``text`` (GloVe: ``word v1 .. vd`` per line; word2vec/fastText text: the same after a
``V d`` header line; optionally .gz), ``word2vec_bin`` (header ``V d``, then ``word<space>`` + d
little-endian float32 per entry), and ``npy`` (a (V, d) .npy matrix + a words file, one word per
line, as written by ``elmo-tasks data get glove-6b-50d``).
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import mmap
import os
import sys
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from elmo_features.util.arguments import check_bool, check_int, check_optional_bool, check_sentences
from elmo_features.util.text_input import GZIP_ERRORS, binary_kind, check_text, decompressed_kind, gz_checked

from elmo_tasks.data.types import DataFormatError
from elmo_tasks.data.vectors_sniff import gunzipped_head, not_text_message, reads_as_text

FORMATS = ("auto", "text", "word2vec_bin", "npy")


def _word_problem(word) -> str | None:
    """Why ``word`` is no word at all, or None. Words no token can match (a trailing no-break space, a zero-width
    space: crawled vector files hold a few) are kept: they are never looked up."""
    if not isinstance(word, str) or not word:
        return f"must be a non-empty str, got {type(word).__name__}"
    if word.endswith("\n"):
        return "ends with a line break (lines read with readlines()? strip them)"
    return None


class StaticVectors:
    """A vocabulary of ``words`` with ``vectors`` (V, d) float32 and the lookup policy above."""

    def __init__(self, words: Sequence[str], vectors: np.ndarray, lowercase: bool):
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2:
            raise ValueError(f"vectors must be a (V, d) matrix, got shape {vectors.shape}")
        if len(words) != vectors.shape[0]:
            raise ValueError(f"{len(words)} words but vectors has shape {vectors.shape}")
        if not len(words):  # (every lookup would miss: all-zero features)
            raise ValueError("StaticVectors: no words; give at least one word and its vector")
        if vectors.shape[1] == 0:
            raise ValueError(f"vectors have 0 dimensions (shape {vectors.shape}); give a (V, d) matrix with d >= 1")
        for i, w in enumerate(words):
            if problem := _word_problem(w):
                raise ValueError(f"words[{i}] {w!r}: {problem}")
        bad = ~np.isfinite(vectors).all(axis=1)  # (V,)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"vectors: row {i} ({list(words)[i]!r}) holds NaN or infinity; give finite vectors")
        self.words = list(words)
        self.vectors = vectors  # (V, d)
        self.lowercase = check_bool(lowercase, "StaticVectors lowercase")
        self.index: dict[str, int] = {}
        for i, w in enumerate(self.words):  # first occurrence wins (files list frequent words first)
            self.index.setdefault(w.lower() if self.lowercase else w, i)
        self.n_duplicates = len(self.words) - len(self.index)
        for key, i in [(k, i) for k, i in self.index.items() if not unicodedata.is_normalized("NFC", k)]:
            self.index.setdefault(unicodedata.normalize("NFC", key), i)  # a word stored decomposed (NFD) is found too

    @property
    def dim(self) -> int:
        """Vector size d."""
        return self.vectors.shape[1]

    @functools.cached_property
    def fingerprint(self) -> str:
        """sha256 of what the vectors give: the words, the matrix and the lookup policy (a file replaced in place
        with other vectors changes it; the same vectors in another file format do not)."""
        h = hashlib.sha256(b"static-vectors-v1\x00lower" if self.lowercase else b"static-vectors-v1\x00cased")
        h.update("\n".join(self.words).encode("utf-8"))
        h.update(np.ascontiguousarray(self.vectors, dtype="<f4").tobytes())
        return h.hexdigest()

    @functools.cached_property
    def lookup_fingerprint(self) -> str:
        """sha256 of the lookup itself: each key and the row it finds, in key order (the same vectors with their rows
        in another order, or with a header line, give the same value)."""
        h = hashlib.sha256(b"static-lookup-v1\x00lower" if self.lowercase else b"static-lookup-v1\x00cased")
        keys = sorted(self.index)
        h.update("\n".join(keys).encode("utf-8", "surrogatepass"))
        h.update(np.ascontiguousarray(self.vectors[[self.index[k] for k in keys]], dtype="<f4").tobytes())
        return h.hexdigest()

    def __len__(self) -> int:
        return len(self.words)

    def index_of(self, token: str) -> int | None:
        """Row of ``token`` under the lookup policy (as given, then lowercased; a token not in Unicode NFC form, e.g.
        an accent written as a combining mark, then by its NFC form), or None when it is out of vocabulary."""
        i = None if self.lowercase else self.index.get(token)
        if i is None:
            i = self.index.get(token.lower())
        if i is None and not unicodedata.is_normalized("NFC", token):
            return self.index_of(unicodedata.normalize("NFC", token))
        return i

    def __contains__(self, token: str) -> bool:
        return self.index_of(token) is not None

    def lookup(self, tokens: Sequence[str]) -> tuple[np.ndarray, int]:
        """Vectors (n, d) float32 for ``tokens`` (zero rows for OOV) and the number of OOV tokens."""
        tokens = check_sentences([tokens], "tokens")[0]  # (a string is not a token list)
        rows = [self.index_of(t) for t in tokens]
        out = np.zeros((len(tokens), self.dim), dtype=np.float32)  # (n, d)
        found = [(j, r) for j, r in enumerate(rows) if r is not None]
        if found:
            js, rs = zip(*found)
            out[list(js)] = self.vectors[list(rs)]
        return out, len(tokens) - len(found)

    def coverage(self, sentences: Iterable[Sequence[str]]) -> dict[str, float]:
        """Token and type OOV counts and rates over tokenized sentences."""
        sentences = check_sentences(sentences)
        n_tok = n_oov = 0
        types: dict[str, bool] = {}
        for sent in sentences:
            for t in sent:
                known = types.get(t)
                if known is None:
                    known = types[t] = t in self
                n_tok += 1
                n_oov += not known
        n_oov_types = sum(not k for k in types.values())
        return {"tokens": n_tok, "oov_tokens": n_oov, "oov_rate": n_oov / n_tok if n_tok else 0.0,
                "types": len(types), "oov_types": n_oov_types,
                "oov_type_rate": n_oov_types / len(types) if types else 0.0}

def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def _parse_row(values: list[str], word: str, path: Path, lineno: int) -> np.ndarray:
    """One vector as float32; a value beyond float32's range becomes inf silently (the finite check names it)."""
    try:
        with np.errstate(over="ignore"):
            return np.array(values, dtype=np.float32)
    except ValueError:
        bad = next(x for x in values if not _is_number(x))
        raise DataFormatError(f"non-numeric value {bad!r} in the vector of {word!r}", path, lineno) from None


def _header(parts: list[str]) -> tuple[int, int] | None:
    if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
        return int(parts[0]), int(parts[1])
    return None


def _read_text(path: Path, max_vectors: int | None, progress: bool) -> tuple[list[str], np.ndarray]:
    gz = path.suffix.lower() == ".gz"
    opener = gzip.open if gz else open
    words: list[str] = []
    rows: list[np.ndarray] = []
    header = None
    d = None
    size = path.stat().st_size
    bar = tqdm(total=None if gz else size, unit="B", unit_scale=True, desc=f"reading {path.name}",
               disable=not progress or size < 20_000_000)
    with opener(path, "rt", encoding="utf-8-sig", newline="\n") as f:  # a byte-order mark is dropped
        for lineno, line in enumerate(gz_checked(f, path), 1):
            if lineno % 10000 == 0:
                bar.update(f.buffer.tell() - bar.n if not gz else 0)
            check_text(line, path, lineno)  # a NUL byte, or a byte-order mark after the first (files joined by cat)
            if _joins_rows(line):  # (CRLF is read; a lone CR before another row: old-Mac line ends)
                raise DataFormatError("a carriage return (\\r) inside the line: the file has old-Mac line ends, which "
                                      "would join its lines; convert them to \\n (e.g. tr '\\r' '\\n')", path, lineno)
            parts = line.rstrip("\r\n").rstrip(" ").split(" ")
            if lineno == 1 and _header(parts):
                header = _header(parts)
                d = header[1]
                continue
            if parts == [""]:
                raise DataFormatError("empty line", path, lineno)
            if d is None:
                d = len(parts) - 1
                if d < 1:
                    raise DataFormatError(f"expected 'word v1 ... vd', found {line.strip()[:80]!r}", path, lineno)
            if len(parts) < d + 1:
                raise DataFormatError(f"dimension mismatch: expected {d} values after the word, found "
                                      f"{len(parts) - 1}", path, lineno)
            if len(parts) > d + 1:  # a word containing spaces (GloVe 840B) -- or too many values
                extra = parts[1:len(parts) - d]
                if all(_is_number(x) for x in extra):
                    raise DataFormatError(f"dimension mismatch: expected {d} values after the word, "
                                          f"found {len(parts) - 1}", path, lineno)
            word = " ".join(parts[:len(parts) - d])
            if not word:
                raise DataFormatError("empty word", path, lineno)
            rows.append(_parse_row(parts[len(parts) - d:], word, path, lineno))
            words.append(word)
            if max_vectors is not None and len(words) >= max_vectors:
                break
    bar.close()
    if not words:
        raise DataFormatError("no vectors found (empty file?)", path)
    if header and max_vectors is None and header[0] != len(words):
        raise DataFormatError(f"header says {header[0]} vectors but the file has {len(words)}", path, 1)
    return words, np.stack(rows)


def _read_word2vec_bin(path: Path, max_vectors: int | None) -> tuple[list[str], np.ndarray]:
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            raise DataFormatError("empty file", path)
        if f.read(2) == b"\x1f\x8b":  # a gzip-compressed binary (GoogleNews-vectors-negative300.bin.gz): in memory
            kind = decompressed_kind(gunzipped_head(path), path)  # (before decompressing gigabytes of a fastText
            if kind:  # model)
                raise DataFormatError(kind, path)
            f.seek(0)
            data = _gunzip(f, path)
        else:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    kind = binary_kind(data[:512])
    if kind:
        raise DataFormatError(kind.replace("FILE", str(path)), path)
    try:
        end = data.find(b"\n")
        parts = data[:end if end >= 0 else 100].decode("utf-8", "replace").split()
        header = _header(parts)
        if header is None:
            raise DataFormatError(f"expected a 'V d' header line, found {' '.join(parts)[:80]!r}", path, 1)
        n_words, d = header
        n = n_words if max_vectors is None else min(n_words, max_vectors)
        if n * (4 * d + 2) > len(data) - end - 1:  # (each row: a word of 1+ bytes, a space, d float32)
            raise DataFormatError(f"the header says {n_words} x {d} float32, but the file holds "
                                  f"{len(data) - end - 1:,} bytes after it (room for fewer rows); check the header",
                                  path, 1)
        words: list[str] = []
        vectors = np.empty((n, d), dtype=np.float32)  # (V, d)
        pos = end + 1
        for i in range(n):
            while pos < len(data) and data[pos:pos + 1] in (b"\n", b" "):
                pos += 1
            sp = data.find(b" ", pos)
            if sp < 0 or sp + 1 + 4 * d > len(data):
                raise DataFormatError(f"file truncated at vector {i} of {n_words} (byte {pos}); the header "
                                      f"says {n_words} x {d} float32", path)
            words.append(_w2v_word(data[pos:sp], i, n_words, d, path))
            vectors[i] = np.frombuffer(data, dtype="<f4", count=d, offset=sp + 1)
            pos = sp + 1 + 4 * d
        if n == n_words and data[pos:].strip():
            raise DataFormatError(f"{len(data) - pos} byte(s) follow the {n_words} x {d} float32 vectors the header "
                                  "says: the header's count or dimension does not fit the file; check the header", path)
    finally:
        if isinstance(data, mmap.mmap):
            data.close()
    return words, vectors


def _gunzip(f, path: Path) -> bytes:
    try:
        with gzip.open(f) as g:
            return g.read()
    except GZIP_ERRORS as e:
        raise DataFormatError(f"not a whole gzip file ({e})", path) from None


def _w2v_word(raw: bytes, i: int, n_words: int, d: int, path: Path) -> str:
    """The word of word2vec binary row ``i``; a newline or a NUL byte in it (a row's end, a float's bytes) means the
    rows were read out of step: the header's dimension does not fit them."""
    word = raw.decode("utf-8", "replace")
    if not word or b"\n" in raw or b"\x00" in raw:  # (rows end with a newline; a float's bytes hold NULs)
        raise DataFormatError(f"vector {i + 1} of {n_words}: the word read is not text ({raw[:20]!r}): the header's "
                              f"dimension {d} does not fit the rows (each row is 'word ' + {d} float32 = "
                              f"{4 * d} bytes), or the file is not word2vec binary; check the header", path)
    return word


def _npy_magic(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(6) == b"\x93NUMPY"


def _read_npy(path: Path, words_path: Path | None, max_vectors: int | None) -> tuple[list[str], np.ndarray]:
    if not _npy_magic(path):  # (before the words file is looked for: the matrix is what is wrong)
        raise DataFormatError("not a NumPy .npy file (it lacks the \\x93NUMPY signature np.save writes); give the "
                              "vectors' own format (format: text or word2vec_bin), or a file written by np.save", path)
    if words_path is None:
        candidates = [path.with_name("words.txt"), path.with_suffix(".words.txt"), path.with_suffix(".vocab")]
        words_path = next((c for c in candidates if c.is_file()), None)
        if words_path is None:
            raise FileNotFoundError(f"{path}: no words file found (tried {', '.join(str(c) for c in candidates)});"
                                    f" pass words_path=")
    matrix = np.load(path, mmap_mode="r")
    with open(words_path, encoding="utf-8-sig", newline="\n") as f:  # a byte-order mark is dropped
        words = f.read().split("\n")
    if words and words[-1] == "":
        words.pop()
    if matrix.ndim != 2 or matrix.shape[0] != len(words):
        raise DataFormatError(f"vectors {path} have shape {matrix.shape} but {words_path} lists "
                              f"{len(words)} words (expected a ({len(words)}, d) matrix)", path)
    for i, w in enumerate(words):
        if not w:
            raise DataFormatError("empty word", words_path, i + 1)
    n = len(words) if max_vectors is None else min(len(words), max_vectors)
    with np.errstate(over="ignore"):  # float64 values beyond float32's range become inf: the finite check names them
        return words[:n], np.asarray(matrix[:n], dtype=np.float32)


def load_static_vectors(path: str | Path, format: str = "auto", words_path: str | Path | None = None,
                        lowercase: bool | None = None, max_vectors: int | None = None,
                        progress: bool = True) -> StaticVectors:
    """Load word vectors; ``format="auto"`` uses .npy -> npy, .bin -> word2vec_bin, else text, and a
    folder containing vectors.npy + words.txt -> npy. ``max_vectors`` keeps the first N (the most
    frequent in GloVe/word2vec/fastText files). ``lowercase=None`` decides by the vocabulary (see module).
    """
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
        raise TypeError(f"load_static_vectors: path must be a non-empty str or path, got {path!r}")
    path = Path(path).expanduser()
    if format not in FORMATS:
        raise ValueError(f"unknown vectors format {format!r}; valid: {', '.join(FORMATS)}")
    lowercase = check_optional_bool(lowercase, "lowercase")
    max_vectors = None if max_vectors is None else check_int(max_vectors, "max_vectors")
    if path.is_dir():
        if not (path / "vectors.npy").is_file():
            raise FileNotFoundError(f"{path} is a folder without vectors.npy (expected vectors.npy + words.txt)")
        path = path / "vectors.npy"
    if not path.is_file():
        raise FileNotFoundError(f"word vectors not found: {path}")
    if format == "auto":
        binary = path.suffix.lower() == ".bin" or path.name.lower().endswith(".bin.gz")
        format = "npy" if path.suffix.lower() == ".npy" else "word2vec_bin" if binary else "text"
        if format in ("word2vec_bin", "npy") and reads_as_text(path) and not _npy_magic(path):  # a text file named
            format = "text"  # .bin or .npy: its rows say so
    if format == "npy":
        words, vectors = _read_npy(path, Path(words_path) if words_path else None, max_vectors)
    elif format == "word2vec_bin":
        words, vectors = _read_word2vec_bin(path, max_vectors)
    else:
        try:
            words, vectors = _read_text(path, max_vectors, progress)
        except UnicodeDecodeError as e:
            raise DataFormatError(not_text_message(path, e), path) from None
    bad = ~np.isfinite(vectors).all(axis=1)
    if bad.any():
        i = int(np.argmax(bad))
        raise DataFormatError(f"{int(bad.sum())} vector(s) contain NaN/inf, first: {words[i]!r} (entry {i + 1}; a "
                              "value beyond float32's range, +-3.4e38, is inf)", path)
    warn_conflicting_duplicates(words, vectors, path)
    if lowercase is None:
        lowercase = not any(w != w.lower() for w in words)
    try:
        return StaticVectors(words, vectors, lowercase)
    except ValueError as e:  # (the API's checks of a file's words: one line naming the file)
        raise DataFormatError(str(e), path) from None


def _joins_rows(line: str) -> bool:
    """Whether a carriage return inside ``line`` ends a row that another row follows (old-Mac line ends, which
    would make the file one line); one inside a word (``foo\rbar 0.1 ...``) is kept as part of the word."""
    rows = line.rstrip("\r\n").split("\r")[:-1]  # (the pieces a carriage return ends)
    return any(len(row.split()) >= 2 and _is_number(row.split()[-1]) for row in rows)


def warn_conflicting_duplicates(words: Sequence[str], vectors: np.ndarray, path: Path) -> None:
    """One warning line when a word is listed twice with different vectors (the first is used); the same word
    with the same vector, and words that only collide once lower-cased, are not reported."""
    first: dict[str, int] = {}
    count, example = 0, None
    for i, w in enumerate(words):
        j = first.setdefault(w, i)
        if j != i and not np.array_equal(vectors[i], vectors[j]):
            count += 1
            example = example or (w, j + 1, i + 1)
    if example:
        print(f"warning: {path}: {count} word(s) listed twice with different vectors (first: {example[0]!r}, "
              f"entries {example[1]} and {example[2]}); the first vector is used", file=sys.stderr, flush=True)

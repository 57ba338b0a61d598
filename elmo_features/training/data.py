"""Training text -> word types, the output vocabulary, and deterministic length-bucketed batches.

Every distinct word is a *type*; type 0 is <S>, type 1 is </S>. A sentence is stored as int32 type ids;
the character CNN runs once per distinct type in a batch. The output vocabulary (softmax) is <S>, </S>,
<UNK> followed by the most frequent training words (ties broken alphabetically).
"""
from __future__ import annotations

import gzip
import hashlib
import sys

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import torch

from elmo_features.model.char_ids import BOS_TOKEN, EOS_TOKEN, word_to_char_ids
from elmo_features.util.errors import CheckpointError, TextInputError
from elmo_features.util.provenance import write_text_atomic
from elmo_features.util.text_input import iter_lines, iter_sentences

UNK_TOKEN = "<UNK>"
SPECIALS = [BOS_TOKEN, EOS_TOKEN, UNK_TOKEN]


def read_sentences(paths: Iterable[str | Path]) -> Iterator[list[str]]:
    """Yield whitespace-tokenized sentences (text policy of ``elmo_features.util.text_input``: a corpus skips
    blank lines; invalid UTF-8, NUL bytes and a file without sentences are errors naming the file)."""
    for p in paths:
        for _, tokens in iter_sentences(p, blank_lines="skip"):
            yield tokens


def _text_size(path: Path) -> int:
    """The bytes of text a training file holds: its size, or for .gz the size its trailer records (mod 2**32)."""
    if path.suffix != ".gz":
        return path.stat().st_size
    with open(path, "rb") as f:
        f.seek(-4, 2)
        return int.from_bytes(f.read(4), "little")


def _text_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def warn_copied_files(paths: list[str]) -> None:
    """One warning line for each training file whose text is an earlier one's (a byte copy, or the same text
    gzipped): the corpus would hold it twice. Only files of equal text size are read."""
    seen: dict[int, list[int]] = {}
    digests: dict[int, str] = {}
    for i, f in enumerate(paths):
        try:
            size = _text_size(Path(f).expanduser())
            for j in seen.get(size, []):
                for k in (i, j):
                    digests.setdefault(k, _text_sha256(Path(paths[k]).expanduser()))
                if digests[i] == digests[j]:
                    print(f"warning: train_files[{i}] ({f}) holds the same text as train_files[{j}] ({paths[j]}): "
                          "the corpus counts it twice; list it once unless you mean to weight it", file=sys.stderr)
                    break
        except (OSError, EOFError, gzip.BadGzipFile):  # (an unreadable file is reported where it is read)
            continue
        seen.setdefault(size, []).append(i)


@dataclass
class Corpus:
    """A tokenized corpus as type ids: ``types`` (list of words), ``sentences`` (list of int32 arrays)."""

    types: list[str]
    counts: np.ndarray  # (n_types,) training frequency
    sentences: list[np.ndarray]

    @property
    def n_tokens(self) -> int:
        return int(sum(len(s) for s in self.sentences))


def build_corpus(paths: Iterable[str | Path], max_sentence_length: int) -> Corpus:
    """Read the files once; cut sentences longer than ``max_sentence_length`` into pieces."""
    paths = list(paths)
    warn_copied_files([str(p) for p in paths])
    index: dict[str, int] = {BOS_TOKEN: 0, EOS_TOKEN: 1}
    sentences: list[np.ndarray] = []
    for toks in read_sentences(paths):
        ids = np.fromiter((index.setdefault(w, len(index)) for w in toks), dtype=np.int32, count=len(toks))
        for start in range(0, len(ids), max_sentence_length):
            sentences.append(ids[start : start + max_sentence_length])
    if not sentences:
        raise TextInputError("the training files hold no sentences")
    types = [None] * len(index)
    for w, i in index.items():
        types[i] = w
    counts = np.bincount(np.concatenate(sentences), minlength=len(types)).astype(np.int64)
    return Corpus(types, counts, sentences)


def build_vocab(corpus: Corpus, size: int) -> list[str]:
    """<S>, </S>, <UNK> then the ``size`` most frequent words (ties alphabetical)."""
    order = sorted(range(2, len(corpus.types)), key=lambda i: (-corpus.counts[i], corpus.types[i]))
    words = [corpus.types[i] for i in order[:size] if corpus.types[i] not in SPECIALS]
    return SPECIALS + words


def vocab_sha256(vocab: list[str]) -> str:
    """sha256 of a vocabulary's words in order (what a softmax's rows are: another order is another model)."""
    return hashlib.sha256("\n".join(vocab).encode("utf-8")).hexdigest()


def write_vocab(vocab: list[str], path: str | Path) -> None:
    write_text_atomic(path, "\n".join(vocab) + "\n")


def read_vocab(path: str | Path) -> list[str]:
    """A biLM vocabulary file (one word per line, starting with <S>, </S>, <UNK>; no duplicates)."""
    lines = [(lineno, text) for lineno, text in iter_lines(path) if text]
    words = [text for _, text in lines]
    if words[:3] != SPECIALS:
        raise CheckpointError(f"{path}: a biLM vocabulary must start with {SPECIALS}, got {words[:3]}")
    first: dict[str, int] = {}
    for lineno, w in lines:
        if w in first:
            raise CheckpointError(f"{path}:{lineno}: the word {w!r} is listed twice (first on line {first[w]}); "
                                  "each word must appear once")
        first[w] = lineno
    return words


def type_targets(types: list[str], vocab: list[str]) -> np.ndarray:
    """Map every type id to its softmax id (<UNK> = 2 for words outside the vocabulary)."""
    vid = {w: i for i, w in enumerate(vocab)}
    return np.array([vid.get(w, 2) for w in types], dtype=np.int64)


def type_char_ids(types: list[str]) -> np.ndarray:
    """(n_types, 50) int16 character ids of every type."""
    return np.array([word_to_char_ids(w) for w in types], dtype=np.int16)


def batches_for_epoch(lengths: np.ndarray, batch_tokens: int, seed: int, epoch: int) -> list[np.ndarray]:
    """Deterministic batches of sentence indices: shuffle, bucket by length in pools, shuffle batches."""
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(lengths))
    pool = 200 * max(1, batch_tokens // max(1, int(lengths.mean())))
    batches: list[np.ndarray] = []
    for start in range(0, len(order), pool):
        chunk = order[start : start + pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        cur: list[int] = []
        longest = 0
        for i in chunk:
            n = int(lengths[i]) + 2
            if cur and max(longest, n) * (len(cur) + 1) > batch_tokens:
                batches.append(np.array(cur))
                cur, longest = [], 0
            cur.append(int(i))
            longest = max(longest, n)
        if cur:
            batches.append(np.array(cur))
    perm = rng.permutation(len(batches))
    return [batches[i] for i in perm]


def make_batch(sentences: list[np.ndarray], idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Type ids with boundaries (B, T+2) padded with -1, and lengths (B,) including boundaries."""
    sents = [sentences[i] for i in idx]
    lengths = np.array([len(s) + 2 for s in sents])
    out = np.full((len(sents), lengths.max()), -1, dtype=np.int64)
    for r, s in enumerate(sents):
        out[r, 0] = 0
        out[r, 1 : len(s) + 1] = s
        out[r, len(s) + 1] = 1
    return torch.from_numpy(out), torch.from_numpy(lengths)

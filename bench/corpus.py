"""A fixed synthetic corpus for the throughput benchmarks (no real text; deterministic for a seed).

Sentence lengths mimic CoNLL-2003 English (mean ~14.5 tokens, many very short lines such as
headers and score lines, a long tail to ~110 tokens). Words are random lowercase strings drawn
from a Zipf-distributed vocabulary, so frequent words are short and repeat, as in real text.
"""
from __future__ import annotations

import numpy as np

VOCAB_SIZE = 20_000
ZIPF_EXPONENT = 1.05
MAX_SENTENCE_LENGTH = 113  # the longest CoNLL-2003 training sentence


def _vocabulary(rng: np.random.Generator) -> list[str]:
    """VOCAB_SIZE distinct lowercase strings; rank r gets a length growing slowly with r (2..14 chars)."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < VOCAB_SIZE:
        r = len(words) + 1
        mean_len = 1.5 + 0.8 * np.log1p(r)  # ~2 chars for the top ranks, ~9 for the rarest
        n = int(np.clip(rng.poisson(mean_len - 1) + 1, 1, 14))
        w = "".join(rng.choice(letters, n))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def _sentence_lengths(rng: np.random.Generator, n: int) -> np.ndarray:
    """CoNLL-2003-like lengths: 20% short lines (1-4 tokens), the rest log-normal around 15 tokens."""
    short = rng.random(n) < 0.20
    body = np.exp(rng.normal(np.log(14.5), 0.55, n))
    lengths = np.where(short, rng.integers(1, 5, n), np.rint(body))
    return np.clip(lengths, 1, MAX_SENTENCE_LENGTH).astype(int)


def synthetic_corpus(n_sentences: int, seed: int = 2003) -> list[list[str]]:
    """``n_sentences`` tokenized sentences; the same seed always gives the same corpus."""
    if n_sentences <= 0:
        raise ValueError(f"n_sentences must be positive, got {n_sentences}")
    rng = np.random.default_rng(seed)
    vocab = _vocabulary(rng)
    p = 1.0 / np.arange(1, VOCAB_SIZE + 1) ** ZIPF_EXPONENT
    p /= p.sum()
    lengths = _sentence_lengths(rng, n_sentences)
    ids = rng.choice(VOCAB_SIZE, size=int(lengths.sum()), p=p)
    out, k = [], 0
    for n in lengths:
        out.append([vocab[i] for i in ids[k : k + n]])
        k += n
    return out


def describe(corpus: list[list[str]]) -> dict:
    """Summary statistics (sentences, tokens, mean/max sentence length, mean word length)."""
    lens = np.array([len(s) for s in corpus])
    wl = np.array([len(w) for s in corpus for w in s])
    return {"sentences": len(corpus), "tokens": int(lens.sum()), "mean_len": float(lens.mean()),
            "max_len": int(lens.max()), "mean_word_chars": float(wl.mean())}

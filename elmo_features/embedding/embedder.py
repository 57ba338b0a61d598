"""Embed many tokenized sentences with a biLM: length-sorted batches, input order restored.

Batching policy
- Non-empty sentences are sorted by length (longest first, ties in input order) and packed
  greedily: a batch holds at most ``batch_size`` sentences and at most ``max_tokens_per_batch``
  padded tokens (rows x longest length).
- A sentence longer than ``max_tokens_per_batch`` runs alone in a batch of one. Nothing is cut:
  the biLSTM runs step by step, so memory grows linearly with the sentence length.
- Empty sentences are never sent to the model; they get arrays of shape (L, 0, D).
- A stateless biLM gives the same vectors for a sentence whatever batch it is in (up to float
  rounding, < 1e-6). A *stateful* biLM does not, so it is refused unless ``sort=False``, which
  keeps input order (batches of consecutive sentences, as AllenNLP's ``ElmoEmbedder`` does).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from elmo_features.model.bilm import BiLM
from elmo_features.model.char_ids import checked_batch_to_ids
from elmo_features.embedding.feature_cache import bilm_fingerprint
from elmo_features.model.precision import check_float32, set_precision
from elmo_features.embedding.token_cache import TokenCache
from elmo_features.util import stop
from elmo_features.util.arguments import check_int, check_optional_bool, check_sentences

AUTO_PROGRESS_MIN_SENTENCES = 1000


def plan_batches(lengths: Sequence[int], batch_size: int, max_tokens_per_batch: int,
                 sort: bool = True) -> list[list[int]]:
    """Group the indices of non-empty sentences into batches (see the module docstring)."""
    order = [i for i in range(len(lengths)) if lengths[i] > 0]
    if sort:
        order.sort(key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    cur: list[int] = []
    cur_max = 0
    for i in order:
        n = lengths[i]
        longest = max(cur_max, n)
        if cur and (len(cur) >= batch_size or (len(cur) + 1) * longest > max_tokens_per_batch):
            batches.append(cur)
            cur, longest = [], n
        cur.append(i)
        cur_max = longest
    if cur:
        batches.append(cur)
    return batches


def _check_boundaries(bilm) -> None:
    """An Embedder's words are the sentence's own: a biLM that keeps <S> and </S> would shift them by one."""
    if getattr(bilm, "keep_sentence_boundaries", False):
        raise ValueError("Embedder needs a BiLM with keep_sentence_boundaries=False (its outputs would include <S> and "
                         "</S>, shifting every word by one); set it back to False or use the BiLM directly")


class SentenceEmbedder:
    """What every embedder shares: ``embed_batches`` (defined by the subclass) yields (indices, arrays) as batches
    finish; ``embed_sentences`` puts them back in input order; ``progress`` None = auto (a bar when more than
    1000 sentences and stderr is a terminal)."""

    progress: bool | None = None

    def embed_batches(self, sentences: Sequence[Sequence[str]]) -> Iterator[tuple[list[int], list[np.ndarray]]]:
        raise NotImplementedError

    def _show_progress(self, n: int) -> bool:
        if self.progress is not None:
            return bool(self.progress)
        return n > AUTO_PROGRESS_MIN_SENTENCES and sys.stderr.isatty()

    def embed_sentences(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Float32 arrays (L, n_i, D), one per sentence, in input order (``sentences``: any iterable of token
        lists, e.g. a generator)."""
        if not isinstance(sentences, (str, bytes)) and not hasattr(sentences, "__len__"):
            sentences = check_sentences(sentences)  # (a generator read once; a non-iterable named)
        out: list[np.ndarray | None] = [None] * len(sentences)
        for idx, arrays in self.embed_batches(sentences):
            for i, a in zip(idx, arrays):
                out[i] = a
        return out  # type: ignore[return-value]

    def embed_sentence(self, sentence: Sequence[str]) -> np.ndarray:
        """One sentence -> (L, n, D)."""
        return self.embed_sentences([sentence])[0]


def _as_bilm(bilm) -> BiLM:
    """A BiLM, or one named as ``resolve_bilm`` takes it (a model name, a folder, {"options", "weights"})."""
    if isinstance(bilm, BiLM):
        check_float32(bilm, "Embedder")
        return bilm
    if isinstance(bilm, (str, Path, Mapping)):
        from elmo_features.formats.default_model import resolve_bilm

        return resolve_bilm(bilm)
    raise TypeError(f"bilm must be a BiLM (load_bilm / resolve_bilm), a model name or a folder, got "
                    f"{type(bilm).__name__}: {repr(bilm)[:40]}")


class Embedder(SentenceEmbedder):
    """Runs a frozen biLM over many sentences and returns per-sentence layer arrays.

    bilm: a BiLM, or a spec ``resolve_bilm`` takes ("default", a preset, a folder, {"options", "weights"}).

    ``embed_sentences(sentences)`` -> list of float32 arrays (L, n_i, D) in input order.
    ``embed_batches(sentences)`` yields (indices, arrays) per batch as they are computed.
    token_cache: True (a new bounded ``TokenCache``), False, or a ``TokenCache`` to share.
    progress: None = auto (a tqdm bar when > 1000 sentences and stderr is a terminal).
    sort: None = sort by length (refused for a stateful biLM), False = keep input order.
    precision: None = the biLM's own (fp32 unless set), or "fp32" / "bf16": sets it on ``bilm`` (checked
    against the device the biLM is on; see ``elmo_features.model.precision``).
    """

    def __init__(self, bilm: BiLM | str | Path, batch_size: int = 64, max_tokens_per_batch: int = 4096,
                 token_cache: bool | TokenCache = True, progress: bool | None = None,
                 sort: bool | None = None, cache_size: int = 100_000, precision: str | None = None):
        from elmo_features.formats.default_model import check_one_model_argument

        check_one_model_argument("Embedder", bilm, batch_size)
        batch_size = check_int(batch_size, "batch_size")
        max_tokens_per_batch = check_int(max_tokens_per_batch, "max_tokens_per_batch")
        if not isinstance(token_cache, TokenCache):
            if not isinstance(token_cache, (bool, np.bool_)):
                raise TypeError(f"token_cache must be a bool or a TokenCache, got {type(token_cache).__name__}: "
                                f"{repr(token_cache)[:40]}")
            token_cache = bool(token_cache)
        progress = check_optional_bool(progress, "progress")
        sort = check_optional_bool(sort, "sort")
        bilm = _as_bilm(bilm)
        _check_boundaries(bilm)
        if getattr(bilm, "stateful", False) and sort is not False:
            raise ValueError(
                "this BiLM is stateful: its outputs depend on which sentences came before in the same "
                "batch row, so length-sorted batching would change them. Load it with stateful=False, "
                "or pass sort=False to embed in input order"
            )
        if precision is not None:
            set_precision(bilm, precision)
        self.bilm = bilm
        self.batch_size = int(batch_size)
        self.max_tokens_per_batch = int(max_tokens_per_batch)
        self.progress = progress
        self.sort = True if sort is None else bool(sort)
        if isinstance(token_cache, TokenCache):
            if token_cache.bilm is not bilm:
                raise ValueError("the TokenCache given was built for a different BiLM")
            self.token_cache: TokenCache | None = token_cache
        else:
            self.token_cache = TokenCache(bilm, max_size=cache_size) if token_cache else None

    @property
    def num_output_layers(self) -> int:
        return self.bilm.num_output_layers

    @property
    def output_dim(self) -> int:
        return self.bilm.output_dim

    def _empty(self) -> np.ndarray:
        return np.zeros((self.num_output_layers, 0, self.output_dim), dtype=np.float32)  # (L, 0, D)

    @property
    def fingerprint(self) -> str:
        """The biLM's fingerprint (the features' cache key)."""
        return bilm_fingerprint(self.bilm)

    def _run(self, batch: list[list[str]]) -> list[np.ndarray]:
        """One model call. batch: B non-empty sentences -> B arrays (L, n_b, D)."""
        _check_boundaries(self.bilm)  # (again: the flag can be switched on after the Embedder was built)
        device = next(self.bilm.parameters()).device
        ids = checked_batch_to_ids(batch).to(device)  # (B, T, 50)
        tok = self.token_cache.lookup(batch).to(device) if self.token_cache is not None else None  # (B, T, P)
        out = self.bilm(ids, token_embeddings=tok)
        layers = out.layers.float().cpu().numpy()  # (L, B, T, D)
        return [np.ascontiguousarray(layers[:, b, : len(s)]) for b, s in enumerate(batch)]  # (L, n_b, D)

    def embed_batches(self, sentences: Sequence[Sequence[str]]) -> Iterator[tuple[list[int], list[np.ndarray]]]:
        """Yield (input indices, arrays (L, n_i, D)) per batch; empty sentences come first."""
        sentences = check_sentences(sentences)
        lengths = [len(s) for s in sentences]
        empty = [i for i, n in enumerate(lengths) if n == 0]
        batches = plan_batches(lengths, self.batch_size, self.max_tokens_per_batch, self.sort)
        bar = tqdm(total=len(sentences), unit="sent", desc="embed", disable=not self._show_progress(len(sentences)))
        try:
            if empty:
                yield empty, [self._empty() for _ in empty]
                bar.update(len(empty))
            for idx in batches:
                stop.check()  # a stop request whose KeyboardInterrupt was swallowed (elmo_features.util.stop)
                with torch.inference_mode():  # not held across the yield: the caller's grad mode is untouched
                    arrays = self._run([sentences[i] for i in idx])
                yield idx, arrays
                bar.update(len(idx))
        finally:
            bar.close()

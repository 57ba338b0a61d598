"""A context-independent token cache: the character CNN runs once per word type.

Layer 0 of ELMo (char CNN + highway + projection) depends only on the word's characters, so its
output can be cached per word type (AllenNLP's ``vocab_to_cache``). ``TokenCache.lookup`` returns
the (B, T, P) token embeddings that ``BiLM.forward(char_ids, token_embeddings=...)`` accepts.

The cache is bounded (least-recently-used words are evicted) and tied to the weights of the biLM
it was built for: call ``clear()`` after changing the weights. The table lives on the biLM's device
(where it was when the cache was built or cleared); ``lookup`` returns tensors on that device.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Iterable, Sequence

import torch

from elmo_features.model.bilm import BiLM
from elmo_features.model.char_ids import word_to_char_ids
from elmo_features.util.arguments import check_int, check_sentences
from elmo_features.util.devices import module_device
from elmo_features.model.precision import precision_of


class TokenCache:
    """Per-word-type cache of the biLM's context-independent token embeddings.

    bilm: the model whose ``char_cnn`` is cached. vocab: optional words to embed up front.
    max_size: the most word types kept (least recently used are evicted first); memory is at most
    max_size x projection_dim floats (100k x 512 = 200 MB for the original ELMo).
    chunk_size: how many new words go through the CNN in one call.
    """

    def __init__(self, bilm: BiLM, vocab: Iterable[str] | None = None, max_size: int = 100_000,
                 chunk_size: int = 1024):
        if not isinstance(bilm, BiLM):
            raise TypeError(f"TokenCache: bilm must be a BiLM (e.g. elmo_features.load_bilm(...)), got "
                            f"{type(bilm).__name__} {bilm!r:.40}")
        if max_size < 1:
            raise ValueError(f"TokenCache max_size must be >= 1, got {max_size}")
        self.bilm = bilm
        self.max_size = int(max_size)
        self.chunk_size = check_int(chunk_size, "TokenCache chunk_size")
        P = bilm.options.projection_dim
        with torch.inference_mode():  # every tensor of the cache lives in inference mode
            self._table = torch.zeros(0, P, dtype=torch.float32, device=module_device(bilm))  # (capacity, P), grows
        self._slots: OrderedDict[str, int] = OrderedDict()  # word -> row of _table, in LRU order
        self._free: list[int] = []
        self._precision = precision_of(bilm)  # a change of the biLM's precision empties the cache
        if vocab is not None:
            if isinstance(vocab, (str, bytes)):  # (a string would be cached character by character)
                raise TypeError(f"TokenCache vocab is a {type(vocab).__name__} ({vocab[:40]!r}); pass a list of words, "
                                "e.g. text.split()")
            words = check_sentences([list(dict.fromkeys(vocab))], "TokenCache vocab")[0]
            if len(words) > self.max_size:
                raise ValueError(f"vocab has {len(words)} word types, more than max_size={self.max_size}")
            self._add(words)

    def __len__(self) -> int:
        return len(self._slots)

    def __contains__(self, word: str) -> bool:
        return word in self._slots

    def clear(self) -> None:
        """Forget every cached word (e.g. after the biLM's weights changed)."""
        self._slots.clear()
        self._free.clear()
        with torch.inference_mode():
            self._table = self._table.new_zeros(0, self._table.shape[1], device=module_device(self.bilm))

    def _cnn(self, words: Sequence[str]) -> torch.Tensor:
        """Run the char CNN on ``words`` in chunks. -> (N, P)"""
        out = []
        device = module_device(self.bilm)
        with torch.inference_mode():
            for s in range(0, len(words), self.chunk_size):
                chunk = words[s : s + self.chunk_size]
                ids = torch.tensor([word_to_char_ids(w) for w in chunk], dtype=torch.long, device=device)  # (n, 50)
                out.append(self.bilm.char_cnn(ids).float().to(self._table.device))  # (n, P)
        return torch.cat(out) if out else self._table.new_zeros(0, self._table.shape[1])

    def _add(self, words: list[str]) -> None:
        """Embed new ``words`` (not yet cached) and store them, evicting old ones as needed."""
        if words:
            with torch.inference_mode():
                self._add_inner(words)

    def _add_inner(self, words: list[str]) -> None:
        emb = self._cnn(words)  # (n, P)
        need = len(words) - len(self._free)
        cap = self._table.shape[0]
        if need > 0 and cap < self.max_size:  # grow geometrically (amortised O(1) copies per word)
            new_cap = min(self.max_size, max(2 * cap, cap + need, 1024))
            self._table = torch.cat([self._table, self._table.new_zeros(new_cap - cap, self._table.shape[1])])
            self._free.extend(range(new_cap - 1, cap - 1, -1))  # pop() hands out low rows first
        while len(self._free) < len(words):  # evict least recently used
            _, slot = self._slots.popitem(last=False)
            self._free.append(slot)
        slots = [self._free.pop() for _ in words]
        self._table[torch.tensor(slots, dtype=torch.long, device=self._table.device)] = emb  # (n, P) rows
        for w, s in zip(words, slots):
            self._slots[w] = s

    def lookup(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """Token embeddings (B, T, P) for a batch of sentences; zeros at padding (an inference tensor)."""
        if isinstance(sentences, (str, bytes)) or any(isinstance(s, (str, bytes)) for s in sentences):
            what = "a str" if isinstance(sentences, (str, bytes)) else "rows that are strings"
            raise TypeError(f"TokenCache.lookup: sentences must be tokenized (list[list[str]]), got {what}; e.g. "
                            "[text.split()]")
        if precision_of(self.bilm) != self._precision:
            self.clear()
            self._precision = precision_of(self.bilm)
        with torch.inference_mode():
            return self._lookup(sentences)

    def _lookup(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        B = len(sentences)
        T = max((len(s) for s in sentences), default=0)
        P = self._table.shape[1]
        types = list(dict.fromkeys(w for s in sentences for w in s))
        if len(types) > self.max_size:  # the batch alone overflows the cache: compute without storing
            emb = self._cnn(types)  # (n_types, P)
            index = {w: k for k, w in enumerate(types)}
        else:
            for w in types:  # mark hits as recently used so the eviction below keeps them
                if w in self._slots:
                    self._slots.move_to_end(w)
            self._add([w for w in types if w not in self._slots])
            emb, index = self._table, self._slots
        rows = torch.zeros(B, T, dtype=torch.long, device=emb.device)  # (B, T) row in emb
        mask = torch.zeros(B, T, dtype=torch.bool, device=emb.device)  # (B, T)
        for b, s in enumerate(sentences):
            if s:
                rows[b, : len(s)] = torch.tensor([index[w] for w in s], dtype=torch.long, device=emb.device)
                mask[b, : len(s)] = True
        out = emb[rows]  # (B, T, P)
        return out * mask.unsqueeze(-1).to(out.dtype) if B and T else out.new_zeros(B, T, P)

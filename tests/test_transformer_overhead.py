"""What the feature cache adds to an embedding pass: the embedder's fingerprint (which hashes the weights' state, a
while for a large encoder) is computed once per cache write, and the weights' state is the exact position-weighted
sum it always was, computed block by block."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from elmo_features import FeatureCache
from elmo_features.embedding import feature_cache
from elmo_features.embedding.feature_cache import _weighted_sum


class CountingEmbedder:
    """A minimal embedder whose fingerprint counts how often it is read."""

    num_output_layers, output_dim = 2, 3

    def __init__(self):
        self.reads = 0

    @property
    def fingerprint(self) -> str:
        self.reads += 1
        return "f" * 64

    def embed_batches(self, sentences):
        yield list(range(len(sentences))), [np.ones((2, len(s), 3), np.float32) for s in sentences]


def test_a_cache_write_reads_the_fingerprint_once(tmp_path):
    emb = CountingEmbedder()
    arrays = FeatureCache(tmp_path).embed(emb, [["a", "b"], ["c"]])
    assert [a.shape for a in arrays] == [(2, 2, 3), (2, 1, 3)]
    assert emb.reads == 1
    emb.reads = 0
    FeatureCache(tmp_path).embed(emb, [["a", "b"], ["c"]])  # read back from the cache
    assert emb.reads == 1


@pytest.mark.parametrize("n", [0, 1, 7, feature_cache._RAMP, feature_cache._RAMP + 3, feature_cache._BLOCK,
                               2 * feature_cache._BLOCK + feature_cache._RAMP + 11])
def test_weighted_sum_is_the_position_weighted_sum(n):
    t = torch.randn(n, generator=torch.Generator().manual_seed(n))
    exact = float(t.double() @ torch.arange(1, n + 1, dtype=torch.float64)) if n else 0.0
    assert _weighted_sum(t) == pytest.approx(exact, rel=1e-12, abs=1e-9)
    if n > 1:  # moving values changes it, not only editing them
        assert _weighted_sum(t.flip(0)) != _weighted_sum(t)


def test_weighted_sum_does_not_depend_on_the_thread_count():
    """The state taken when an encoder loads and the one its fingerprint takes later must agree whatever
    torch.set_num_threads said in between (else the weights look edited: another cache key, a full re-hash)."""
    t = torch.randn(3 * feature_cache._BLOCK + 12345, generator=torch.Generator().manual_seed(0))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _weighted_sum(t)
        torch.set_num_threads(2)
        assert _weighted_sum(t) == one
    finally:
        torch.set_num_threads(threads)


def test_the_tokenizer_backend_gives_the_pieces_of_the_hugging_face_call(tmp_path):
    """Word pieces come from the fast tokenizer's backend (no per-sentence dicts), with its truncation and padding off
    even when tokenizer.json sets them: the same ids and word ids as the Hugging Face call with truncation=False."""
    from encoder_helpers import make_bert
    from elmo_features.encoders import TransformerEmbedder, load_encoder

    enc = load_encoder(str(make_bert(tmp_path / "bert", max_positions=80)))
    enc.tokenizer._tokenizer.enable_truncation(max_length=6)  # (as a tokenizer.json may set it)
    enc.tokenizer._tokenizer.enable_padding(length=12)
    emb = TransformerEmbedder(enc)
    words = [["John", "lives", "in", "Paris"], ["unbelievably", "comfortable", "café", "naïve", "Ωmega", "x"] * 3,
             ["a"], ["", "b"], ["\u200b", "rocks"]]
    got = emb._tokenize(words)
    assert emb._backend() is not None  # (the fast path ran)
    want = enc.tokenizer(words, is_split_into_words=True, add_special_tokens=True, truncation=False, padding=False,
                         verbose=False)
    assert [g[0] for g in got] == want["input_ids"]
    assert [g[1] for g in got] == [want.word_ids(i) for i in range(len(words))]
    assert len(got[1][0]) > 12  # neither truncated to 6 nor padded to 12

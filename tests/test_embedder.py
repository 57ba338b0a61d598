"""Embedder: batching by length, order restored, empty / very long sentences, token cache, stateful refusal."""
import numpy as np
import pytest
import torch

from elmo_features import BiLM, BiLMOptions, Embedder, TokenCache, batch_to_ids
from elmo_features.model.char_ids import BOS_CHAR_IDS, EOS_CHAR_IDS
from elmo_features.embedding.embedder import plan_batches

TINY = {
    "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8], [3, 16]], "n_highway": 1},
    "lstm": {"dim": 16, "projection_dim": 8, "n_layers": 2, "cell_clip": 3, "proj_clip": 3},
}
SENTS = [["a", "b", "c"], [], ["hello", "world"], ["x"] * 9, ["é", "日本", "a"], ["hello"], []]


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def tiny_bilm(seed=0, **kw):
    torch.manual_seed(seed)
    model = BiLM(BiLMOptions.from_dict(TINY), **kw).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    return model


def alone(bilm, sentence):
    with torch.inference_mode():
        return bilm(batch_to_ids([sentence])).layers[:, 0].numpy()  # (L, n, D)


def count_calls(module):
    """Record the shape of every forward input of ``module``."""
    shapes = []
    module.register_forward_hook(lambda m, inp, out: shapes.append(tuple(inp[0].shape)))
    return shapes


def test_outputs_in_input_order_and_batch_invariant():
    bilm = tiny_bilm()
    out = Embedder(bilm, batch_size=2, token_cache=False).embed_sentences(SENTS)
    assert len(out) == len(SENTS)
    for s, a in zip(SENTS, out):
        assert a.dtype == np.float32 and a.shape == (3, len(s), 16)
        if s:
            assert np.abs(a - alone(bilm, s)).max() < 1e-6


def test_sentence_alone_vs_inside_mixed_batch():
    bilm = tiny_bilm()
    s = ["the", "middle", "one"]
    with torch.inference_mode():
        mixed = bilm(batch_to_ids([["a"] * 11, s, ["z"], []])).layers[:, 1, :3].numpy()
    assert np.abs(mixed - alone(bilm, s)).max() < 1e-6


def test_empty_sentences_never_reach_the_model():
    bilm = tiny_bilm()
    calls = count_calls(bilm)
    out = Embedder(bilm).embed_sentences([[], []])
    assert [a.shape for a in out] == [(3, 0, 16), (3, 0, 16)] and calls == []
    out = Embedder(bilm).embed_sentences([[], ["a"], []])
    assert out[1].shape == (3, 1, 16) and calls == [(1, 1, 50)]


def test_plan_batches_respects_limits():
    lengths = [3, 0, 10, 1, 7, 7, 2, 50, 4]
    batches = plan_batches(lengths, batch_size=3, max_tokens_per_batch=20)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == [i for i, n in enumerate(lengths) if n > 0]  # each non-empty once
    assert [lengths[i] for i in flat] == sorted((n for n in lengths if n), reverse=True)
    for b in batches:
        assert len(b) <= 3
        assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 20
    assert [7] in batches  # 50 > 20 tokens: alone
    assert plan_batches(lengths, 100, 10**6, sort=False) == [[0, 2, 3, 4, 5, 6, 7, 8]]


def test_very_long_sentence_runs_alone():
    bilm = tiny_bilm()
    calls = count_calls(bilm)
    long = [f"w{i % 97}" for i in range(2000)]
    out = Embedder(bilm, batch_size=8, max_tokens_per_batch=512).embed_sentences([["a", "b"], long, ["c"]])
    assert out[1].shape == (3, 2000, 16) and np.isfinite(out[1]).all()
    assert (1, 2000, 50) in calls and len(calls) == 2
    assert np.abs(out[0] - alone(bilm, ["a", "b"])).max() < 1e-6


def test_token_cache_matches_uncached_and_runs_cnn_once_per_type():
    bilm = tiny_bilm()
    boundary = {tuple(BOS_CHAR_IDS), tuple(EOS_CHAR_IDS)}
    cnn_words = []
    bilm.char_cnn.register_forward_hook(
        lambda m, inp, out: cnn_words.extend(tuple(r) for r in inp[0].tolist() if tuple(r) not in boundary))
    cached = Embedder(bilm, batch_size=2)
    got = cached.embed_sentences(SENTS)
    types = {w for s in SENTS for w in s}
    assert len(cnn_words) == len(types) == len(cached.token_cache)
    cached.embed_sentences(SENTS[::-1])  # all known: no new CNN work
    assert len(cnn_words) == len(types)
    ref = Embedder(bilm, batch_size=2, token_cache=False).embed_sentences(SENTS)
    for a, b in zip(got, ref):
        assert a.shape == b.shape and (a.size == 0 or np.abs(a - b).max() < 1e-6)


def test_token_cache_is_bounded():
    bilm = tiny_bilm()
    cache = TokenCache(bilm, max_size=4)
    sents = [[f"w{i}", f"w{i + 1}"] for i in range(12)] + [[f"v{i}" for i in range(9)]]  # last: 9 types > 4
    got = Embedder(bilm, batch_size=1, token_cache=cache, sort=False).embed_sentences(sents)
    assert len(cache) <= 4
    ref = Embedder(bilm, batch_size=1, token_cache=False).embed_sentences(sents)
    assert max(np.abs(a - b).max() for a, b in zip(got, ref)) < 1e-6
    with pytest.raises(ValueError, match="max_size"):
        TokenCache(bilm, vocab=["a", "b", "c"], max_size=2)


def test_stateful_bilm_is_refused_unless_input_order():
    bilm = tiny_bilm(stateful=True)
    with pytest.raises(ValueError, match="stateful.*sort=False"):
        Embedder(bilm)
    out = Embedder(bilm, sort=False).embed_sentences([["a", "b"], ["c"]])
    assert [a.shape for a in out] == [(3, 2, 16), (3, 1, 16)]


def test_grad_mode_of_caller_is_untouched_and_bad_input_rejected():
    bilm = tiny_bilm()
    for idx, arrays in Embedder(bilm, batch_size=1).embed_batches([["a"], ["b", "c"]]):
        assert not torch.is_inference_mode_enabled() and torch.is_grad_enabled()
    with pytest.raises(TypeError, match="sentence 1 is a str"):
        Embedder(bilm).embed_sentences([["ok"], "not tokenized"])
    with pytest.raises(ValueError, match="keep_sentence_boundaries"):
        Embedder(tiny_bilm(keep_sentence_boundaries=True))
    assert not Embedder(bilm)._show_progress(5000)  # auto: off when stderr is not a terminal (pytest)
    assert Embedder(bilm, progress=True)._show_progress(1)

"""Feature sources: ELMo layer/mix against the biLM itself, disk cache reuse, static OOV, concat; metrics."""
from __future__ import annotations

import pickle
import random
from dataclasses import replace

import numpy as np
import pytest
import torch

from elmo_features import load_bilm
from test_tasks_helpers import elmo_section, make_bilm, make_glove
from elmo_tasks.components import resolve_component
from elmo_tasks.data.tag_schemes import convert_tags, tags_to_spans
from elmo_tasks.features.base import FeatureContext, build_features
from elmo_tasks.metrics import classification_scores, span_f1, token_accuracy
from elmo_tasks.registry import FEATURES

SENTS = [["John", "lives", "in", "Paris"], ["Acme", "rocks"], ["the"]]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("feat")
    opts, weights = make_bilm(tmp / "bilm")
    return {"options": opts, "weights": weights, "glove": make_glove(tmp / "glove.txt"), "tmp": tmp}


def build(section: dict, cache_dir=None, context=None):
    return build_features(resolve_component(FEATURES, section, "features"),
                          context or FeatureContext(cache_dir=cache_dir, progress=False))


def batch_of(source, sentences, split="test"):
    items = source.precompute(sentences, split)
    lengths = torch.tensor([len(s) for s in sentences])
    T = int(lengths.max())
    mask = torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)
    return source(source.collate(items, T), mask), mask


def test_elmo_layer_and_mix_equal_the_bilm_outputs(env):
    from elmo_features import batch_to_ids

    bilm = load_bilm(env["options"], env["weights"])
    with torch.no_grad():
        ref = bilm(batch_to_ids(SENTS))  # layers (L, B, T, D)
    x1, mask = batch_of(build(elmo_section(env, layer=1)), SENTS)
    assert x1.shape == (3, 4, 16)
    assert torch.allclose(x1[mask], ref.layers[1][mask], atol=1e-5)
    src = build(elmo_section(env, mix={"name": "scalar", "initial": [1.0, 0.0, -1.0]}))
    with torch.no_grad():
        src.mix.gamma.fill_(0.5)
        xm, _ = batch_of(src, SENTS)
    w = torch.softmax(torch.tensor([1.0, 0.0, -1.0]), 0)
    expected = 0.5 * (w[0] * ref.layers[0] + w[1] * ref.layers[1] + w[2] * ref.layers[2])
    assert torch.allclose(xm[mask], expected[mask], atol=1e-5)
    avg = build(elmo_section(env, mix={"name": "average"}))
    assert not any(p.requires_grad for p in avg.parameters())
    assert src.report()["mix_weights"] == pytest.approx(w.tolist(), abs=1e-5)
    with pytest.raises(Exception, match="layer: 3 is out of range; this biLM has layers 0..2"):
        build(elmo_section(env, layer=3))


def test_frozen_features_are_cached_on_disk_and_reused(env, tmp_path):
    cache = tmp_path / "cache"
    ctx = FeatureContext(cache_dir=cache, progress=False)
    src = build(elmo_section(env), context=ctx)
    first = src.precompute(SENTS, "train")
    files = sorted(cache.glob("*.hdf5"))
    assert len(files) == 1
    stamp = files[0].stat().st_mtime_ns
    ctx.memo.datasets.clear()  # forget the in-memory copies (not the loaded biLM): the next read must come from disk
    ctx.memo.sentences.clear()
    calls = []
    orig = src._bilm.forward
    src._bilm.forward = lambda *a, **k: calls.append(1) or orig(*a, **k)
    try:
        other = build(elmo_section(env, layer=0), context=ctx)  # another source, same model (the memo's)
        assert other._bilm is src._bilm
        again = other.precompute(SENTS, "train")
    finally:
        del src._bilm.forward
    assert calls == [] and files[0].stat().st_mtime_ns == stamp
    assert all((a[0] == b).all() for a, b in zip(first, again))


def test_memo_lives_on_the_context(env):
    """In-memory caches belong to a FeatureContext (shared by its runs and by dataclasses.replace copies),
    not to the process: another context loads and embeds afresh; a pickled context arrives empty."""
    ctx = FeatureContext(progress=False)
    a = build(elmo_section(env, layer=1), context=ctx)
    first = a.embed(SENTS)  # (L, n_i, D) per sentence
    fold = a.embed(SENTS[1:])  # a subset of embedded sentences (a cross-validation fold): reused
    assert all(x is y for x, y in zip(fold, first[1:]))
    b = build(elmo_section(env, layer=2), context=replace(ctx, progress=None))
    assert b._bilm is a._bilm and b.embed(SENTS) is first
    fresh = build(elmo_section(env, layer=1))  # its own context and memo
    assert fresh._bilm is not a._bilm
    again = fresh.embed(SENTS)
    assert again is not first and all(np.array_equal(x, y) for x, y in zip(again, first))
    copy = pickle.loads(pickle.dumps(ctx))
    assert copy.memo is not ctx.memo and not copy.memo.models and not copy.memo.sentences


def test_static_oov_rate_and_concat_dims(env):
    src = build({"name": "static", "path": str(env["glove"])})
    x, mask = batch_of(src, SENTS)
    assert x.shape == (3, 4, 6)
    assert torch.all(x[1, 0] == 0) and src.report()["oov_rate"] == {"test": 2 / 7}  # "Acme", "rocks"
    cat = build({"name": "concat", "sources": [{"name": "static", "path": str(env["glove"])},
                                               elmo_section(env, layer=2)]})
    xc, _ = batch_of(cat, SENTS)
    assert xc.shape == (3, 4, 6 + 16) and torch.equal(xc[..., :6], x)
    assert [r["name"] for r in cat.report()["sources"]] == ["static", "elmo"]


def test_span_f1_is_strict_and_scheme_aware():
    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    assert span_f1(gold, gold, "BIO")["f1"] == 1.0
    # an entity starting with I- is not a valid span in strict mode (conlleval would accept it)
    pred = [["I-PER", "I-PER", "O", "B-LOC"]]
    assert span_f1(gold, pred, "BIO") == pytest.approx({"precision": 1.0, "recall": 0.5, "f1": 2 / 3})
    bioes_gold = [["B-PER", "E-PER", "O", "S-LOC"]]
    assert span_f1(bioes_gold, [["B-PER", "I-PER", "O", "S-LOC"]], "BIOES")["recall"] == 0.5
    assert convert_tags(["I-PER", "I-PER", "B-PER", "O", "I-LOC"], "IOB1", "BIO") == ["B-PER", "I-PER", "B-PER", "O", "B-LOC"]
    assert span_f1([["I-PER", "B-PER"]], [["I-PER", "O"]], "IOB1")["f1"] == pytest.approx(2 / 3)
    assert span_f1([["I-PER", "B-PER"]], [["I-PER", "I-PER"]], "IOB1")["f1"] == 0.0  # one span, not two
    assert token_accuracy(gold, pred) == 0.75
    with pytest.raises(ValueError, match="differ in number or length"):
        span_f1(gold, [["O"]], "BIO")


@pytest.mark.parametrize("scheme", ["BIO", "BIOES", "IOB1"])
def test_span_f1_counts_the_spans_the_tag_scheme_module_reads(scheme):
    """seqeval's strict score equals counting the well-formed spans of ``tags_to_spans`` (ill-formed predicted
    chunks included), so the F1 the project reports and the spans its data code reads agree."""
    rng = random.Random(0)
    prefixes = {"BIO": "BI", "IOB1": "BI", "BIOES": "BIES"}[scheme]
    tags = ["O", "O"] + [f"{p}-{t}" for p in prefixes for t in ("PER", "LOC")]
    for _ in range(200):
        gold = [[rng.choice(tags) for _ in range(rng.randint(1, 12))] for _ in range(rng.randint(1, 6))]
        pred = [[rng.choice(tags) for _ in g] for g in gold]
        g_spans = [set(tags_to_spans(t, scheme, strict=False)) for t in gold]
        p_spans = [set(tags_to_spans(t, scheme, strict=False)) for t in pred]
        correct = sum(len(g & p) for g, p in zip(g_spans, p_spans))
        n_gold, n_pred = sum(map(len, g_spans)), sum(map(len, p_spans))
        got = span_f1(gold, pred, scheme)
        assert got["precision"] == pytest.approx(correct / n_pred if n_pred else 0.0, abs=1e-12)
        assert got["recall"] == pytest.approx(correct / n_gold if n_gold else 0.0, abs=1e-12)


def test_classification_scores():
    s = classification_scores(["a", "a", "b", "c"], ["a", "b", "b", "b"])
    assert s["accuracy"] == 0.5
    assert s["macro_f1"] == pytest.approx((2 / 3 + 1 / 2 + 0) / 3)  # F1 of a, b, c


def test_pad_tokens_pads_and_is_64_byte_aligned_whatever_the_heap_did():
    """MKL's GEMM rounds differently for differently aligned inputs, so batches must not inherit NumPy's
    16-byte heap alignment (a run that computed its features trained differently from one reading the cache)."""
    from elmo_tasks.features.base import pad_tokens

    rng = np.random.default_rng(0)
    for n in (1, 3, 70):
        junk = [np.empty(int(k)) for k in rng.integers(1, 5000, 20)]  # stir the heap
        items = [rng.standard_normal((3, int(t), 40)).astype(np.float32) for t in rng.integers(1, 9, n)]
        out = pad_tokens(items, 9)  # (3, n, 9, 40)
        assert out.shape == (3, n, 9, 40) and out.data_ptr() % 64 == 0
        for b, a in enumerate(items):
            assert np.array_equal(out[:, b, : a.shape[1]].numpy(), a) and not out[:, b, a.shape[1]:].any()
        del junk


def test_elmo_precision_bf16_in_a_config(env, tmp_path, monkeypatch):
    """`precision: bf16` reaches the biLM (emulated here), is its own cache entry, and is refused with one
    typed error on a CPU without bf16."""
    from elmo_features.model import precision as P
    from elmo_features.util.errors import ElmoTasksError

    monkeypatch.setattr(P, "bf16_cpu_support", lambda: (False, "Test CPU: no avx512_bf16, no amx_bf16"))
    monkeypatch.delenv(P.EMULATE_ENV, raising=False)
    with pytest.raises(ElmoTasksError, match="AVX512-BF16"):
        build(elmo_section(env, layer=2, precision="bf16"))
    monkeypatch.setenv(P.EMULATE_ENV, "1")
    ctx = FeatureContext(cache_dir=tmp_path / "cache", progress=False)
    fp32 = build(elmo_section(env, layer=2), context=ctx).precompute(SENTS, "test")
    bf16 = build(elmo_section(env, layer=2, precision="bf16"), context=ctx).precompute(SENTS, "test")
    assert len(list((tmp_path / "cache").glob("*.hdf5"))) == 2  # two cache entries, not one reused
    scale = max(float(np.abs(a).max()) for a in fp32)
    err = max(float(np.abs(a - b).max()) for a, b in zip(fp32, bf16))
    assert 0 < err <= 0.02 * scale

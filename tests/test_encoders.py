"""Transformer encoders as frozen feature sources (elmo_features.encoders): alignment, pooling, windows,
determinism, cache keys, safe loading and one-line errors. Tiny random BERT/RoBERTa models built in-process."""
from __future__ import annotations

import random
import time

import numpy as np
import pytest
import torch

from encoder_helpers import make_bert, make_config_only, make_roberta
from elmo_features.encoders import EncoderError, TransformerEmbedder, load_encoder
from elmo_features.encoders.pieces import plan_windows, pool_pieces

SENTS = [["The", "comfortable", "bank", "unbelievably", "sat", "."], ["Paris"], ["a", "dog", "ran", "to", "the", "river"]]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("enc")
    return {"bert": make_bert(tmp / "bert"), "roberta": make_roberta(tmp / "roberta"), "tmp": tmp}


def hand_pooled(enc, words: list[str], how: str) -> np.ndarray:
    """(L, n, D) by hand: one forward pass of the whole sentence, pieces found by the tokenizer's word ids."""
    b = enc.tokenizer([words], is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        hs = enc.model(**b, output_hidden_states=True).hidden_states  # L x (1, P, D)
    wid = b.word_ids(0)
    out = np.zeros((len(hs), len(words), hs[0].shape[-1]), dtype=np.float32)
    for w in range(len(words)):
        idx = [j for j, x in enumerate(wid) if x == w]
        pick = {"mean": idx, "first": idx[:1], "last": idx[-1:]}[how]
        for layer, h in enumerate(hs):
            out[layer, w] = h[0, pick].mean(0).numpy()
    return out


@pytest.mark.parametrize("kind", ["bert", "roberta"])
@pytest.mark.parametrize("how", ["mean", "first", "last"])
def test_pooling_equals_a_hand_computation(models, kind, how):
    enc = load_encoder(str(models[kind]))
    arrays = TransformerEmbedder(enc, subword_pooling=how).embed_sentences(SENTS)
    for s, a in zip(SENTS, arrays):
        assert a.shape == (3, len(s), 16) and a.dtype == np.float32
        np.testing.assert_allclose(a, hand_pooled(enc, s, how), atol=1e-5)
    multi = [w for w, n in zip(SENTS[0], np.bincount([x for x in enc.tokenizer(
        [SENTS[0]], is_split_into_words=True).word_ids(0) if x is not None])) if n > 1]
    assert multi, "the test needs a word of several pieces"


def test_special_tokens_are_left_out_and_alignment_never_shifts(models):
    enc = load_encoder(str(models["bert"]))
    emb = TransformerEmbedder(enc)
    # a zero-width space gives no piece: the word gets zeros and is counted; the words after it keep their vectors
    words = ["the", "\u200b", "cat", "sat"]
    a = emb.embed_sentence(words)
    assert emb.stats.words_without_pieces == 1 and emb.stats.examples == ["'\\u200b'"]
    assert not a[:, 1].any()
    ref = hand_pooled(enc, ["the", "cat", "sat"], "mean")  # the same pieces, so the same vectors
    np.testing.assert_allclose(a[:, [0, 2, 3]], ref, atol=1e-5)


def test_plan_windows_cover_every_word_once_within_the_limit():
    random.seed(1)
    for _ in range(200):
        counts = [random.choice([0, 1, 1, 1, 2, 3]) for _ in range(random.randint(1, 80))]
        window = random.randint(3, 20)
        stride = random.randint(1, window)
        plan = plan_windows(counts, window, stride)
        owned = sorted(w for p in plan for w in p.owns)
        assert owned == list(range(len(counts)))
        for p in plan:
            assert p.start <= min(p.owns) and max(p.owns) < p.end
            assert sum(counts[p.start:p.end]) <= window or p.end - p.start == 1


def test_a_2000_word_sentence_gets_every_word_and_windows_match_short_sentences(models):
    enc = load_encoder(str(models["bert"]))  # 40 positions: 38 pieces per window
    emb = TransformerEmbedder(enc)
    random.seed(0)
    vocab = ["the", "cat", "sat", "on", "mat", "comfortable", "bank", "river", "unbelievably", "."]
    words = [random.choice(vocab) for _ in range(2000)]
    a = emb.embed_sentence(words)
    assert a.shape == (3, 2000, 16) and np.isfinite(a).all()
    assert (np.abs(a).sum(axis=(0, 2)) > 0).all()  # no word left without a vector
    assert emb.stats.windowed_sentences == 1
    counts = [len(enc.tokenizer.tokenize(w)) for w in words]
    plan = plan_windows(counts, emb.window, emb.stride)
    assert len(plan) > 2000 * 1.3 / emb.window  # several overlapping windows
    mid = plan[len(plan) // 2]
    short = emb.embed_sentence(words[mid.start:mid.end])  # the window's context as a sentence of its own
    for w in mid.owns:
        np.testing.assert_allclose(a[:, w], short[:, w - mid.start], atol=1e-5)
    # each word is taken from the window where it has the most context: a middle word is never at an edge
    w = mid.owns[len(mid.owns) // 2]
    assert mid.start < w < mid.end - 1


def test_same_vectors_whatever_batch_and_padding(models):
    enc = load_encoder(str(models["roberta"]))
    alone = [TransformerEmbedder(enc).embed_sentence(s) for s in SENTS]
    long = [["the", "river", "bank"] * 10, ["money"] * 25]
    for batch_size in (1, 2, 64):
        together = TransformerEmbedder(enc, batch_size=batch_size).embed_sentences(long + SENTS)[2:]
        for x, y in zip(alone, together):
            np.testing.assert_allclose(x, y, atol=1e-5)  # the stated tolerance (float rounding of padded matmuls)


def test_frozen_eval_mode_and_no_gradients(models):
    enc = load_encoder(str(models["bert"]))
    assert not enc.model.training and not any(p.requires_grad for p in enc.model.parameters())
    emb = TransformerEmbedder(enc)
    first = emb.embed_sentences(SENTS)
    again = emb.embed_sentences(SENTS)  # dropout is 0.1 in the config: eval mode makes it deterministic
    for x, y in zip(first, again):
        assert np.array_equal(x, y)


def test_layers_option_selects_hidden_states(models):
    enc = load_encoder(str(models["bert"]))
    full = TransformerEmbedder(enc).embed_sentence(SENTS[0])
    sel = TransformerEmbedder(enc, layers=[0, -1]).embed_sentence(SENTS[0])
    np.testing.assert_allclose(sel, full[[0, 2]], atol=1e-6)
    with pytest.raises(EncoderError, match="out of range"):
        TransformerEmbedder(enc, layers=[3])
    with pytest.raises(EncoderError, match="window_pieces"):
        TransformerEmbedder(enc, window_pieces=500)


def test_fingerprint_covers_files_pooling_layers_and_windows(models, tmp_path):
    enc = load_encoder(str(models["bert"]))
    base = TransformerEmbedder(enc).fingerprint
    assert TransformerEmbedder(enc).fingerprint == base and len(base) == 64
    others = [TransformerEmbedder(enc, subword_pooling="first"), TransformerEmbedder(enc, layers=[1, 2]),
              TransformerEmbedder(enc, window_pieces=20), TransformerEmbedder(enc, window_stride=5)]
    fps = {e.fingerprint for e in others}
    assert base not in fps and len(fps) == len(others)
    other = load_encoder(str(make_bert(tmp_path / "other", seed=1)))  # same files but other weights
    assert TransformerEmbedder(other).fingerprint != base
    assert TransformerEmbedder(enc, batch_size=3).fingerprint == base  # batching changes nothing it keys


def test_feature_cache_keys_by_the_encoder_and_reuses_the_file(models, tmp_path):
    from elmo_features import FeatureCache

    enc = load_encoder(str(models["bert"]))
    cache = FeatureCache(tmp_path / "cache")
    a = cache.embed(TransformerEmbedder(enc), SENTS)
    b = cache.embed(TransformerEmbedder(enc), SENTS)
    assert cache.computed == 1 and all(np.array_equal(x, y) for x, y in zip(a, b))
    cache.embed(TransformerEmbedder(enc, subword_pooling="last"), SENTS)
    assert cache.computed == 2


def test_refusals_are_one_clear_line(models, tmp_path, monkeypatch):
    with pytest.raises(EncoderError, match="no such folder"):
        load_encoder(str(tmp_path / "missing"))
    gpt2 = make_config_only(tmp_path / "gpt2", {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]})
    with pytest.raises(EncoderError, match="decoder-only"):
        load_encoder(str(gpt2))
    t5 = make_config_only(tmp_path / "t5", {"model_type": "t5", "is_encoder_decoder": True})
    (t5 / "model.safetensors").write_bytes(b"")
    with pytest.raises(EncoderError, match="encoder-decoder"):
        load_encoder(str(t5))
    (gpt2 / "model.safetensors").write_bytes(b"")
    with pytest.raises(EncoderError, match="decoder-only"):
        load_encoder(str(gpt2))
    # pickled weights are refused unless allowed
    pickled = make_bert(tmp_path / "pickled")
    state = {k: v for k, v in load_encoder(str(pickled)).model.state_dict().items()}
    (pickled / "model.safetensors").unlink()
    torch.save(state, pickled / "pytorch_model.bin")
    with pytest.raises(EncoderError, match="pickled"):
        load_encoder(str(pickled))
    # a hub id while offline: one line, at once
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.time()
    with pytest.raises(EncoderError, match="HF_HUB_OFFLINE"):
        load_encoder("nobody-here/no-such-model")
    assert time.time() - t0 < 10


def test_a_tokenizer_without_word_ids_is_refused(models, monkeypatch):
    import transformers

    class Slow:
        is_fast = False

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", classmethod(lambda cls, *a, **k: Slow()))
    with pytest.raises(EncoderError, match="not a fast tokenizer"):
        load_encoder(str(models["bert"]))


def test_remote_code_stays_off_unless_asked(models, capsys, tmp_path):
    import json
    import shutil

    custom = tmp_path / "custom"
    shutil.copytree(models["bert"], custom)
    cfg = json.loads((custom / "config.json").read_text())
    cfg["auto_map"] = {"AutoModel": "modeling_evil.EvilModel", "AutoConfig": "configuration_evil.EvilConfig"}
    (custom / "config.json").write_text(json.dumps(cfg))
    (custom / "configuration_evil.py").write_text("raise SystemExit('remote code ran')\n")
    enc = load_encoder(str(custom))  # the folder's code is never imported: the built-in BERT class loads it
    assert type(enc.model).__module__.startswith("transformers.")
    assert "trust_remote_code" not in capsys.readouterr().err
    with pytest.raises((EncoderError, SystemExit)):
        load_encoder(str(custom), trust_remote_code=True)
    assert "warning: trust_remote_code is on" in capsys.readouterr().err


def test_pool_pieces_handles_empty_slots():
    hidden = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3)  # (L, N, D)
    idx = torch.tensor([-1, 0, 0, 2])
    mean, counts = pool_pieces(hidden, idx, 3, "mean")
    assert counts.tolist() == [2, 0, 1]
    assert torch.equal(mean[:, 0], hidden[:, 1:3].mean(1)) and not mean[:, 1].any()
    last, _ = pool_pieces(hidden, idx, 3, "last")
    first, _ = pool_pieces(hidden, idx, 3, "first")
    assert torch.equal(last[:, 0], hidden[:, 2]) and torch.equal(first[:, 0], hidden[:, 1])
    assert torch.equal(first[:, 2], hidden[:, 3]) and not first[:, 1].any()


def test_a_word_longer_than_a_window_keeps_its_first_pieces_and_is_counted(models):
    enc = load_encoder(str(models["roberta"]))  # byte-level BPE: a long unknown word becomes many pieces
    emb = TransformerEmbedder(enc)
    long_word = "xq" * 100
    assert len(enc.tokenizer.tokenize(" " + long_word)) > emb.window
    a = emb.embed_sentence(["the", long_word, "end"])
    assert a.shape == (3, 3, 16) and np.isfinite(a).all() and (np.abs(a).sum(axis=(0, 2)) > 0).all()
    assert emb.stats.words_cut == 1 and emb.stats.windowed_sentences == 1

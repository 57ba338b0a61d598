"""The biLM against bilm-tf's reference outputs in AllenNLP's tiny-ELMo fixture (../shared; skipped if absent)."""
import json

import h5py
import numpy as np
import pytest
import torch

from elmo_features import Embedder, TokenCache, batch_to_ids, load_bilm

ATOL, RTOL = 1e-6, 1e-5  # numpy.allclose as in AllenNLP's tests


def _load(fixture_dir, **kw):
    return load_bilm(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5", **kw)


def _batches(fixture_dir):
    """Batch i = (sentences[0][i], sentences[1][i], sentences[2][i]), tokenized."""
    s = json.loads((fixture_dir / "sentences.json").read_text())
    return [[s[k][i].split() for k in range(3)] for i in range(len(s[0]))]


def _expected(fixture_dir, k, i):
    with h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as f:
        d = f[str(i)][...]  # (2, n, 16): forward | backward halves of the top layer
    return np.concatenate([d[0], d[1]], axis=-1)  # (n, 32)


def _check(actual, expected):
    assert actual.shape == expected.shape
    assert np.allclose(actual, expected, atol=ATOL, rtol=RTOL), float(np.abs(actual - expected).max())


def test_stateless_matches_batch_0(fixture_dir):
    torch.set_num_threads(1)
    bilm = _load(fixture_dir)
    batch = _batches(fixture_dir)[0]
    with torch.inference_mode():
        out = bilm(batch_to_ids(batch))
    for k, sent in enumerate(batch):
        _check(out.layers[-1, k, : len(sent)].numpy(), _expected(fixture_dir, k, 0))
        assert not out.mask[k, len(sent):].any()


def test_stateful_matches_all_10_batches(fixture_dir):
    torch.set_num_threads(1)
    bilm = _load(fixture_dir, stateful=True)
    with torch.inference_mode():
        for i, batch in enumerate(_batches(fixture_dir)):
            out = bilm(batch_to_ids(batch))
            for k, sent in enumerate(batch):
                _check(out.layers[-1, k, : len(sent)].numpy(), _expected(fixture_dir, k, i))


def test_embedder_stateful_in_input_order_matches_all_batches(fixture_dir):
    """sort=False keeps batch rows, so a stateful Embedder reproduces the reference carry-over."""
    torch.set_num_threads(1)
    bilm = _load(fixture_dir, stateful=True)
    batches = _batches(fixture_dir)
    flat = [s for b in batches for s in b]
    out = Embedder(bilm, batch_size=3, max_tokens_per_batch=10**6, sort=False).embed_sentences(flat)
    for i in range(len(batches)):
        for k in range(3):
            _check(out[3 * i + k][-1], _expected(fixture_dir, k, i))


def test_token_embeddings_match(fixture_dir):
    """Context-independent embeddings of vocab_test.txt words, via the CNN and via TokenCache."""
    torch.set_num_threads(1)
    bilm = _load(fixture_dir)
    words = (fixture_dir / "vocab_test.txt").read_text(encoding="utf-8").strip().split("\n")
    with h5py.File(fixture_dir / "elmo_token_embeddings.hdf5", "r") as f:
        expected = f["embedding"][...][: len(words)]  # (n_words, 16)
    with torch.inference_mode():
        direct = bilm.char_cnn(batch_to_ids([words])[0]).numpy()  # (n_words, 16)
    _check(direct, expected)
    cached = TokenCache(bilm, vocab=words).lookup([words])[0].numpy()
    _check(cached, expected)
    with torch.inference_mode():  # layer 0 of the biLM is [token; token]
        layer0 = bilm(batch_to_ids([words[:50]])).layers[0, 0].numpy()
    _check(layer0, np.concatenate([expected[:50], expected[:50]], axis=-1))


def test_embedder_matches_batch_0(fixture_dir):
    torch.set_num_threads(1)
    bilm = _load(fixture_dir)
    batch = _batches(fixture_dir)[0]
    out = Embedder(bilm, batch_size=2).embed_sentences(batch)
    for k in range(3):
        _check(out[k][-1], _expected(fixture_dir, k, 0))
    with pytest.raises(ValueError, match="stateful"):
        Embedder(_load(fixture_dir, stateful=True))

"""The static-vector prior (``token_vectors`` extension): training, export, loading, clear errors."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import torch

from elmo_features import batch_to_ids, load_bilm
from elmo_features.model.options import BiLMOptions
from elmo_features.util.errors import ConfigError
from elmo_features.model.token_vectors import TokenVectors, decode_char_ids, select_vectors
from elmo_features.training.data import make_batch, type_char_ids
from elmo_features.training.trainer import Trainer
from elmo_features.training.vectors import VectorFileError, read_vector_table
from elmo_features.formats.weights import WeightFileError

from test_training import _cfg


def _vectors(folder, words=("the", "cat", "dog", "mat", "red", "zebra"), dim=6, seed=0):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    np.save(folder / "vectors.npy", rng.normal(size=(len(words), dim)).astype(np.float32))
    (folder / "words.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    return folder


def test_decode_char_ids_round_trips_unicode_and_truncation():
    words = ["Cat", "naïve", "東京", "x" * 60]
    ids = batch_to_ids([words])[0].numpy()
    assert [decode_char_ids(r) for r in ids] == ["Cat", "naïve", "東京", "x" * 48]
    assert decode_char_ids(np.zeros(50, dtype=np.int64)) is None  # padding token


def test_lookup_lowercases_and_unknown_words_get_zeros():
    tv = TokenVectors(["the", "cat"], np.array([[1.0, 2.0], [3.0, 4.0]]), lowercase=True)
    out = tv(batch_to_ids([["The", "CAT", "zebra"]])[0])  # (3, 2)
    assert out.tolist() == [[1.0, 2.0], [3.0, 4.0], [0.0, 0.0]]
    cased = TokenVectors(["the"], np.array([[1.0, 2.0]]), lowercase=False)
    assert cased(batch_to_ids([["The"]])[0]).tolist() == [[0.0, 0.0]]


def test_select_keeps_vocabulary_rows_only_and_scales():
    words, mat = ["the", "cat", "dog"], np.array([[2.0, 0.0], [0.0, 2.0], [4.0, 4.0]])
    kept, sel = select_vectors(["<S>", "The", "the", "cat"], words, mat)
    assert kept == ["the", "cat"]
    assert np.allclose(sel * np.array([[2.0, 0.0], [0.0, 2.0]]).std(), [[2.0, 0.0], [0.0, 2.0]])


def test_train_export_load_gives_identical_layers(tmp_path):
    vec = _vectors(tmp_path / "vec")
    tr = Trainer(_cfg(tmp_path, max_train_tokens=600, token_vectors=str(vec)), progress=False)
    tr.run()
    exp = tmp_path / "run" / "export"
    opts = json.loads((exp / "options.json").read_text())
    assert opts["token_vectors"]["dim"] == 6 and opts["token_vectors"]["n_words"] == 5  # no 'zebra' in the corpus
    bilm = load_bilm(exp / "options.json", exp / "weights.hdf5")
    sents = [["The", "red", "cat", "sat"], ["a", "dog", "ran", "under", "the", "mat"], ["unseen"]]
    model = tr.model.eval()
    with torch.no_grad():
        want = model.bilm(batch_to_ids(sents)).layers
        got = bilm(batch_to_ids(sents)).layers  # (L, B, T, D)
        assert torch.allclose(want, got, atol=1e-6, rtol=0)
        # the vectors matter: zeroing them changes the token layer of known words only
        saved = bilm.char_cnn.token_vectors.table.clone()
        bilm.char_cnn.token_vectors.table.zero_()
        bilm.char_cnn._fast_weights = None
        zeroed = bilm(batch_to_ids(sents)).layers
        bilm.char_cnn.token_vectors.table.copy_(saved)
        assert not torch.allclose(zeroed[0, 0, 2], got[0, 0, 2])  # "cat"
        assert torch.allclose(zeroed[0, 2, 0], got[0, 2, 0], atol=1e-6)  # "unseen"
        # training path (type rows precomputed) == runtime path (rows decoded from characters)
        index = {"<S>": 0, "</S>": 1}
        ids = [np.array([index.setdefault(w, len(index)) for w in s], dtype=np.int32) for s in sents]
        chars = torch.from_numpy(type_char_ids(list(index)))
        type_ids, lengths = make_batch(ids, np.arange(len(ids)))
        top = model.hidden_states(type_ids, lengths, chars, model.bilm.char_cnn.token_vectors.rows(chars))
        for i, s in enumerate(sents):
            assert torch.allclose(top[i, 1 : len(s) + 1], got[-1, i, : len(s)], atol=1e-6)


def test_resume_with_other_vectors_is_refused(tmp_path, monkeypatch):
    vec = _vectors(tmp_path / "vec")
    cfg = _cfg(tmp_path, max_train_tokens=600, token_vectors=str(vec))
    tr = Trainer(cfg, progress=False)
    tr._stop = True
    tr.run()
    _vectors(tmp_path / "vec", seed=1)  # the file changes under the run
    with pytest.raises(ValueError, match="other token vectors"):
        Trainer(cfg, resume=True, progress=False)


def test_bad_vector_files_fail_clearly(tmp_path):
    with pytest.raises(VectorFileError, match="words.txt not found"):
        (tmp_path / "v").mkdir()
        np.save(tmp_path / "v" / "vectors.npy", np.zeros((2, 3), np.float32))
        read_vector_table(tmp_path / "v")
    with pytest.raises(VectorFileError, match="3-dimensional vectors, the config says 50"):
        (tmp_path / "v" / "words.txt").write_text("a\nb\n")
        read_vector_table(tmp_path / "v", dim=50)
    txt = tmp_path / "g.txt"
    txt.write_text("a 1 2 3\nb 1 2\n")
    with pytest.raises(VectorFileError, match="line 2: 2 values, expected 3"):
        read_vector_table(txt)


def test_loader_refuses_mismatched_extension(tmp_path):
    vec = _vectors(tmp_path / "vec")
    tr = Trainer(_cfg(tmp_path, max_train_tokens=300, token_vectors=str(vec)), progress=False)
    tr.run()
    exp = tmp_path / "run" / "export"
    opts = json.loads((exp / "options.json").read_text())
    del opts["token_vectors"]
    (tmp_path / "plain.json").write_text(json.dumps(opts))
    with pytest.raises(WeightFileError, match="no 'token_vectors' block"):
        load_bilm(tmp_path / "plain.json", exp / "weights.hdf5")
    opts["token_vectors"] = {"dim": 6, "n_words": 5, "lowercase": "yes"}
    with pytest.raises(ConfigError, match="token_vectors.lowercase: expected true or false"):
        BiLMOptions.from_dict(opts)
    opts["token_vectors"] = {"dim": 6, "n_words": 5, "mystery": 1}
    with pytest.raises(ConfigError, match="unknown key.*valid keys"):
        BiLMOptions.from_dict(opts)
    with h5py.File(exp / "weights.hdf5", "a") as f:
        del f["token_vectors/words"]
    with pytest.raises(WeightFileError, match="token_vectors/words"):
        load_bilm(exp / "options.json", exp / "weights.hdf5")


def test_fingerprint_sees_the_token_vectors(tmp_path):
    from elmo_features import bilm_fingerprint

    vec = _vectors(tmp_path / "vec")
    tr = Trainer(_cfg(tmp_path, max_train_tokens=300, token_vectors=str(vec)), progress=False)
    tr.run()
    exp = tmp_path / "run" / "export"
    a = load_bilm(exp / "options.json", exp / "weights.hdf5")
    b = load_bilm(exp / "options.json", exp / "weights.hdf5")
    assert bilm_fingerprint(a) == bilm_fingerprint(b)
    b.char_cnn.token_vectors.table[0, 0] += 1.0
    assert bilm_fingerprint(a) != bilm_fingerprint(b)

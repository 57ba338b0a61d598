"""FeatureCache: computed once per (model, sentences, dtype), read back from HDF5, lazy access."""
import pickle

import h5py
import numpy as np
import pytest
import torch

from elmo_features import BiLM, BiLMOptions, Embedder, FeatureCache, bilm_fingerprint, load_bilm, save_bilm

TINY = {
    "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8]], "n_highway": 1},
    "lstm": {"dim": 8, "projection_dim": 4, "n_layers": 2, "cell_clip": 3, "proj_clip": 3},
}
SENTS = [["a", "b", "c"], [], ["ünï", "côdé"], ["x"] * 6]


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def tiny_bilm(seed=0):
    torch.manual_seed(seed)
    model = BiLM(BiLMOptions.from_dict(TINY)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    return model


def counted(bilm):
    calls = []
    bilm.register_forward_hook(lambda *a: calls.append(1))
    return calls


def test_second_call_reads_from_disk(tmp_path):
    bilm = tiny_bilm()
    calls = counted(bilm)
    emb = Embedder(bilm, batch_size=2)
    cache = FeatureCache(tmp_path / "c")
    first = cache.embed(emb, SENTS)
    n_calls = len(calls)
    assert n_calls > 0 and cache.computed == 1
    direct = Embedder(bilm, batch_size=2).embed_sentences(SENTS)
    second = FeatureCache(tmp_path / "c").embed(emb, [list(s) for s in SENTS])
    assert len(calls) == 2 * n_calls  # only the direct run above, none for the cached read
    for a, b, c in zip(first, second, direct):
        assert a.dtype == np.float32 and a.shape == c.shape and np.array_equal(a, b) and np.array_equal(a, c)
    files = list((tmp_path / "c").iterdir())
    assert len(files) == 1 and files[0].suffix == ".hdf5"  # no temp files left behind
    with h5py.File(files[0], "r") as f:
        assert sorted(f.keys()) == ["0", "1", "2", "3", "crc32", "lengths"] and f["1"].shape == (3, 0, 8)
        assert f["lengths"][...].tolist() == [len(s) for s in SENTS]  # what each array's shape is checked against


def test_key_depends_on_model_tokens_and_dtype(tmp_path):
    bilm = tiny_bilm()
    emb, cache = Embedder(bilm), FeatureCache(tmp_path)
    base = cache.path_for(emb, [["a b"], ["c"]])
    assert cache.path_for(emb, [["a", "b"], ["c"]]) != base  # token boundaries matter
    assert cache.path_for(emb, [["a b", "c"]]) != base  # sentence boundaries matter
    assert cache.path_for(emb, [["a b"], ["c"]], dtype="float16") != base
    assert cache.path_for(Embedder(tiny_bilm(seed=1)), [["a b"], ["c"]]) != base
    fp = bilm_fingerprint(bilm)
    with torch.no_grad():
        bilm.char_cnn.projection.bias.add_(1.0)  # weights changed in place -> new fingerprint
    assert bilm_fingerprint(bilm) != fp and cache.path_for(emb, [["a b"], ["c"]]) != base
    with pytest.raises(ValueError, match="float32"):
        cache.path_for(emb, SENTS, dtype="int8")


def test_fingerprint_is_about_content_not_object(tmp_path):
    bilm = tiny_bilm()
    save_bilm(bilm, tmp_path / "o.json", tmp_path / "w.hdf5")
    a = load_bilm(tmp_path / "o.json", tmp_path / "w.hdf5")
    b = load_bilm(tmp_path / "o.json", tmp_path / "w.hdf5")
    assert bilm_fingerprint(a) == bilm_fingerprint(b) != bilm_fingerprint(tiny_bilm(seed=3))
    assert len(bilm_fingerprint(a)) == 64


def test_float16_storage(tmp_path):
    bilm = tiny_bilm()
    cache = FeatureCache(tmp_path)
    emb = Embedder(bilm)
    half = cache.embed(emb, SENTS, dtype="float16")
    full = cache.embed(emb, SENTS)
    assert cache.computed == 2 and all(h.dtype == np.float32 for h in half)
    with h5py.File(cache.path_for(emb, SENTS, dtype="float16"), "r") as f:
        assert f["0"].dtype == np.float16
    for h, x in zip(half, full):
        np.testing.assert_allclose(h, x, rtol=2e-3, atol=2e-3)


def test_lazy_features(tmp_path):
    bilm = tiny_bilm()
    emb = Embedder(bilm)
    eager = FeatureCache(tmp_path).embed(emb, SENTS)
    with FeatureCache(tmp_path).embed_lazy(emb, SENTS) as lazy:
        assert len(lazy) == 4 and lazy.num_output_layers == 3 and lazy.output_dim == 8
        assert np.array_equal(lazy[2], eager[2]) and np.array_equal(lazy[-1], eager[3])
        assert [x.shape for x in lazy[1:3]] == [(3, 0, 8), (3, 2, 8)]
        with pytest.raises(IndexError, match="out of range"):
            lazy[4]
        clone = pickle.loads(pickle.dumps(lazy))  # reopens its file by path (e.g. in a DataLoader worker)
        assert np.array_equal(clone[0], eager[0])
        clone.close()


def test_failures_leave_no_cache_file(tmp_path):
    bilm = tiny_bilm()
    cache = FeatureCache(tmp_path)
    with pytest.raises(ValueError, match="empty input"):
        cache.embed(Embedder(bilm), [])
    with pytest.raises(TypeError, match="sentence 1 is a str"):
        cache.embed(Embedder(bilm), [["fine"], "not tokenized"])
    assert list(tmp_path.iterdir()) == []

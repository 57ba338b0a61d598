"""Saving and loading biLM weights in the bilm-tf HDF5 layout; errors name datasets and shapes."""
import json

import h5py
import numpy as np
import pytest
import torch

from elmo_features import BiLM, BiLMOptions, ConfigError, WeightFileError, batch_to_ids, load_bilm, save_bilm

TINY = {
    "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8]], "n_highway": 1, "n_characters": 262},
    "lstm": {"dim": 16, "projection_dim": 4, "n_layers": 2, "cell_clip": 3, "proj_clip": 3},
}
SENTS = [["a", "small", "test"], ["b"]]


def _saved(tmp_path, seed=0, **save_kw):
    torch.manual_seed(seed)
    model = BiLM(BiLMOptions.from_dict(TINY))
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
        model.char_cnn.char_embedding.weight[0] = 0  # the padding row is not stored
    o, w = tmp_path / "options.json", tmp_path / "weights.hdf5"
    save_bilm(model, o, w, **save_kw)
    return model, o, w


def _rewrite(path, name, array=None):
    """Replace (or, with array None, delete) one dataset of an HDF5 file."""
    with h5py.File(path, "a") as f:
        del f[name]
        if array is not None:
            f.create_dataset(name, data=array)


def test_round_trip(tmp_path):
    """Exact except the LSTM biases: the file stores bias - 1 (TF's forget bias), rounded in float32."""
    model, o, w = _saved(tmp_path)
    loaded = load_bilm(o, w)
    assert not loaded.training and not any(p.requires_grad for p in loaded.parameters())
    sd, sd2 = model.state_dict(), loaded.state_dict()
    assert sd.keys() == sd2.keys()
    for k in sd:
        if k.endswith("state_linearity.bias"):
            assert torch.allclose(sd[k], sd2[k], rtol=0, atol=1e-7), k
        else:
            assert torch.equal(sd[k], sd2[k]), k
    with torch.inference_mode():
        diff = (model(batch_to_ids(SENTS)).layers - loaded(batch_to_ids(SENTS)).layers).abs().max()
    assert float(diff) < 1e-6
    assert json.loads(o.read_text())["lstm"]["projection_dim"] == 4
    assert not list(tmp_path.glob("*.tmp"))  # atomic writes leave no temp files


def test_float16_file_loads_close(tmp_path):
    model, o, w = _saved(tmp_path, dtype="float16")
    with h5py.File(w, "r") as f:
        assert f["char_embed"].dtype == np.float16
    loaded = load_bilm(o, w)
    assert loaded.char_cnn.char_embedding.weight.dtype == torch.float32
    with torch.inference_mode():
        diff = (model(batch_to_ids(SENTS)).layers - loaded(batch_to_ids(SENTS)).layers).abs().max()
    assert 0 < float(diff) < 0.05


def test_shape_mismatch_names_dataset_and_both_shapes(tmp_path):
    _, o, w = _saved(tmp_path)
    _rewrite(w, "CNN/W_cnn_1", np.zeros((1, 2, 4, 9), np.float32))
    with pytest.raises(WeightFileError) as e:
        load_bilm(o, w)
    msg = str(e.value)
    assert "CNN/W_cnn_1" in msg and "(1, 2, 4, 9)" in msg and "(1, 2, 4, 8)" in msg and str(w) in msg


def test_missing_dataset_is_named(tmp_path):
    _, o, w = _saved(tmp_path)
    _rewrite(w, "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0")
    with pytest.raises(WeightFileError, match=r"missing dataset 'RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0'.*\(16, 4\)"):
        load_bilm(o, w)


def test_layer_count_mismatch(tmp_path):
    _, o, w = _saved(tmp_path)
    opts = json.loads(o.read_text())
    opts["lstm"]["n_layers"] = 3
    o.write_text(json.dumps(opts))
    with pytest.raises(WeightFileError, match=r"2 LSTM layers.*n_layers=3"):
        load_bilm(o, w)


def test_missing_files_and_bad_options(tmp_path):
    _, o, w = _saved(tmp_path)
    with pytest.raises(FileNotFoundError, match="nope.hdf5"):
        load_bilm(o, tmp_path / "nope.hdf5")
    with pytest.raises(ConfigError, match="not found"):
        load_bilm(tmp_path / "nope.json", w)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"char_cnn": TINY["char_cnn"]}))
    with pytest.raises(ConfigError, match="'lstm'"):
        load_bilm(bad, w)

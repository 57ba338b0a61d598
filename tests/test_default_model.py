"""The embedded default biLM ships with the package and loads without any download."""
from __future__ import annotations

import h5py
import numpy as np
import torch
import yaml

from elmo_features import Embedder
from elmo_features.formats.default_model import DEFAULT_MODEL_DIR, load_default_bilm
from conftest import REPO


def test_default_model_matches_its_training_config():
    bilm = load_default_bilm()
    cfg = yaml.safe_load((REPO / "configs" / "bilm" / "default.yaml").read_text())
    o = bilm.options
    assert (o.lstm.dim, o.lstm.projection_dim, o.lstm.n_layers) == (cfg["lstm_dim"], cfg["projection_dim"],
                                                                      cfg["n_layers"])
    assert [list(f) for f in o.char_cnn.filters] == cfg["filters"]
    assert bilm.num_output_layers == cfg["n_layers"] + 1 and bilm.output_dim == 2 * cfg["projection_dim"]
    sizes = {p.parent.name: p.stat().st_size for p in DEFAULT_MODEL_DIR.parent.glob("*/weights.hdf5")}
    assert "default" in sizes and sum(sizes.values()) <= 25e6, f"shipped weights {sizes}: the limit is 25 MB in all"
    with h5py.File(DEFAULT_MODEL_DIR / "weights.hdf5", "r") as f:
        assert "softmax/W" not in f  # the softmax is not shipped
        assert f["CNN_proj/W_proj"].dtype == np.float16  # stored as fp16 ...
    assert all(p.dtype == torch.float32 for p in bilm.parameters())  # ... restored as fp32


def test_default_model_gives_contextual_batch_independent_vectors():
    bilm = load_default_bilm()
    a = ["I", "deposited", "cash", "at", "the", "bank", "."]
    b = ["We", "sat", "on", "the", "river", "bank", "."]
    emb = Embedder(bilm, token_cache=False)
    alone = emb.embed_sentences([a])[0]  # (L, 7, D)
    together = emb.embed_sentences([b, ["x"] * 20, a])
    assert np.abs(alone - together[2]).max() < 1e-6
    # layer 0 is context independent: "bank" is the same in both sentences; the LSTM layers are not
    assert np.allclose(together[0][0, 5], together[2][0, 5], atol=1e-6)
    for k in (1, 2):
        cos = together[0][k, 5] @ together[2][k, 5] / (
            np.linalg.norm(together[0][k, 5]) * np.linalg.norm(together[2][k, 5]))
        assert cos < 0.999, f"layer {k} gives 'bank' the same vector in different contexts"
    assert np.isfinite(together[2]).all()


def test_vocab_ships_with_the_model():
    words = (DEFAULT_MODEL_DIR / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert words[:3] == ["<S>", "</S>", "<UNK>"] and "the" in words[:20]

"""Transformer backbone: options, direction, batch invariance, long-sentence windows, weights round trip."""
from __future__ import annotations

import copy
import json

import h5py
import pytest
import torch
import torch.nn.functional as F

from elmo_features import batch_to_ids, load_bilm
from elmo_features.model.bilm import BiLM
from elmo_features.model.options import BiLMOptions
from elmo_features.util.errors import ConfigError
from elmo_features.model.transformer import TransformerBiEncoder
from elmo_features.formats.weights import WeightFileError, save_bilm

CNN = {"activation": "relu", "embedding": {"dim": 4}, "filters": [[1, 4], [2, 8]], "n_highway": 1,
       "n_characters": 262}
TINY = {"char_cnn": CNN, "backbone": "transformer",
        "transformer": {"dim": 8, "n_layers": 2, "n_heads": 2, "ff_dim": 16, "max_positions": 8, "chunk_overlap": 3}}
LSTM = {"char_cnn": CNN, "lstm": {"dim": 12, "projection_dim": 8, "n_layers": 2, "cell_clip": 3, "proj_clip": 3}}
SENTS = [["the", "cat", "sat"], ["a", "dog", "ran", "quickly", "under", "the", "big", "red", "log", "at", "noon"],
         ["x"], ["one", "two", "three", "four", "five", "six"]]


def _bilm(d=TINY, seed=0) -> BiLM:
    torch.manual_seed(seed)
    return BiLM(BiLMOptions.from_dict(copy.deepcopy(d))).eval()


def test_options_round_trip_and_dims():
    o = BiLMOptions.from_dict(copy.deepcopy(TINY))
    assert (o.backbone, o.lstm, o.projection_dim, o.output_dim, o.num_output_layers) == ("transformer", None, 8, 16, 3)
    assert BiLMOptions.from_dict(o.to_dict()) == o
    assert o.to_dict()["transformer"]["positions"] == "sinusoidal"
    lo = BiLMOptions.from_dict(copy.deepcopy(LSTM))
    assert lo.backbone == "lstm" and "backbone" not in lo.to_dict()  # LSTM files keep today's keys


@pytest.mark.parametrize("change, message", [
    ({"backbone": "gru"}, r"backbone: must be one of 'lstm', 'transformer', got 'gru'"),
    ({"lstm": LSTM["lstm"]}, r"backbone is 'transformer' but there is an 'lstm' block"),
    ({"backbone": "lstm", "lstm": LSTM["lstm"]}, r"has a 'transformer' block but backbone is 'lstm'"),
    ({"transformer": {**TINY["transformer"], "n_head": 2}}, r"transformer: unknown key 'n_head'; valid keys: dim"),
    ({"transformer": {**TINY["transformer"], "n_heads": 3}}, r"multiple of n_heads"),
    ({"transformer": {**TINY["transformer"], "chunk_overlap": 8}}, r"chunk_overlap must be in \[0, max_positions=8\)"),
    ({"transformer": {**TINY["transformer"], "positions": "learned"}},
     r"transformer.positions: must be one of 'sinusoidal'"),
    ({"transformer": {"dim": 8, "n_layers": 2, "n_heads": 2}}, r"missing required key 'ff_dim'"),
])
def test_bad_options_are_clear(change, message):
    with pytest.raises(ConfigError, match=message):
        BiLMOptions.from_dict({**copy.deepcopy(TINY), **change}, source="o.json")


def test_stateful_needs_lstm():
    with pytest.raises(ValueError, match="stateful=True needs the lstm backbone"):
        BiLM(BiLMOptions.from_dict(copy.deepcopy(TINY)), stateful=True)


def test_layers_contract_and_batch_invariance():
    bilm = _bilm()
    with torch.no_grad():
        out = bilm(batch_to_ids(SENTS))
        L, B, T, D = out.layers.shape
        assert (L, B, T, D) == (3, 4, 11, 16) and out.mask.sum().item() == sum(map(len, SENTS))
        assert torch.equal(out.layers[0, :, :, :8], out.layers[0, :, :, 8:])  # layer 0 is [x; x]
        assert out.layers[:, ~out.mask].abs().max() == 0  # padding is zero
        for order in ([2, 0], [3], [1, 3, 0]):  # other batches, other padding
            sub = bilm(batch_to_ids([SENTS[i] for i in order])).layers
            for j, i in enumerate(order):
                n = len(SENTS[i])
                assert torch.allclose(sub[:, j, :n], out.layers[:, i, :n], atol=1e-6, rtol=0)


def test_each_direction_is_a_language_model():
    """Forward vectors at t ignore the words after t; backward vectors ignore the words before t."""
    bilm = _bilm()
    a = ["the", "cat", "sat", "on", "the", "mat"]
    b = a[:3] + ["under", "a", "log"]  # same prefix, different suffix
    c = ["one", "dog"] + a[2:]  # same suffix, different prefix
    with torch.no_grad():
        la, lb, lc = (bilm(batch_to_ids([s])).layers[1:, 0] for s in (a, b, c))  # (2, 6, 16)
    assert torch.allclose(la[:, :3, :8], lb[:, :3, :8], atol=1e-6) and not torch.allclose(la[:, 3:, :8], lb[:, 3:, :8])
    assert not torch.allclose(la[:, :3, 8:], lb[:, :3, 8:])  # backward at t sees the suffix
    assert torch.allclose(la[:, 2:, 8:], lc[:, 2:, 8:], atol=1e-6) and not torch.allclose(la[:, 2:, :8], lc[:, 2:, :8])


def test_long_sentences_run_in_overlapping_windows(monkeypatch):
    """Policy (docs/weights_format.md): windows of W = max_positions tokens every W - chunk_overlap tokens;
    token t takes its vectors from the first window holding it, in each direction's reading order."""
    torch.manual_seed(0)
    opts = BiLMOptions.from_dict(copy.deepcopy(TINY)).transformer  # W = 8, overlap 3, stride 5
    enc = TransformerBiEncoder(opts).eval()
    W, S = 8, 5
    T = 31
    x = torch.randn(2, T, 8)
    lengths = torch.tensor([T, 12])
    seen = []
    real_sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda q, *a, **k: seen.append(q.shape[2]) or real_sdpa(q, *a, **k))
    with torch.no_grad():
        layers, state = enc(x, lengths)
        assert state is None and max(seen) == W  # attention never spans more than W tokens
        for row, n in enumerate(lengths.tolist()):
            for d, stack in enumerate((enc.forward_stack, enc.backward_stack)):
                seq = x[row, :n] if d == 0 else x[row, :n].flip(0)  # the direction's reading order
                for t in range(n):
                    k = 0 if t < W else (t - W) // S + 1
                    assert t - k * S >= min(t, 3)  # at least chunk_overlap tokens of context
                    window = seq[None, k * S : k * S + W]  # (1, <= W, 8)
                    want = stack(window, torch.tensor([window.shape[1]]))[-1][0, t - k * S]
                    pos = t if d == 0 else n - 1 - t
                    got = layers[-1][row, pos, 8 * d : 8 * d + 8]
                    assert torch.allclose(got, want, atol=1e-6), (row, d, t)
        assert layers[-1][1, 12:].abs().max() == 0


def test_very_long_sentence_is_linear_not_a_crash():
    bilm = _bilm()
    bilm.transformer.max_tokens_per_call = 64  # windows run a few at a time
    words = [f"w{i % 50}" for i in range(3000)]
    with torch.no_grad():
        out = bilm(batch_to_ids([words, words[:5]]))
        alone = bilm(batch_to_ids([words])).layers
    assert out.layers.shape == (3, 2, 3000, 16) and torch.isfinite(out.layers).all()
    assert torch.allclose(out.layers[:, 0], alone[:, 0], atol=1e-6)


def test_weights_round_trip_and_backbone_mismatch(tmp_path):
    bilm = _bilm(seed=3)
    save_bilm(bilm, tmp_path / "o.json", tmp_path / "w.hdf5")
    with h5py.File(tmp_path / "w.hdf5") as f:
        assert f["transformer/forward/layer_1/attn/W_qkv"].shape == (8, 24)
        assert f["transformer/backward/layer_0/ff/W_2"].shape == (16, 8)
        assert f["transformer/forward/ln_final/gamma"].shape == (8,) and not any(k.startswith("RNN_") for k in f)
    back = load_bilm(tmp_path / "o.json", tmp_path / "w.hdf5")
    ids = batch_to_ids(SENTS)
    with torch.no_grad():
        assert torch.equal(bilm(ids).layers, back(ids).layers)
    # transformer weights with LSTM options, and LSTM weights with transformer options
    (tmp_path / "lstm.json").write_text(json.dumps(LSTM))
    with pytest.raises(WeightFileError, match="holds a 'transformer' backbone, but its options say backbone 'lstm'"):
        load_bilm(tmp_path / "lstm.json", tmp_path / "w.hdf5")
    save_bilm(_bilm(LSTM), tmp_path / "lo.json", tmp_path / "lw.hdf5")
    with pytest.raises(WeightFileError, match="holds a 'lstm' backbone, but its options say backbone 'transformer'"):
        load_bilm(tmp_path / "o.json", tmp_path / "lw.hdf5")
    three = copy.deepcopy(TINY)
    three["transformer"]["n_layers"] = 3
    (tmp_path / "three.json").write_text(json.dumps(three))
    with pytest.raises(WeightFileError, match="has 2 transformer layers per direction, but the options say n_layers=3"):
        load_bilm(tmp_path / "three.json", tmp_path / "w.hdf5")


def test_inference_path_equals_autograd_path():
    """Without autograd the linear layers run through oneDNN (batch-invariant); with it, nn.Linear."""
    bilm = _bilm(seed=5)
    ids = batch_to_ids(SENTS + [[f"w{i}" for i in range(20)]])  # the last one runs in windows
    slow = bilm(ids).layers
    assert slow.requires_grad
    with torch.no_grad():
        fast = bilm(ids).layers
    assert (fast - slow.detach()).abs().max() < 1e-6


def test_batch_invariance_is_exact_at_a_realistic_width():
    d = copy.deepcopy(TINY)
    d["transformer"].update(dim=64, n_heads=4, ff_dim=256, max_positions=32, chunk_overlap=8)
    bilm = _bilm(d, seed=1)
    sents = [[f"w{(7 * i + j) % 23}" for j in range(n)] for i, n in enumerate([1, 5, 17, 30, 31, 70, 3, 12])]
    with torch.no_grad():
        out = bilm(batch_to_ids(sents)).layers
        for i, s in enumerate(sents):
            alone = bilm(batch_to_ids([s])).layers[:, 0]
            assert torch.allclose(alone, out[:, i, : len(s)], atol=1e-6, rtol=0)

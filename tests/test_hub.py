"""The TF-Hub-style call (elmo_features.hub.ElmoHub): the two signatures, output names and shapes, padding,
``default`` pooling, the 4 trainable scalars; on the embedded default biLM and on the bilm-tf fixture."""
from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch

from elmo_features import batch_to_ids, load_bilm, load_default_bilm
from elmo_features.util.errors import UsageError
from elmo_features.hub import OUTPUTS, ElmoHub

TEXTS = ["the cat is on the mat", "dogs are in the fog"]
TOKENS = [["the", "cat", "is", "on", "the", "mat"], ["dogs", "are", "in", "the", "fog", ""]]


@pytest.fixture(scope="module")
def hub():
    torch.set_num_threads(1)
    return ElmoHub("default", trainable=True)


def test_names_shapes_and_padding(hub):
    D = hub.output_dim
    out = hub({"tokens": TOKENS, "sequence_len": [6, 5]}, signature="tokens", as_dict=True)
    assert set(out) == set(OUTPUTS)
    assert out["word_emb"].shape == (2, 6, D // 2)
    for k in ("lstm_outputs1", "lstm_outputs2", "elmo"):
        assert out[k].shape == (2, 6, D)
    assert out["default"].shape == (2, D)
    for k in ("word_emb", "lstm_outputs1", "lstm_outputs2", "elmo"):
        assert not out[k][1, 5].any() and out[k][1, 4].abs().sum() > 0  # the "" padding is zero
    # sequence_len masks real tokens too: only the first 2 tokens of row 0 count
    short = hub({"tokens": TOKENS, "sequence_len": [2, 5]}, signature="tokens", as_dict=True)
    assert not short["elmo"][0, 2:].any() and short["elmo"].shape == (2, 6, D)
    alone = hub({"tokens": [["the", "cat"]], "sequence_len": [2]}, signature="tokens", as_dict=True)
    assert torch.allclose(short["elmo"][0, :2], alone["elmo"][0], atol=1e-6)


def test_layers_are_the_bilm_layers_and_default_is_the_documented_mean(hub):
    bilm = load_default_bilm()
    with torch.no_grad():
        ref = bilm(batch_to_ids([TOKENS[0], TOKENS[1][:5]])).layers  # (3, 2, 6, D)
    with torch.no_grad():
        hub.mix.weights.copy_(torch.tensor([0.5, -0.3, 0.1]))
        hub.mix.gamma.fill_(1.7)
        out = hub(TEXTS, signature="default", as_dict=True)
    P = hub.output_dim // 2
    assert torch.allclose(out["word_emb"], ref[0, :, :, :P], atol=1e-6)
    assert torch.allclose(ref[0, :, :, :P], ref[0, :, :, P:])  # layer 0 is [t; t]
    assert torch.allclose(out["lstm_outputs1"], ref[1], atol=1e-6)
    assert torch.allclose(out["lstm_outputs2"], ref[2], atol=1e-6)
    w = torch.softmax(torch.tensor([0.5, -0.3, 0.1]), 0)
    weighted = w[0] * ref[0] + w[1] * ref[1] + w[2] * ref[2]  # (2, 6, D), before gamma
    assert torch.allclose(out["elmo"], 1.7 * weighted, atol=1e-5)
    for b, n in enumerate((6, 5)):
        assert torch.allclose(out["default"][b], weighted[b, :n].mean(0), atol=1e-5)
    # as_dict=False gives the default output, as the module does
    assert torch.allclose(hub(TEXTS), out["default"])
    with torch.no_grad():
        hub.mix.weights.zero_()
        hub.mix.gamma.fill_(1.0)


def test_both_signatures_agree(hub):
    a = hub(TEXTS, signature="default", as_dict=True)
    b = hub({"tokens": TOKENS, "sequence_len": [6, 5]}, signature="tokens", as_dict=True)
    for k in OUTPUTS:
        assert torch.allclose(a[k], b[k], atol=1e-6), k
    spaced = hub(["  the cat   is on the mat ", "dogs are in the fog"], signature="default", as_dict=True)
    assert torch.allclose(spaced["elmo"], a["elmo"], atol=1e-6)  # split on spaces, empty pieces dropped


def test_scalars_get_gradients_only_when_trainable():
    frozen = ElmoHub("default", trainable=False)
    assert not any(p.requires_grad for p in frozen.parameters())
    trainable = ElmoHub("default", trainable=True)
    assert [n for n, p in trainable.named_parameters() if p.requires_grad] == ["mix.weights", "mix.gamma"]
    out = trainable(TEXTS, as_dict=True)
    (out["elmo"].sum() + out["default"].sum()).backward()
    assert trainable.mix.weights.grad is not None and trainable.mix.gamma.grad is not None
    assert trainable.mix.weights.grad.abs().sum() > 0 and trainable.mix.gamma.grad.abs() > 0
    assert all(p.grad is None for p in trainable.bilm.parameters())
    assert len(list(trainable.parameters())) - len(list(trainable.bilm.parameters())) == 2  # 3 weights + gamma


def test_bad_inputs_are_one_clear_error(hub):
    with pytest.raises(UsageError, match="1-D list"):
        hub("the cat sat")
    with pytest.raises(UsageError, match="sequence_len\\[1\\]"):
        hub({"tokens": TOKENS, "sequence_len": [6, 7]}, signature="tokens")
    with pytest.raises(UsageError, match="tokens\\[1\\] has an empty or whitespace-only token"):
        hub({"tokens": TOKENS, "sequence_len": [6, 6]}, signature="tokens")
    with pytest.raises(UsageError, match="unknown signature"):
        hub(TEXTS, signature="text")
    empty = hub({"tokens": [[""]], "sequence_len": [0]}, signature="tokens", as_dict=True)
    assert empty["default"].shape == (1, hub.output_dim) and not empty["default"].any()


def test_fixture_weights_match_the_tensorflow_outputs(fixture_dir):
    """On the bilm-tf fixture (stateless: batch 0), lstm_outputs2 is the original TF code's top layer."""
    import json

    torch.set_num_threads(1)
    hub = ElmoHub(load_bilm(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5"))
    s = json.loads((fixture_dir / "sentences.json").read_text())
    batch = [s[k][0] for k in range(3)]
    out = hub(batch, signature="default", as_dict=True)
    assert out["word_emb"].shape[-1] == 16 and out["elmo"].shape[-1] == 32
    for k, sent in enumerate(batch):
        n = len(sent.split())
        with h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as f:
            d = f["0"][...]
        expected = np.concatenate([d[0], d[1]], axis=-1)  # (n, 32)
        assert np.allclose(out["lstm_outputs2"][k, :n].numpy(), expected, atol=1e-6, rtol=1e-5)
        assert not out["lstm_outputs2"][k, n:].any()

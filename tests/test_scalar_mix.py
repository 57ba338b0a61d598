"""ScalarMix: ELMo eq. 1, AllenNLP's batch layer norm, per-token norm, freezing, regularisation, sharing."""
import numpy as np
import pytest
import torch

from elmo_features import BiLM, BiLMOptions, ScalarMix, batch_to_ids

L, B, T, D = 3, 2, 5, 4


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    layers = torch.randn(L, B, T, D, generator=g) * torch.tensor([1.0, 3.0, 0.5]).view(L, 1, 1, 1) + 2.0
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], dtype=torch.bool)  # (B, T)
    return layers, mask


def _softmax(w):
    e = np.exp(w - np.max(w))
    return e / e.sum()


def test_weighted_sum_matches_eq1():
    layers, mask = _inputs()
    mix = ScalarMix(L, initial=[0.5, -1.0, 2.0])
    with torch.no_grad():
        mix.gamma.fill_(1.7)
    want = 1.7 * np.tensordot(_softmax(np.array([0.5, -1.0, 2.0])), layers.numpy(), axes=(0, 0))
    np.testing.assert_allclose(mix(layers, mask).detach().numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mix.normalized_weights().detach().numpy(), _softmax(np.array([0.5, -1.0, 2.0])),
                               rtol=1e-6)
    default = ScalarMix(L)  # zeros -> equal weights, gamma 1 -> the plain mean of the layers
    assert default.gamma.item() == 1.0
    np.testing.assert_allclose(default(list(layers)).detach().numpy(), layers.mean(0).numpy(), rtol=1e-5, atol=1e-6)


def test_batch_layer_norm_matches_allennlp_formula():
    layers, mask = _inputs()
    mix = ScalarMix(L, initial=[0.1, 0.2, 0.3], layer_norm="batch")
    m = mask.numpy()[..., None].astype(np.float64)
    n = m.sum() * D
    want = 0
    for k, w in enumerate(_softmax(np.array([0.1, 0.2, 0.3]))):
        x = layers[k].double().numpy()
        mean = (x * m).sum() / n
        var = (((x * m - mean) * m) ** 2).sum() / n
        want = want + w * (x - mean) / np.sqrt(var + 1e-12)
    got = mix(layers, mask).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # one layer dominating: unmasked values have mean 0, variance 1; padded values do not count
    dominant = ScalarMix(L, initial=[-50.0, 50.0, -50.0], layer_norm="batch")(layers, mask).detach().numpy()
    real = dominant[mask.numpy()]
    assert abs(real.mean()) < 1e-5 and abs(real.var() - 1) < 1e-4
    changed = layers.clone()
    changed[:, 1, 2:] = 1000.0  # padding only
    np.testing.assert_allclose(mix(changed, mask).detach().numpy()[mask.numpy()], got[mask.numpy()], rtol=1e-5,
                               atol=1e-6)
    with pytest.raises(ValueError, match="mask"):
        mix(layers)


def test_token_layer_norm_is_per_token():
    layers, mask = _inputs()
    out = ScalarMix(L, initial=[50.0, -50.0, -50.0], layer_norm="token")(layers, mask).detach().numpy()
    np.testing.assert_allclose(out.mean(-1), 0, atol=1e-5)
    np.testing.assert_allclose(out.var(-1), 1, atol=1e-3)
    mix = ScalarMix(L, initial=[0.3, 0.0, -0.2], layer_norm="token")
    full = mix(layers, mask)
    one = mix(layers[:, :1, :2], mask[:1, :2])  # a token's output does not depend on the rest of the batch
    assert torch.allclose(full[:1, :2], one, atol=1e-6)


def test_trainable_flags_gradients_and_regularization():
    layers, mask = _inputs()
    mix = ScalarMix(L, initial=[1.0, 2.0, -2.0], l2_coef=0.01)
    assert torch.isclose(mix.regularization(), torch.tensor(0.01 * 9.0))
    (mix(layers, mask).sum() + mix.regularization()).backward()
    assert mix.weights.grad is not None and mix.gamma.grad is not None and mix.weights.grad.abs().sum() > 0
    frozen = ScalarMix(L, trainable=False)
    assert not frozen.weights.requires_grad and not frozen.gamma.requires_grad
    assert ScalarMix(L).regularization().item() == 0.0


def test_wrong_counts_and_names_are_errors():
    layers, mask = _inputs()
    with pytest.raises(ValueError, match=r"got 3 layers.*built for 4"):
        ScalarMix(4)(layers, mask)
    with pytest.raises(ValueError, match=r"2 weights.*num_layers is 3"):
        ScalarMix(3, initial=[0.0, 0.0])
    with pytest.raises(ValueError, match="'batch', 'token'"):
        ScalarMix(3, layer_norm="layer")


def test_two_mixes_share_one_bilm_pass():
    torch.manual_seed(0)
    bilm = BiLM(BiLMOptions.from_dict({
        "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8]], "n_highway": 1},
        "lstm": {"dim": 8, "projection_dim": 4, "n_layers": 2}})).eval()
    ids = batch_to_ids([["a", "b", "c"], ["d"]])
    calls = []
    bilm.register_forward_hook(lambda *a: calls.append(1))
    with torch.no_grad():
        out = bilm(ids)
    mix_in, mix_out = ScalarMix(3, initial=[1.0, 0.0, 0.0]), ScalarMix(3, initial=[0.0, 0.0, 1.0], layer_norm="batch")
    a, b = mix_in(out.layers, out.mask), mix_out(out.layers, out.mask)
    (a.sum() + 2 * b.sum()).backward()
    assert len(calls) == 1 and not torch.allclose(a, b)
    assert mix_in.weights.grad.abs().sum() > 0 and mix_out.weights.grad.abs().sum() > 0
    assert torch.allclose(b, ScalarMix(3, initial=[0.0, 0.0, 1.0], layer_norm="batch")(out.layers, out.mask))

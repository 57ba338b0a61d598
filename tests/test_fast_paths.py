"""The inference fast paths (no autograd) of the char CNN, the biLSTM stack and the BiLM give the same
numbers as the autograd paths, on tiny random models with awkward shapes."""
from __future__ import annotations

import pytest
import torch

from elmo_features import BiLM, BiLMOptions, batch_to_ids
from elmo_features.model.char_cnn import CharCNN
from elmo_features.model.char_ids import PADDING_CHARACTER
from elmo_features.model import lstm as lstm_module
from elmo_features.model.lstm import ElmoLstm
from elmo_features.model.options import CharCNNOptions, LstmOptions

TINY = {
    "char_cnn": {"activation": "relu", "embedding": {"dim": 4}, "filters": [[1, 4], [2, 8], [3, 16], [7, 8]],
                 "n_highway": 2, "n_characters": 262, "max_characters_per_token": 50},
    "lstm": {"cell_clip": 3, "dim": 12, "n_layers": 2, "proj_clip": 3, "projection_dim": 6,
             "use_skip_connections": True},
}


def _randomize(module: torch.nn.Module, seed: int, scale: float = 0.5) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * scale)


def _char_ids() -> torch.Tensor:
    """Tokens of many shapes: 1..48 bytes, all-padding tail or none, a token of one repeated id."""
    words = ["a", "of", "the", "x" * 40, "y" * 44, "z" * 46, "q" * 48, "Zürich", "<S>", "</S>", "mid"]
    ids = batch_to_ids([words])[0]  # (n, 50)
    same = torch.full((1, 50), PADDING_CHARACTER + 1, dtype=torch.long)  # one id everywhere: k = 0
    no_pad = torch.randint(1, 262, (3, 50), generator=torch.Generator().manual_seed(3))  # random ids, no run
    return torch.cat([ids, same, no_pad])


def test_char_cnn_fast_path_matches_convolution():
    cnn = CharCNN(CharCNNOptions(embedding_dim=4, filters=((1, 4), (2, 8), (3, 16), (7, 8)), n_highway=2), 6)
    _randomize(cnn, 0)
    ids = _char_ids()
    for group in (1, 3, 64):
        cnn.group_size = group
        with torch.no_grad():
            fast = cnn._pooled_fast(ids)
        slow = cnn._pooled_conv(ids)  # parameters require grad: autograd path
        assert fast.shape == slow.shape == (ids.shape[0], 36)
        assert (fast - slow.detach()).abs().max() < 1e-6
    with torch.no_grad():
        assert cnn._pooled_fast(ids[:0]).shape == (0, 36)


def test_char_cnn_fast_path_follows_weight_updates():
    cnn = CharCNN(CharCNNOptions(embedding_dim=4, filters=((1, 4), (2, 8)), n_highway=1), 6)
    _randomize(cnn, 1)
    ids = _char_ids()
    with torch.no_grad():
        before = cnn(ids)
        cnn.convs[1].weight.mul_(-1.0)  # in-place change must invalidate the cached window weights
        after = cnn(ids)
    assert (before - after).abs().max() > 1e-3
    assert (after - cnn(ids).detach()).abs().max() < 1e-6


def _lstm_case(seed: int):
    lstm = ElmoLstm(6, LstmOptions(dim=12, projection_dim=6, n_layers=2, cell_clip=3, proj_clip=3))
    _randomize(lstm, seed)
    g = torch.Generator().manual_seed(seed + 1)
    lengths = torch.tensor([7, 0, 3, 7, 1, 5])
    B, T = 6, 9  # T longer than every row
    x = torch.randn(B, T, 6, generator=g) * (torch.arange(T).view(1, T) < lengths.view(B, 1)).unsqueeze(-1)
    h0 = torch.randn(2, 2, B, 6, generator=g)
    c0 = torch.randn(2, 2, B, 12, generator=g)
    return lstm, x, lengths, (h0, c0)


@pytest.mark.parametrize("threads", [1, 2])  # 2: the directions run on the two-worker pool
def test_lstm_fast_path_matches_autograd_path(threads):
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        if threads == 2 and "parallel backend: OpenMP" in torch.__config__.parallel_info():
            assert lstm_module._direction_pool() is not None  # the threaded path is the one exercised
        _check_lstm_fast_path()
    finally:
        torch.set_num_threads(saved)


def _check_lstm_fast_path():
    for seed, chunk_rows in ((0, 512), (1, 2), (2, 5)):
        lstm, x, lengths, init = _lstm_case(seed)
        lstm.chunk_rows = chunk_rows
        for state in (None, init):
            slow_out, (slow_h, slow_c) = lstm(x, lengths, state)  # parameters require grad
            assert slow_out[0].requires_grad
            with torch.inference_mode():
                fast_out, (fast_h, fast_c) = lstm(x, lengths, state)
            with torch.no_grad():  # plain no_grad (not inference mode) takes the fast path too
                again = lstm(x, lengths, state)[0]
            assert all(torch.equal(a, b) for a, b in zip(again, fast_out))
            assert not fast_out[0].requires_grad
            for a, b in zip(fast_out, slow_out):
                assert a.shape == b.shape == (6, 9, 12)
                assert (a - b.detach()).abs().max() < 1e-6
            assert (fast_h - slow_h.detach()).abs().max() < 1e-6
            assert (fast_c - slow_c.detach()).abs().max() < 1e-6
            if state is not None:  # the empty row keeps its initial state
                assert torch.equal(fast_h[:, :, 1], state[0][:, :, 1])


def test_bilm_inference_equals_autograd_forward():
    bilm = BiLM(BiLMOptions.from_dict(TINY))
    _randomize(bilm, 5)
    sents = [["a", "b", "c"], ["longer", "sentence", "with", "five", "words"], ["x"], []]
    ids = batch_to_ids(sents)
    slow = bilm(ids)
    assert slow.layers.requires_grad
    with torch.no_grad():
        fast = bilm(ids)
    assert fast.layers.shape == slow.layers.shape == (3, 4, 5, 12)
    assert torch.equal(fast.mask, slow.mask)
    assert (fast.layers - slow.layers.detach()).abs().max() < 1e-6
    assert fast.layers[:, 2, 1:].abs().max() == 0 and fast.layers[:, 3].abs().max() == 0  # padding is zero


def test_packed_linear_matches_linear():
    from elmo_features.model.onednn import PackedLinear

    g = torch.Generator().manual_seed(7)
    w, b = torch.randn(40, 24, generator=g), torch.randn(40, generator=g)
    for bias in (b, None):
        lin = PackedLinear(w, bias)
        for m in (0, 1, 70):
            x = torch.randn(m, 24, generator=g)
            other = torch.randn(m, 40, generator=g)
            with torch.inference_mode():
                y, z = lin(x), lin.add_to(x, other)
            assert y.shape == z.shape == (m, 40)
            if m:
                assert (y - torch.nn.functional.linear(x, w, bias)).abs().max() < 1e-5
                assert (z - (other + x @ w.t())).abs().max() < 1e-5


def test_direction_pool_finds_torchs_openmp_when_another_copy_loaded_first():
    """scikit-learn (pulled in by seqeval) maps its own libgomp; the pool must use torch's, not that one."""
    import subprocess
    import sys

    if "parallel backend: OpenMP" not in torch.__config__.parallel_info():
        pytest.skip("torch is not built with OpenMP here")
    code = ("import sklearn.linear_model, torch; torch.set_num_threads(2); "
            "from elmo_features.model import lstm; print(lstm._direction_pool() is not None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "True", out.stderr[-2000:]


def test_onednn_row_buckets_are_few_and_results_unchanged():
    """PyTorch's oneDNN linear keeps a kernel per distinct row count: rows are padded to few buckets (memory
    bounded), and the padding changes no result."""
    from elmo_features.model.onednn import PackedLinear, onednn_available, padded_rows

    buckets = {padded_rows(m) for m in range(1, 100_001)}
    assert len(buckets) < 170 and all(m <= padded_rows(m) <= m * 1.125 for m in range(1, 5000))
    if not onednn_available():
        pytest.skip("oneDNN linear not available here")
    g = torch.Generator().manual_seed(0)
    w, b = torch.randn(48, 20, generator=g), torch.randn(48, generator=g)
    lin = PackedLinear(w, b)
    for m in (1, 7, 65, 130, 1000):
        x, other = torch.randn(m, 20, generator=g), torch.randn(m, 48, generator=g)
        assert lin(x).shape == (m, 48) and torch.allclose(lin(x), x @ w.t() + b, atol=1e-5)
        assert torch.allclose(lin.add_to(x, other), other + x @ w.t(), atol=1e-5)

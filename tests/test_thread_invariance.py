"""The biLM's features do not depend on the torch thread count: the highway layers' sigmoid runs in blocks that
ATen computes on one thread (``serial_sigmoid_``), so no block is split at a thread boundary, where the vectorised
and the scalar sigmoid round differently."""
from __future__ import annotations

import torch

from elmo_features.model.char_cnn import Highway


def _with_threads(n: int, fn):
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        return fn()
    finally:
        torch.set_num_threads(old)


def test_highway_output_is_the_same_with_one_and_two_threads():
    torch.manual_seed(0)
    hw = Highway(2098, 2).eval()  # the default biLM's width: 2048 filters + 50-d word vectors
    for rows in (1001, 2999, 4097):  # row counts whose halves split a row: the split's tail is where it would differ
        x = torch.randn(rows, 2098)
        with torch.inference_mode():
            one = _with_threads(1, lambda: hw(x))
            two = _with_threads(2, lambda: hw(x))
        assert torch.equal(one, two), (rows, (one - two).abs().max().item())

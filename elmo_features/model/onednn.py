"""Inference-only linear layers through oneDNN (PyTorch's mkldnn backend) with pre-packed weights.

PyTorch's CPU matmul for float32 goes to MKL's sgemm, which on AMD CPUs runs AVX2 kernels; oneDNN
uses the full vector width there and is about twice as fast (measured on this project's 2-core AMD
EPYC machine: 96 vs 211 GFLOP/s on one thread). Results are ordinary float32 GEMMs (different
summation order, so ~1e-7 relative differences from MKL). The private op
``torch.ops.mkldnn._linear_pointwise`` is probed once; where it is missing or wrong, on non-CPU or
non-float32 tensors, or with ``ELMO_TASKS_ONEDNN=0``, plain ``torch.nn.functional.linear`` runs.
Never used with autograd (the packed weights are detached copies).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from elmo_features.util.env import ONEDNN, switch

_AVAILABLE: bool | None = None


def onednn_available() -> bool:
    """Whether oneDNN linear layers can be used (probed once on a small random case)."""
    global _AVAILABLE
    if _AVAILABLE is None:
        _AVAILABLE = _probe()
    return _AVAILABLE


def _probe() -> bool:
    if not switch(ONEDNN, True, "oneDNN's linear layers stay on"):
        return False
    try:
        if not torch.backends.mkldnn.is_available():
            return False
        ops = torch.ops.mkldnn
        g = torch.Generator().manual_seed(0)
        w, x = torch.randn(24, 16, generator=g), torch.randn(5, 16, generator=g)
        b, other = torch.randn(24, generator=g), torch.randn(5, 24, generator=g)
        with torch.no_grad():
            packed = ops._reorder_linear_weight(w, 5)
            y = ops._linear_pointwise(x, packed, b, "none", [], "")
            z = ops._linear_pointwise.binary(x, other, packed, None, "add")
        return bool(torch.allclose(y, F.linear(x, w, b), atol=1e-5)
                    and torch.allclose(z, other + x @ w.t(), atol=1e-5))
    except Exception:  # the op is private: any failure means "not available"
        return False


def padded_rows(m: int) -> int:
    """Row count that ``m`` rows are padded to before a oneDNN GEMM: ``m`` itself up to 64 (the LSTM's recurrent
    step, whose cost is per row), then 8 buckets per octave (at most 12.5% extra rows). PyTorch's oneDNN linear
    keeps a compiled kernel (~0.6 MB) for every distinct row count it meets, so without buckets ``embed``'s
    memory grew with the input until it had seen every batch size (bench/embed_rss.py); with them it stays
    bounded by ~150 shapes (~90 MB)."""
    if m <= 64:
        return m
    step = 1 << (m.bit_length() - 4)
    return (m + step - 1) // step * step


def pad_rows(x: torch.Tensor, rows: int) -> torch.Tensor:
    """(M, n) -> (rows, n) with zero rows appended (contiguous)."""
    if x.shape[0] == rows:
        return x.contiguous()
    return F.pad(x, (0, 0, 0, rows - x.shape[0]))


class PackedLinear:
    """``y = x @ weight.T + bias`` for 2-D inputs, with ``weight`` (out, in) packed once for oneDNN.

    With oneDNN only the packed copy is kept (inputs are then expected on the CPU in float32, like
    the weight); otherwise the plain weight and ``torch.nn.functional.linear``.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None, batch_hint: int = 64):
        with torch.no_grad():
            self.out_features = weight.shape[0]
            self.bias = None if bias is None else bias.detach().contiguous()  # (out,)
            self.onednn = onednn_available() and weight.device.type == "cpu" and weight.dtype == torch.float32
            if self.onednn:
                self.weight = None
                self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), batch_hint)
            else:
                self.weight = weight.detach()  # (out, in)
                self.packed = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(M, in) -> (M, out)."""
        if not self.onednn:
            return F.linear(x, self.weight, self.bias)
        m = x.shape[0]
        if m == 0:
            return x.new_empty(0, self.out_features)
        rows = padded_rows(m)  # bounded set of shapes: see padded_rows
        y = torch.ops.mkldnn._linear_pointwise(pad_rows(x, rows), self.packed, self.bias, "none", [], "")
        return y if rows == m else y[:m]

    def add_to(self, x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        """``other + x @ weight.T`` (bias not applied): (M, in), (M, out) -> new (M, out)."""
        if not self.onednn:
            return torch.addmm(other, x, self.weight.t())
        m = x.shape[0]
        if m == 0:
            return other.clone()
        rows = padded_rows(m)
        y = torch.ops.mkldnn._linear_pointwise.binary(pad_rows(x, rows), pad_rows(other, rows), self.packed, None,
                                                      "add")
        return y if rows == m else y[:m]


def param_key(module: torch.nn.Module) -> tuple:
    """Identifies the current values of a module's parameters (storage and in-place version counters)
    and its inference precision (``elmo_features.model.precision``)."""
    return tuple((p.data_ptr(), _version(p)) for p in module.parameters()) + (
        getattr(module, "_elmo_precision", "fp32"), bool(getattr(module, "_elmo_bf16_emulate", False)))


def _version(p: torch.Tensor):
    """The in-place version counter; an inference tensor (a model loaded under ``torch.inference_mode()``) has none:
    a fresh object, equal to no earlier key (its packed copy is made again each call)."""
    try:
        return p._version
    except RuntimeError:
        return object()

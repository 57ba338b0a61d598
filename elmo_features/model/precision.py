"""Opt-in reduced-precision inference: ``precision="bf16"`` (bf16 matmuls, fp32 everything else).

What bf16 means here (the same definition on every device, so error bounds measured anywhere hold):
- every matmul of the inference path (char CNN windows, highway, projection, each LSTM layer's input,
  recurrent and projection GEMMs, the Transformer's linears) takes bf16 operands: weights are stored
  (and on CPU packed for oneDNN) as bf16 once, activations are rounded to bf16 for the GEMM;
- products are accumulated in fp32, and the GEMM's result is rounded to bf16 (the destination type of
  oneDNN's and cuBLAS's bf16 GEMM), then widened to fp32; biases are added in fp32;
- the LSTM cell state, gate nonlinearities, clipping, highway gates, max-pooling, attention softmax
  and every layer output stay fp32. Outputs are fp32 arrays, as with ``fp32``.
Autograd paths (training) ignore the setting and always run fp32.

Where it runs: CUDA devices, and CPUs with AVX512-BF16 or AMX (``amx_bf16``), where bf16 GEMMs are
faster than fp32 ones. Elsewhere ``set_precision(bilm, "bf16")`` raises ``PrecisionError`` (exit 2 in
the CLI) instead of running slowly: without those instructions bf16 GEMMs are emulated and slower
than fp32. For tests and error measurements, ``force_emulated=True`` or the environment variable
``ELMO_TASKS_BF16_EMULATE=1`` runs the *emulated* path on any CPU: operands rounded to bf16, an
fp32 GEMM (a product of two bf16 numbers is exact in fp32, so this is a bf16 GEMM with fp32
accumulation), the result rounded to bf16. It matches the hardware path up to fp32 summation order.

The precision is part of ``bilm_fingerprint`` (a bf16 feature cache never serves fp32 requests).
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from elmo_features.util.env import switch
from elmo_features.util.errors import ElmoTasksError, UsageError
from elmo_features.model.onednn import PackedLinear, pad_rows, padded_rows

PRECISIONS = ("fp32", "bf16", "reference")  # reference: fp32 in AllenNLP's order of operations (reference_lstm.py)
EMULATE_ENV = "ELMO_TASKS_BF16_EMULATE"
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


class PrecisionError(ElmoTasksError, RuntimeError):
    """The requested precision cannot run fast on this device (e.g. bf16 on a CPU without AVX512-BF16/AMX)."""


@lru_cache(maxsize=1)
def cpu_info() -> tuple[str, frozenset[str]]:
    """(CPU model name, set of CPU flags) from /proc/cpuinfo; ("unknown", {}) where it is unreadable."""
    model, flags = "unknown", frozenset()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and model == "unknown":
                model = value.strip()
            elif key == "flags" and not flags:
                flags = frozenset(value.split())
    except OSError:
        pass
    return model, flags


def bf16_cpu_support() -> tuple[bool, str]:
    """Whether this CPU has native bf16 matmul instructions (AVX512-BF16 or AMX-BF16), and a one-line
    description (model and the relevant flags). /proc/cpuinfo first; torch's own probe where absent."""
    model, flags = cpu_info()
    if flags:
        have = [f for f in BF16_CPU_FLAGS if f in flags]
    else:  # no /proc/cpuinfo (not Linux): ask torch (private helpers; absent in old versions)
        probes = {"avx512_bf16": "_is_avx512_bf16_supported", "amx_bf16": "_is_amx_tile_supported"}
        have = [f for f, fn in probes.items() if bool(getattr(torch.cpu, fn, lambda: False)())]
    text = f"{model}: " + ", ".join(("has " if f in have else "no ") + f for f in BF16_CPU_FLAGS)
    return bool(have), text


def emulation_requested() -> bool:
    """The switch ``ELMO_TASKS_BF16_EMULATE`` is on (1/true/yes/on; ``elmo_features.util.env.switch``)."""
    return switch(EMULATE_ENV, False, "the bf16 path is not emulated")


def check_precision(precision: str, device: torch.device | str = "cpu", force_emulated: bool = False) -> str:
    """Validate ``precision`` for ``device``; -> the kernel mode: "fp32", "cuda", "cpu" (native bf16) or
    "emulated". Raises UsageError for an unknown name, PrecisionError where bf16 would run slowly."""
    if precision not in PRECISIONS:
        raise UsageError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
    if precision in ("fp32", "reference"):
        return "fp32"
    device = torch.device(device)
    if device.type == "cuda":
        return "cuda"
    if device.type != "cpu":
        raise PrecisionError(f"precision bf16 runs on CUDA devices and on CPUs with AVX512-BF16/AMX, not on "
                             f"{device.type}; use precision fp32")
    if force_emulated or emulation_requested():
        return "emulated"
    ok, what = bf16_cpu_support()
    if not ok:
        raise PrecisionError(
            f"precision bf16 needs a CPU with AVX512-BF16 or AMX, or a CUDA device ({what}); without them bf16 "
            f"matmuls are emulated and slower than fp32, so use precision fp32 (the default)"
            f" (for tests only: {EMULATE_ENV}=1 runs the emulated path)")
    return "cpu"


def set_precision(model: nn.Module, precision: str, force_emulated: bool = False) -> None:
    """Make ``model``'s inference path (a BiLM or any of its parts) run in ``precision``.

    Checked against the device the model is on now: move it to its device first. Inference copies of
    the weights are re-packed on the next call (the precision is part of their cache key)."""
    param = next(model.parameters(), None)
    mode = check_precision(precision, param.device if param is not None else "cpu", force_emulated)
    emulate = mode == "emulated"
    for m in model.modules():
        m._elmo_precision = precision
        m._elmo_bf16_emulate = emulate


@contextmanager
def float32_default() -> Iterator[None]:
    """torch's default dtype is float32 inside, whatever a plugin or the caller set (restored after): the models
    are built in float32, so their parameters, fingerprints and features do not depend on it."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def check_float32(model: nn.Module, who: str) -> None:
    """A model given to ``who`` holds float32 parameters (reduced precision is asked for with ``precision=``): a
    ``model.half()`` or ``.bfloat16()`` is a TypeError saying so (torch would fail later on mixed dtypes)."""
    dtypes = {p.dtype for p in model.parameters() if p.is_floating_point()}
    if dtypes - {torch.float32}:
        got = ", ".join(sorted(str(d).removeprefix("torch.") for d in dtypes))
        raise TypeError(f"{who}: the BiLM's parameters are {got}; give the float32 model (as loaded), and "
                        "precision='bf16' for reduced precision (float32 weights, bf16 matrix products)")


def precision_of(model: nn.Module) -> str:
    """The precision set on ``model`` ("fp32" unless ``set_precision`` said otherwise)."""
    return getattr(model, "_elmo_precision", "fp32")


def linear_for(module: nn.Module, weight: torch.Tensor, bias: torch.Tensor | None = None, batch_hint: int = 64):
    """An inference linear (``PackedLinear`` interface) for ``module``'s precision: fp32 or bf16."""
    if precision_of(module) in ("fp32", "reference"):
        return PackedLinear(weight, bias, batch_hint)
    emulate = bool(getattr(module, "_elmo_bf16_emulate", False))
    return Bf16Linear(weight, bias, check_precision("bf16", weight.device, emulate), batch_hint)


_ONEDNN_BF16: bool | None = None


def onednn_bf16_available() -> bool:
    """Whether oneDNN takes pre-packed bf16 weights on this CPU (probed once)."""
    global _ONEDNN_BF16
    if _ONEDNN_BF16 is None:
        try:
            g = torch.Generator().manual_seed(0)
            w, x = torch.randn(24, 16, generator=g).bfloat16(), torch.randn(5, 16, generator=g).bfloat16()
            with torch.no_grad():
                y = torch.ops.mkldnn._linear_pointwise(x, torch.ops.mkldnn._reorder_linear_weight(w, 5), None,
                                                       "none", [], "")
            ref = (x.float() @ w.float().t()).bfloat16().float()
            _ONEDNN_BF16 = bool(y.dtype == torch.bfloat16 and torch.allclose(y.float(), ref, rtol=1e-2, atol=1e-2))
        except Exception:  # private op, or bf16 refused by this CPU: use F.linear
            _ONEDNN_BF16 = False
    return _ONEDNN_BF16


class Bf16Linear:
    """``y = bf16(bf16(x) @ bf16(W).T) + bias`` in fp32 (fp32 accumulation), ``PackedLinear``'s interface.

    mode: "cpu" (oneDNN with a bf16 packed weight, else torch's bf16 matmul), "cuda" (torch's bf16
    matmul), or "emulated" (rounded operands through an fp32 GEMM, then the result rounded; any CPU).
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, mode: str, batch_hint: int = 64):
        with torch.no_grad():
            self.mode = mode
            self.out_features = weight.shape[0]
            self.bias = None if bias is None else bias.detach().float().contiguous()  # (out,)
            w16 = weight.detach().to(torch.bfloat16).contiguous()  # (out, in)
            self.packed = self.weight = self.emulated = None
            if mode == "emulated":
                self.emulated = PackedLinear(w16.float())  # exact bf16 values, fp32 GEMM
            elif mode == "cpu" and onednn_bf16_available():
                self.packed = torch.ops.mkldnn._reorder_linear_weight(w16, batch_hint)
            else:
                self.weight = w16

    def _mm(self, x: torch.Tensor) -> torch.Tensor:
        """(M, in) fp32 -> (M, out) fp32 = bf16(bf16(x) @ W.T), no bias."""
        if x.shape[0] == 0:
            return x.new_zeros(0, self.out_features, dtype=torch.float32)
        if self.emulated is not None:
            return self.emulated(x.to(torch.bfloat16).float()).to(torch.bfloat16).float()
        xb = x.to(torch.bfloat16).contiguous()
        if self.packed is not None:  # padded to a bounded set of row counts (onednn.padded_rows)
            m, rows = xb.shape[0], padded_rows(xb.shape[0])
            return torch.ops.mkldnn._linear_pointwise(pad_rows(xb, rows), self.packed, None, "none", [], "")[:m].float()
        return F.linear(xb, self.weight).float()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(M, in) -> (M, out) fp32."""
        y = self._mm(x)
        return y.add_(self.bias) if self.bias is not None else y

    def add_to(self, x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        """``other + x @ weight.T`` (bias not applied): (M, in), (M, out) -> new (M, out) fp32."""
        return self._mm(x).add_(other)

"""The arithmetic of a frozen Transformer encoder's forward pass: ``fp32`` (the default), ``bf16`` or ``auto``.

``bf16`` runs the forward pass under ``torch.autocast(dtype=torch.bfloat16)``: matrix products take bf16 operands
with fp32 accumulation, the normalisations and softmax stay fp32. The linear layers' weights and biases are cast to
bf16 once (``Bf16Linears``), not by autocast at every call (it keeps no cast of a frozen weight): the same operands,
so the same numbers, without reading every weight again per batch. Every hidden state is cast back to float32
before word pieces are pooled to words, so pooling and the stored features are fp32 arrays either way. It runs on a
CUDA device or a CPU with native bf16 (AVX512-BF16 or AMX); elsewhere it is one error line, as for the biLM
(``elmo_features.model.precision``; ``ELMO_TASKS_BF16_EMULATE=1`` runs it emulated, for tests).

``auto`` takes bf16 where the hardware has it natively and fp32 elsewhere. The CPU's flags are read by
``elmo_features.model.precision.bf16_cpu_support`` (the one reader of /proc/cpuinfo's bf16 flags; tests mock it).

The resolved precision is fixed when an embedder is built and is part of its fingerprint (with the CPU's bf16
flags), so fp32 and bf16 features never share a cache entry; fp32 adds nothing to the fingerprint, so fp32 caches
made before the option existed stay valid.
"""
from __future__ import annotations

import contextlib

import torch
from torch import nn
from torch.func import functional_call

from elmo_features.model import precision as model_precision
from elmo_features.util.errors import UsageError

ENCODER_PRECISIONS = ("fp32", "bf16", "auto")


def resolve_encoder_precision(precision: str, device: torch.device | str = "cpu") -> str:
    """``precision`` ("fp32", "bf16" or "auto") on ``device`` -> "fp32" or "bf16". An unknown name is a UsageError;
    "bf16" where it would run emulated is a PrecisionError (both one line)."""
    if precision not in ENCODER_PRECISIONS:
        raise UsageError(f"unknown Transformer precision {precision!r}; valid: {', '.join(ENCODER_PRECISIONS)}")
    if precision == "fp32":
        return "fp32"
    device = torch.device(device)
    if precision == "auto":
        if device.type == "cuda":
            return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
        return "bf16" if device.type == "cpu" and model_precision.bf16_cpu_support()[0] else "fp32"
    model_precision.check_precision("bf16", device)  # (refuses bf16 without native support, unless emulated)
    return "bf16"


def bf16_hardware(device: torch.device | str = "cpu") -> str:
    """What bf16 runs on, as the fingerprint keys it: the CPU's bf16 flags ("has avx512_bf16, no amx_bf16", the CPU
    model left out: the flags choose the kernels), or the CUDA device's name; " (emulated)" appended when the
    emulation was asked for."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    flags = model_precision.bf16_cpu_support()[1].rpartition(": ")[2]  # ("MODEL: has avx512_bf16, no amx_bf16")
    return flags + (" (emulated)" if model_precision.emulation_requested() else "")


def forward_precision(precision: str, device: torch.device):
    """The context a forward pass in ``precision`` ("fp32" or "bf16") runs under on ``device``."""
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


class Bf16Linears:
    """bf16 copies of a model's ``nn.Linear`` weights and biases (what autocast casts them to at each call), made
    again when the weights change (``state``: a cheap-to-compare record of them, e.g.
    ``feature_cache.tensors_state``). A model the caller converted to another dtype (``model.half()``,
    ``.double()``) also gets float32 copies of its other floating parameters and buffers, the dtype autocast's
    fp32 operations expect: bf16 then gives the vectors of the float32 model its weights round to."""

    def __init__(self):
        self.state, self.tensors = None, {}

    def refresh(self, model: nn.Module, state) -> None:
        """Make the copies unless they are of the weights ``state`` records."""
        if state is not None and state == self.state:
            return
        linears = {f"{name}.{kind}": t for name, m in model.named_modules() if isinstance(m, nn.Linear)
                   for kind, t in (("weight", m.weight), ("bias", m.bias)) if t is not None}
        self.tensors = {k: t.detach().float().to(torch.bfloat16) for k, t in linears.items()}  # (.float(): a no-op
        # on float32 weights, so autocast's numbers; half or double weights go through the float32 they round to)
        own = {id(t) for t in linears.values()}
        others = [(k, t) for k, t in [*model.named_parameters(), *model.named_buffers()] if t.is_floating_point()
                  and id(t) not in own]
        if any(t.dtype != torch.float32 for _, t in others):  # (a converted model; a float32 one is left as it is)
            self.tensors.update({k: t.detach().float() for k, t in others})
        self.state = state

    def __call__(self, model: nn.Module, **inputs):
        """``model(**inputs)`` with the bf16 copies in place of its linear weights (under ``forward_precision``)."""
        return functional_call(model, self.tensors, args=(), kwargs=inputs, strict=False)

"""What the benchmarks print about the machine: CPU model and SIMD flags, and the kernel path chosen.

``cpu_summary()``: model name, the SIMD/matrix flags that decide the GEMM kernels (AVX2, AVX-512,
AVX512-BF16, AMX), and whether bf16 runs natively. ``kernel_path()``: which GEMM library the inference
path uses (oneDNN with packed weights, or PyTorch's default CPU matmul, MKL sgemm), whether oneDNN
takes bf16 weights here, the intra-op thread count and how the LSTM directions are laid out on threads.
"""
from __future__ import annotations

import torch

from common import REPO  # noqa: F401  (puts the repository on sys.path)
from elmo_features.model.lstm import _direction_pool
from elmo_features.model.onednn import onednn_available
from elmo_features.model.precision import bf16_cpu_support, cpu_info, onednn_bf16_available

SHOWN_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")


def cpu_summary() -> dict:
    """CPU model, the relevant flags present/absent, and native bf16 support (one-line text too)."""
    model, flags = cpu_info()
    bf16, text = bf16_cpu_support()
    present = [f for f in SHOWN_FLAGS if f in flags]
    return {"cpu_model": model, "flags": present, "absent_flags": [f for f in SHOWN_FLAGS if f not in flags],
            "bf16_native": bf16, "bf16_text": text,
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability()}


def kernel_path() -> dict:
    """The GEMM library, thread count and LSTM direction layout the inference path uses now."""
    threads = torch.get_num_threads()
    pool = _direction_pool() if threads >= 2 else None
    mkl = torch.backends.mkl.is_available()
    return {
        "fp32_gemm": "oneDNN (pre-packed weights, torch.ops.mkldnn._linear_pointwise)" if onednn_available()
        else ("MKL sgemm (torch.nn.functional.linear)" if mkl else "torch.nn.functional.linear (no MKL)"),
        "bf16_gemm": "oneDNN bf16 (pre-packed bf16 weights)" if onednn_bf16_available()
        else "torch bf16 matmul (no oneDNN bf16 kernels on this CPU)",
        "threads": threads,
        "lstm_directions": ("in parallel on 2 worker threads, 1 OpenMP thread each" if pool is not None
                            else "one after the other on the intra-op thread pool"),
        "mkl": mkl, "mkldnn": torch.backends.mkldnn.is_available(),
    }


def describe() -> str:
    """A few lines for a benchmark's header."""
    c, k = cpu_summary(), kernel_path()
    return "\n".join([
        f"CPU: {c['cpu_model']} (torch capability {c['torch_cpu_capability']})",
        f"  flags: {' '.join(c['flags']) or '-'}; absent: {' '.join(c['absent_flags']) or '-'}",
        f"  native bf16: {'yes' if c['bf16_native'] else 'no'} ({c['bf16_text']})",
        f"kernels: fp32 GEMM {k['fp32_gemm']}; bf16 GEMM {k['bf16_gemm']}",
        f"  {k['threads']} intra-op threads; LSTM directions {k['lstm_directions']}",
    ])

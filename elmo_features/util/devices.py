"""The ``--device`` option: parse and check a torch device (cpu, cuda, cuda:N, mps), and find a module's device.

Every tensor the biLM and the task heads create is made on the device of their input (or parameters), so
moving the model and the batches with ``.to(device)`` is all a command does to run elsewhere.
"""
from __future__ import annotations

import argparse
import re

import torch
from torch import nn

from elmo_features.util.errors import UsageError

DEVICE_HELP = "torch device: cpu (default), cuda, cuda:N or mps"


def parse_device(text: str) -> torch.device:
    """A usable torch device named ``text``; a UsageError (one line, exit 2) names what is wrong."""
    name = str(text).strip().lower()
    if name == "cpu":
        return torch.device("cpu")
    m = re.fullmatch(r"cuda(?::(\d+))?", name)
    if m:
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise UsageError(f"--device {text}: CUDA is not available here (no GPU, or torch was built without "
                             "CUDA); use --device cpu")
        index = int(m.group(1) or 0)
        if index >= count:
            raise UsageError(f"--device {text}: there are {count} CUDA device(s), cuda:0..cuda:{count - 1}")
        return torch.device("cuda", index)
    if name == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise UsageError(f"--device {text}: Apple MPS is not available here; use --device cpu")
        return torch.device("mps")
    raise UsageError(f"--device: unknown device {text!r}; valid: cpu, cuda, cuda:N, mps")


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    """``--device`` (a string, checked by ``parse_device`` when the command starts)."""
    parser.add_argument("--device", default="cpu", help=DEVICE_HELP)


def module_device(module: nn.Module) -> torch.device:
    """The device of a module's first parameter (or buffer); cpu for a module without either."""
    for t in module.parameters():
        return t.device
    for t in module.buffers():
        return t.device
    return torch.device("cpu")


def move_to(batch, device: torch.device):
    """Tensors (also inside tuples, lists and dicts) moved to ``device``; other values unchanged."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, (tuple, list)):
        return type(batch)(move_to(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: move_to(v, device) for k, v in batch.items()}
    return batch

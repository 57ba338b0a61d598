"""sha256 digests of saved tensors and checkpoints: a file that was damaged or edited after it was written is told
apart from the one saved (a run's ``model.pt``, a ``train-bilm`` ``checkpoint.pt``)."""
from __future__ import annotations

import hashlib
from typing import Any

import torch


def update_with_tensor(h: "hashlib._Hash", name: str, t: torch.Tensor) -> None:
    """Feed ``h`` one named tensor: its name, dtype, shape and bytes."""
    t = t.detach().cpu().contiguous()
    h.update(f"|{name}|{t.dtype}|{tuple(t.shape)}|".encode())
    h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")


def nested_digest(obj: Any) -> str:
    """sha256 of a nested structure of dicts, lists, tensors and plain values (a checkpoint as ``torch.save``
    writes it): keys in sorted order, tensors by their bytes, other values by ``repr``."""
    h = hashlib.sha256()
    _feed(h, "", obj)
    return h.hexdigest()


def _feed(h: "hashlib._Hash", path: str, obj: Any) -> None:
    if isinstance(obj, torch.Tensor):
        update_with_tensor(h, path, obj)
    elif isinstance(obj, dict):
        h.update(f"|{path}|dict{len(obj)}|".encode())
        for key in sorted(obj, key=lambda k: (type(k).__name__, str(k))):
            _feed(h, f"{path}/{type(key).__name__}:{key}", obj[key])
    elif isinstance(obj, (list, tuple)):
        h.update(f"|{path}|{type(obj).__name__}{len(obj)}|".encode())
        for i, item in enumerate(obj):
            _feed(h, f"{path}/{i}", item)
    else:
        h.update(f"|{path}|{obj!r}|".encode())

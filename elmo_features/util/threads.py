"""Torch CPU threads of a process: what ``--threads`` sets in every command (``cli_types.add_threads_argument``).

The default is the CPU cores this process may use, shared among the processes of the same launch (a torchrun's
local ranks, ``compare --jobs``), except where a command states another (head training: 1).
"""
from __future__ import annotations

import os

import torch


def cpu_cores() -> int:
    """CPU cores this process may use (its affinity mask, else os.cpu_count())."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threads_per_job(jobs: int, cores: int | None = None) -> int:
    """Torch threads per process so that processes x threads fits in the cores (at least 1)."""
    return max(1, (cores or cpu_cores()) // max(1, jobs))


def default_threads() -> int:
    """The cores of this process shared among the local processes of a torchrun launch (LOCAL_WORLD_SIZE)."""
    try:
        local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    except ValueError:
        local = 1
    return threads_per_job(local)


def set_threads(value: int | None, default: int | None = None) -> int:
    """Set torch's CPU threads to ``value``, else ``default``, else ``default_threads()``; returns the number."""
    n = value or default or default_threads()
    torch.set_num_threads(n)
    return n

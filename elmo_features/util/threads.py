"""Torch CPU threads of a process: what ``--threads`` sets in every command (``cli_types.add_threads_argument``).

The default is the CPU cores this process may use, shared among the processes of the same launch (a torchrun's
local ranks, ``compare --jobs``), except where a command states another (head training: 1).
"""
from __future__ import annotations

import os

import torch

from elmo_features.util.errors import UsageError

THREADS_PER_CPU = 4  # the most torch threads per CPU of the machine that --threads / the threads key accept


def cpu_cores() -> int:
    """CPU cores this process may use (its affinity mask, else os.cpu_count())."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def max_threads() -> int:
    """The most torch threads a command accepts: THREADS_PER_CPU per CPU of the machine. More only slow torch down,
    and tens of thousands make it crash (a segmentation fault when the threads cannot be started)."""
    return THREADS_PER_CPU * (os.cpu_count() or 1)


def threads_problem(value: int) -> str | None:
    """Why ``value`` torch threads cannot be used (None when they can): the message of every check of it."""
    if value > max_threads():
        return (f"{value} threads are more than this machine can run ({os.cpu_count() or 1} CPUs, at most "
                f"{THREADS_PER_CPU} threads each); give 1..{max_threads()}")
    return None


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
    problem = threads_problem(n)
    if problem:  # (the command-line flag and the train-bilm key are checked before any work)
        raise UsageError(f"threads: {problem}")
    torch.set_num_threads(n)
    return n


def thread_tqdm_lock() -> None:
    """Progress bars lock with a thread lock. tqdm's default is a named multiprocessing semaphore: made in a pool
    worker that is terminated, it is left behind ("leaked semaphore objects" at exit); made in the parent before the
    pool, it starts multiprocessing's resource tracker outside the pool's signal mask (a closed terminal kills it)."""
    import threading

    import tqdm.std

    tqdm.std.tqdm.set_lock(threading.RLock())

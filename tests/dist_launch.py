"""Launch N ranks on this machine the way torchrun does (env://, gloo, loopback), bounded in time."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(module: str, args: list[str], world: int = 2, env: dict | None = None,
          rank_args: dict[int, list[str]] | None = None) -> list[subprocess.Popen]:
    """Start ``world`` ranks as torchrun would (env://, gloo, loopback); ``wait`` for them. ``rank_args``: other
    arguments for some ranks (a launch gone wrong)."""
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available in this PyTorch build")
    port = free_port()
    procs = []
    for rank in range(world):
        rank_env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                    "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
                    "OMP_NUM_THREADS": "1", "ELMO_TASKS_DIST_TIMEOUT": "300", "GLOO_SOCKET_IFNAME": "lo",
                    "PYTHONPATH": str(REPO), **(env or {})}
        procs.append(subprocess.Popen([sys.executable, "-m", module, *(rank_args or {}).get(rank, args)], cwd=REPO,
                                      env=rank_env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def wait(procs: list[subprocess.Popen], timeout: float = 900) -> list[subprocess.CompletedProcess]:
    """Wait for every rank (bounded: a rank still running after ``timeout`` s is killed, and the test fails)."""
    out = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=timeout)
            out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return out


def launch(module: str, args: list[str], world: int = 2, timeout: float = 900) -> list[subprocess.CompletedProcess]:
    """Start ``world`` ranks as torchrun would (env://, gloo, loopback), wait for all (bounded)."""
    return wait(start(module, args, world), timeout)

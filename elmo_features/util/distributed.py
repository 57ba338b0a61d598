"""Running under PyTorch's ``torchrun``: detect it, join the process group, exchange status through its store;
and the data-parallel pieces both trainers (``train-bilm``, head training in ``elmo-tasks run``) share.

``torchrun`` (c10d rendezvous) starts one process per rank with RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT set; ``init()`` joins the group with ``env://`` (``gloo`` on CPU, ``nccl``
on GPU). Every collective has a timeout (``ELMO_TASKS_DIST_TIMEOUT`` seconds, default 1800), so a rank
that never arrives stops the job with an error instead of a hang; a rank that exits with an error makes
torchrun stop the other ranks. Waiting for *slow* ranks (e.g. at the end of a long shard) goes through
the group's key-value store, polled without a deadline, not through a timed collective.

Data-parallel training: every rank builds the same model (same seed) and draws the same global batches;
rank r trains on its slice (``Dist.shard``: every world_size-th item from r) with its own dropout masks
(``Dist.seed_rank``), its loss scaled by its share of the global batch, and ``allreduce_grads`` sums the
gradients over the ranks in one flat all-reduce: a step equals the one-process step on the global batch.
Without a process group (one process) the sums are the values themselves and nothing is exchanged.
"""
from __future__ import annotations

import json
import math
import os
import random
import re
import sys
import tempfile
import threading
import time
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import timedelta
from typing import Iterator, Sequence

import numpy as np
import torch
import torch.distributed as dist

from elmo_features.util.errors import ElmoTasksError, UsageError

TIMEOUT_ENV = "ELMO_TASKS_DIST_TIMEOUT"


class DistributedError(ElmoTasksError, RuntimeError):
    """Another rank failed, or the ranks disagree (e.g. a partial output of another world size)."""


@dataclass
class Dist:
    """This process's place in the job."""

    rank: int
    world_size: int
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, items):
        """This rank's part of a global batch (or of a list of batches): every world_size-th item from ``rank``."""
        return items[self.rank :: self.world_size]

    def seed_rank(self, seed: int) -> None:
        """Other dropout masks on other ranks: rank r > 0 reseeds Python, NumPy and torch with
        ``seed + 1000003 r``; rank 0 keeps the one-process stream."""
        if self.rank > 0:
            s = seed + 1_000_003 * self.rank
            random.seed(s)
            np.random.seed(s % 2**32)
            torch.manual_seed(s)


def torchrun_world() -> int:
    """WORLD_SIZE set by torchrun (1 when not launched by it)."""
    return _int_env("WORLD_SIZE", "1")


def _int_env(name: str, default: str | None = None) -> int:
    value = os.environ.get(name, default)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise UsageError(f"{name}={value!r} is not an integer (launch with torchrun)") from None


def timeout() -> timedelta:
    """The deadline of every collective and of joining the group (``ELMO_TASKS_DIST_TIMEOUT`` seconds, > 0)."""
    raw = os.environ.get(TIMEOUT_ENV, "1800")
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and 0 < seconds <= 10**7):
        raise UsageError(f"{TIMEOUT_ENV}={raw!r}: give a number of seconds above 0, e.g. 1800")
    return timedelta(seconds=seconds)


def init() -> Dist:
    """Join the torchrun process group (gloo on CPU, nccl with CUDA); returns this rank's place."""
    if not dist.is_available():
        raise UsageError("this PyTorch build has no torch.distributed; run with one process (without torchrun)")
    for key in ("RANK", "MASTER_ADDR", "MASTER_PORT"):
        if key not in os.environ:
            raise UsageError(f"WORLD_SIZE is set but {key} is not: launch with torchrun (it sets both)")
    world, rank, local_rank = torchrun_world(), _int_env("RANK"), _int_env("LOCAL_RANK", "0")
    port = _int_env("MASTER_PORT")
    if not 0 < port < 65536:
        raise UsageError(f"MASTER_PORT={port} is not a port number (1 to 65535): launch with torchrun, or give "
                         "rank 0's free port")
    if not os.environ["MASTER_ADDR"].strip():
        raise UsageError("MASTER_ADDR is empty: give rank 0's host name or address (launch with torchrun)")
    if not 0 <= rank < world:
        raise UsageError(f"RANK={rank} is outside the job's WORLD_SIZE={world} (ranks 0 to {world - 1}): launch with "
                         "torchrun, which numbers the ranks")
    use_cuda = torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        try:
            _join("nccl" if use_cuda else "gloo", timeout())
        except (RuntimeError, TimeoutError, OSError) as e:  # DistNetworkError, DistStoreError: rank 0 unreachable
            first = " ".join(str(e).split())[:200]
            where = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
            if rank == 0 and "address already in use" in first.lower():  # another program has the port
                raise DistributedError(f"rank 0: MASTER_PORT {os.environ['MASTER_PORT']} is in use by another "
                                       f"program ({first}); choose a free port for every rank") from None
            if rank == 0:  # rank 0 hosts the group: the others did not come
                raise DistributedError(f"rank 0: the other ranks did not all join the process group at {where} "
                                       f"({first}); were all {world} ranks started (by the same torchrun)? A slow "
                                       f"start needs a larger {TIMEOUT_ENV}") from None
            raise DistributedError(f"rank {rank}: could not join the process group at {where} ({first}); is rank 0 "
                                   "running (started by the same torchrun), and the address and port right?") from None
    return Dist(dist.get_rank(), dist.get_world_size(), local_rank)


_C10D_LOG = re.compile(r"^\[[EWI]\d{4} [^\]]*\] \[c10d\]|^\[[EWI]\d{4} [^\]]*(socket|TCPStore)\.cpp:|^Exception raised "
                       r"from |^frame #\d+: |^<omitting python frames>$|^\s*$")


def _join(backend: str, deadline: timedelta) -> None:
    """``init_process_group``, in a helper thread: the C++ call waits for rank 0 (or for the other ranks) without
    returning to Python, so a stop signal would wait for the deadline (30 minutes by default); here the main thread
    waits in short steps and a stop ends the wait at once (the process then ends with ``os._exit``: the helper thread
    is still inside the C++ call, ``left_group``). PyTorch's C++ log of the connection attempts (each retry with a
    40-line C++ stack) goes to a scratch file while joining; what else was said there is passed on."""
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            dist.init_process_group(backend, timeout=deadline)
        except BaseException as e:  # handed to the main thread
            outcome.append(e)

    global _LEFT
    with _c10d_log_aside():
        helper = threading.Thread(target=run, name="elmo-tasks-join", daemon=True)
        helper.start()
        try:
            while helper.is_alive():
                helper.join(0.2)
        except KeyboardInterrupt:
            _LEFT = True  # the join goes on in the helper thread: the process must not shut down normally
            raise
    if outcome:
        raise outcome[0]


@contextmanager
def _c10d_log_aside() -> Iterator[None]:
    """Standard error (file descriptor 2, where PyTorch's C++ code logs) goes to a scratch file; afterwards its
    lines other than c10d's connection log are written to standard error."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no usable standard error: nothing to set aside
        yield
        return
    with tempfile.TemporaryFile() as scratch:
        os.dup2(scratch.fileno(), 2)
        try:
            yield
        finally:
            with suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            scratch.seek(0)
            lines = scratch.read().decode("utf-8", "replace").splitlines()
            kept = [line for line in lines if not _C10D_LOG.search(line)]
            if kept:
                print("\n".join(kept), file=sys.stderr, flush=True)


@contextmanager
def collective(what: str) -> Iterator[None]:
    """Turn a failed collective (another rank died, a timeout) into one clear error line naming the step."""
    try:
        yield
    except DistributedError:
        raise
    except RuntimeError as e:  # gloo/nccl: "Connection closed by peer", "Timed out", ... (DistBackendError)
        first = re.sub(r"^\[[^\]]*\.(cc|cpp|h):\d+\]\s*", "", " ".join(str(e).split()))  # no C++ source path
        first = first.split(". ")[0][:200]  # the error, not gloo's advice
        raise DistributedError(f"{what}: lost the other ranks ({first}); another rank failed or was killed "
                               "(see its error, or torchrun's report of the failed rank)") from None


def finish(sync: bool = False) -> None:
    """Leave the process group (if joined). ``sync``: after a successful run, first wait for every rank (a
    barrier), so that no rank tears down its connections while another is still using them (seen once: a rank
    aborting at exit with "terminate called without an active exception"). Never after an error: a rank that
    failed must not wait for ranks that may be stuck in another collective."""
    global _LEFT
    if dist.is_available() and dist.is_initialized():
        if sync:
            with suppress(RuntimeError):  # a rank lost at this point: leave anyway
                dist.barrier()
        dist.destroy_process_group()
        _LEFT = True


_LEFT = False  # this process left a process group (``finish``), or stopped while joining one (``_join``)


def left_group() -> bool:
    """Whether this process ran as a rank and left its process group (or was stopped while joining it): gloo's
    threads can still abort the interpreter's shutdown ("terminate called without an active exception", exit -6; seen
    in about one run in fifty of a two-rank test), so the command ends such a process with ``os._exit`` once its
    outputs are written."""
    return _LEFT


def broadcast(obj, src: int = 0):
    """``obj`` of rank ``src`` on every rank (a timed collective)."""
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def all_gather(obj) -> list:
    """``obj`` of every rank, in rank order (a timed collective)."""
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def check_same_job(job: dict, what: dict[str, str]) -> None:
    """Every rank was given the same job (``job``: its inputs, settings and output as this rank sees them; ``what``
    names each key for the message), or every rank raises the same DistributedError naming the first rank that
    differs from rank 0 and how (a rank started with another input file would write its shard of another text)."""
    with collective("comparing the ranks' commands"):
        jobs = all_gather(job)
    for r, other in enumerate(jobs[1:], start=1):
        keys = list(dict.fromkeys([*jobs[0], *other]))
        differ = [f"{what.get(k, k)} ({other.get(k)} against {jobs[0].get(k)})" for k in keys
                  if other.get(k) != jobs[0].get(k)][:3]
        if differ:
            raise DistributedError(f"rank {r} was given another job than rank 0: {'; '.join(differ)}; launch every "
                                   "rank with the same command and inputs")


def check_same_config(config: dict, **extra) -> None:
    """``check_same_job`` for a command's resolved config (compared key by key: the message names e.g.
    ``training.lr (0.5 against 0.01)``) and ``extra`` values (e.g. the output folder)."""
    job = {k: json.dumps(v, sort_keys=True, default=str) for k, v in _leaves(config)}
    job.update({k: str(v) for k, v in extra.items()})
    check_same_job(job, {})


def _leaves(tree, prefix: str = ""):
    """(dotted key, value) of every leaf of nested dicts."""
    if isinstance(tree, dict) and tree:
        for k, v in tree.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, tree


def _store():
    return dist.distributed_c10d._get_default_store()


def _key(name: str, rank: int) -> str:
    run = os.environ.get("TORCHELASTIC_RUN_ID", "none")
    return f"elmo-tasks/{run}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/{name}/{rank}"


def post_status(name: str, rank: int, status: str) -> None:
    """Publish this rank's outcome of step ``name`` ("ok" or an error message)."""
    _store().set(_key(name, rank), status)


def wait_statuses(name: str, world_size: int, what: str, poll_seconds: float = 30.0) -> list[str]:
    """The status of step ``name`` of ranks 0 .. world_size - 1, waiting (without a deadline) for slow ranks.

    A rank that dies stops the job through torchrun; a lost store connection raises."""
    store = _store()
    keys = [_key(name, r) for r in range(world_size)]
    t0 = time.monotonic()
    while True:
        try:
            store.wait(keys, timedelta(seconds=poll_seconds))
            break
        except RuntimeError as e:  # DistStoreError on timeout (a RuntimeError subclass)
            if "timeout" not in str(e).lower() and "timed out" not in str(e).lower():
                raise DistributedError(f"lost the connection to the other ranks while waiting for {what}: "
                                       f"{' '.join(str(e).split())[:200]}") from None
            done = sum(store.check([k]) for k in keys)
            print(f"waiting for {what}: {done}/{world_size} ranks done after {time.monotonic() - t0:.0f} s",
                  file=sys.stderr, flush=True)
    return [store.get(k).decode("utf-8") for k in keys]


def _distributed() -> bool:
    """In a process group of more than one rank (else every sum below is the value itself)."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def sum_over_ranks(values: Sequence[float], what: str) -> list[float]:
    """``values`` summed over the ranks (float64, one all-reduce); ``what`` names the step in an error."""
    if not _distributed():
        return [float(v) for v in values]
    t = torch.tensor([float(v) for v in values], dtype=torch.float64)
    with collective(what):
        dist.all_reduce(t)
    return t.tolist()


def allreduce_grads(params: Sequence[torch.nn.Parameter], what: str, values: Sequence[float] = (),
                    flag_unused: bool = False) -> list[float]:
    """Sum the gradients of ``params`` (those that require one) over the ranks in one flat all-reduce, and
    ``values`` (e.g. the loss, as float32) after them; returns the summed ``values``. A parameter without a
    gradient on this rank adds zeros, and gets the zeros sum unless ``flag_unused``: then a flag per parameter
    travels too, and a parameter no rank gave a gradient keeps ``grad = None`` (as in one process: the
    optimizer skips it). One process: nothing is exchanged, ``values`` come back as they are."""
    params = [p for p in params if p.requires_grad]
    if not _distributed():
        return [float(v) for v in values]
    parts = [p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel(), dtype=p.dtype, device=p.device)
             for p in params]
    extra = [float(p.grad is not None) for p in params] if flag_unused else []
    if extra or values:
        device = params[0].device if params else torch.device("cpu")
        parts.append(torch.tensor(extra + [float(v) for v in values], dtype=torch.float32, device=device))
    if not parts:
        return []
    flat = torch.cat(parts)  # (total parameters [+ P flags] [+ values],)
    with collective(what):
        dist.all_reduce(flat)
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset : offset + n].view_as(p).clone()
        offset += n
    if flag_unused:
        for p, flag in zip(params, flat[offset : offset + len(params)].tolist()):
            if flag == 0:
                p.grad = None
        offset += len(params)
    return flat[offset:].tolist()


def gather_to_main(obj, what: str) -> list | None:
    """Every rank's ``obj`` on rank 0, in rank order (None on the other ranks)."""
    objs = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    with collective(what):
        dist.gather_object(obj, objs, dst=0)
    return objs

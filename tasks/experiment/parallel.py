"""Run independent jobs (e.g. the runs of ``elmo-tasks compare --jobs N``) on a local process pool.

Workers are started with the ``spawn`` context (no state inherited from the parent: a forked torch
with live OpenMP threads can deadlock), and each sets ``torch.set_num_threads(threads)`` first, so that
jobs x threads stays within the CPU cores. Results come back in job order whatever the completion order.
A job that raises stops the pool: the jobs not yet started are cancelled, the running ones terminated,
and the error is raised in the parent naming the job (a user error as one line; a bug with the worker's
traceback). A worker that dies (killed, out of memory) is reported the same way, never waited for.
Workers ignore SIGINT: on Ctrl-C (or SIGTERM) the parent gets KeyboardInterrupt, cancels the queued jobs
and terminates the running workers within seconds; the jobs finished before stay reported (``on_done``).

Frozen features are computed once before the pool starts (``prepare_features``) into the on-disk
feature cache, so workers only read them.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import threading
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Sequence

import torch

from elmo_features.util import distributed as D
from elmo_features.util import stop
from elmo_features.util.errors import ElmoTasksError
from elmo_features.util.once import shared_by_workers
from elmo_features.util.threads import thread_tqdm_lock

from elmo_tasks.features.base import FeatureContext, build_features
from elmo_tasks.plugins import load_plugins, loaded_includes
from elmo_tasks.registry import FEATURES


class JobFailedError(ElmoTasksError, RuntimeError):
    """A job of a process pool failed with a user error (or its worker died); the pool was stopped."""


def _end_with_parent(parent: int) -> None:
    """Have the kernel stop this worker (SIGTERM) when its parent dies, even by SIGKILL (Linux; elsewhere the pool's
    own shutdown does): a worker left behind would run its queued jobs into a comparison nobody finishes."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _init_worker(threads: int, includes: list[str], parent: int | None = None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent stops us
    if parent is not None:
        _end_with_parent(parent)
    thread_tqdm_lock()
    load_plugins(includes)  # the parent's plugins register here too (a spawned worker starts with none)
    os.environ["OMP_NUM_THREADS"] = str(threads)  # for libraries that read it late (e.g. a BLAS pool)
    torch.set_num_threads(threads)


def _one_line(e: BaseException) -> str:
    if isinstance(e, OSError) and not isinstance(e, ElmoTasksError) and e.filename is not None:
        return f"{e.filename}: {e.strerror or e}"
    return " ".join(str(e).split()) or type(e).__name__


def _stop(executor: ProcessPoolExecutor) -> None:
    """Cancel queued jobs and terminate running workers (no waiting for a long job to finish)."""
    procs = list((getattr(executor, "_processes", None) or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=10)


def run_jobs(fn: Callable, args: Sequence[tuple], jobs: int, threads: int,
             label: Callable[[int], str] = lambda i: f"job {i + 1}",
             on_done: Callable[[int, Any], None] | None = None) -> list:
    """``[fn(*a) for a in args]`` on ``jobs`` spawned worker processes with ``threads`` torch threads each.

    ``fn`` must be a module-level function (it is pickled by name). ``on_done(i, result)`` is called in
    the parent as each job finishes (in completion order); the returned list is in job order.
    """
    results: list = [None] * len(args)
    if not args:
        return results
    # the pool's resource tracker (started with its first queue) and its workers (spawned by the submissions) start
    # with SIGINT ignored (an ignored disposition survives exec, and Python then installs no KeyboardInterrupt
    # handler) and SIGHUP blocked: a Ctrl-C or a closed terminal reaching the process group cannot kill the tracker,
    # or a worker mid-import, with a traceback; the parent stops them itself. The parent's own SIGINT stays pending
    # meanwhile (a blocked signal is kept even while ignored) and reaches its handler once both are restored.
    with shared_by_workers():  # a warning said by one worker is not said again by another (nor by this process)
        return _run_pool(fn, args, jobs, threads, label, on_done, results)


def _run_pool(fn: Callable, args: Sequence[tuple], jobs: int, threads: int, label: Callable[[int], str],
              on_done: Callable[[int, Any], None] | None, results: list) -> list:
    """``run_jobs``'s pool, filling ``results``."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGHUP})
    main_thread = threading.current_thread() is threading.main_thread()
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
    try:
        executor = ProcessPoolExecutor(max_workers=min(jobs, len(args)), mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_init_worker, initargs=(threads, loaded_includes(), os.getpid()))
        pending = {executor.submit(fn, *a): i for i, a in enumerate(args)}
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, handler if handler is not None else signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    ok = False
    try:
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=pending.get):
                i = pending.pop(fut)
                try:
                    results[i] = fut.result()
                except BrokenProcessPool as e:
                    stop.check()  # workers ended by the same SIGTERM as the parent: a stop, not a failure
                    raise JobFailedError(f"{label(i)}: a worker process died ({_one_line(e)}); the other jobs "
                                         "were stopped (out of memory? see the messages above)") from None
                except (ElmoTasksError, OSError) as e:
                    raise JobFailedError(f"{label(i)} failed: {_one_line(e)} (the other jobs were stopped)") from e
                except Exception:
                    print(f"error: {label(i)} failed (the other jobs were stopped); its traceback:", file=sys.stderr)
                    raise
                if on_done is not None:
                    on_done(i, results[i])
        ok = True
    finally:
        if ok:
            executor.shutdown(wait=True)
        else:
            _stop(executor)
    return results


# ---------------------------------------------------------------- frozen features before the pool

def cached_sections(section: dict) -> list[dict]:
    """The leaf feature sections of a (possibly concat) resolved section whose features are cached on disk."""
    if isinstance(section.get("sources"), list):
        return [leaf for s in section["sources"] for leaf in cached_sections(s)]
    return [section] if getattr(FEATURES.get(section["name"]), "cached_on_disk", False) else []


def precompute_sections(sections: Sequence[dict], sentence_lists: Sequence[tuple[str, list[list[str]]]],
                        context: FeatureContext) -> int:
    """Precompute every disk-cached leaf of ``sections`` on each (split, sentences); returns how many leaves."""
    seen: list[dict] = []
    for section in sections:
        for leaf in cached_sections(section):
            if leaf in seen:  # e.g. two variants whose concat shares one elmo member
                continue
            seen.append(leaf)
            source = build_features(leaf, context)
            for split, sentences in sentence_lists:
                source.precompute(sentences, split)
    return len(seen)


def prepare_features(sections: Sequence[dict], sentence_lists: Sequence[tuple[str, list[list[str]]]],
                     context: FeatureContext, threads: int) -> None:
    """Fill the feature cache for ``sections`` in one spawned process with ``threads`` torch threads
    (the parent stays small: it holds no features while the pool runs)."""
    if context.cache_dir is None:
        raise JobFailedError("parallel jobs need the on-disk feature cache (features are computed once, then "
                             "read by every job): give --cache-dir DIR instead of 'none'")
    if any(cached_sections(s) for s in sections):
        run_jobs(precompute_sections, [(list(sections), list(sentence_lists), context)], jobs=1, threads=threads,
                 label=lambda i: "computing the frozen features")


# ---------------------------------------------------------------- under torchrun: the jobs spread over ranks

def torchrun_ranks() -> int:
    """The torchrun world size (1 when not launched by torchrun)."""
    return D.torchrun_world()


def shared_value(value):
    """Rank 0's ``value`` on every rank under torchrun (e.g. the comparison's time stamp); else ``value``."""
    if torchrun_ranks() <= 1:
        return value
    D.init()
    return D.broadcast(value)


def run_on_ranks(fn: Callable, args: Sequence[tuple], label: Callable[[int], str],
                 on_done: Callable[[int, Any], None], prepare: Callable[[], None] | None = None) -> bool:
    """Under torchrun: rank r runs jobs r, r + W, ... (after rank 0 ran ``prepare``); rank 0 collects every
    result (JSON-able) through the group's store and calls ``on_done`` in job order. Returns True on rank 0.

    A failing job stops its rank; rank 0 reports it (torchrun stops the other ranks)."""
    d = D.init()
    if prepare is not None:  # rank 0 fills the feature cache; the others wait for it without a deadline
        if d.is_main:
            try:
                prepare()
            except BaseException as e:
                D.post_status("compare-features", 0, _one_line(e))
                raise
            D.post_status("compare-features", 0, "ok")
        status = D.wait_statuses("compare-features", 1, "rank 0's feature computation")[0]
        if status != "ok":
            raise JobFailedError(f"rank 0 failed to compute the features: {status}")
    results, i = {}, None
    try:
        for i in range(d.rank, len(args), d.world_size):
            results[i] = fn(*args[i])
    except BaseException as e:
        D.post_status("compare", d.rank, json.dumps({"error": f"{label(i)} failed: {_one_line(e)}"}))
        raise
    D.post_status("compare", d.rank, json.dumps({"results": {str(k): v for k, v in results.items()}}))
    if not d.is_main:
        return False
    statuses = [json.loads(s) for s in D.wait_statuses("compare", d.world_size, "the other ranks' runs")]
    errors = [f"rank {r}: {s['error']}" for r, s in enumerate(statuses) if "error" in s]
    if errors:
        raise JobFailedError("; ".join(errors))
    merged = {int(k): v for s in statuses for k, v in s["results"].items()}
    for k in sorted(merged):
        on_done(k, merged[k])
    return True

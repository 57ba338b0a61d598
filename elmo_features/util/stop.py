"""Stop requests (Ctrl-C, SIGTERM, SIGHUP) that are never lost.

The command's signal handler records the request here and raises ``KeyboardInterrupt``, so that blocking code
(a long forward pass, a download, a wait for worker processes) stops at once. Python can swallow that exception
when the signal arrives while it runs a weakref or ``__del__`` callback ("Exception ignored in: ..."); the long
loops (embedding batches, training steps, predictions) therefore call ``check()`` once per batch, which raises
it again from the recorded request. A stop is acted on within one batch either way.

Once a stop is under way, more signals within ``GRACE`` seconds (the impatient second Ctrl-C) are only recorded:
they must not break the cleanup that saves the work and prints the line that says how to continue (``in_grace``);
a later one raises again (the first may have been swallowed where no loop checks, or the cleanup hangs). When the
command has returned, the process only exits: ``end_on_signals`` (a KeyboardInterrupt in an atexit callback would
be a traceback, or a death by SIGINT; a signal then lets the exit finish, with the command's own exit code, and
ends the process when something keeps it alive, such as a plugin's thread).
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

GRACE = 5.0  # seconds after the first stop request in which more signals are only recorded
_REQUESTED: list[int] = []  # signal numbers received since the command started
_FIRST_AT: list[float] = []  # time.monotonic() of the first of them


def request(signum: int) -> None:
    """Record a stop request (called by the signal handler)."""
    if not _REQUESTED:
        _FIRST_AT[:] = [time.monotonic()]
    _REQUESTED.append(int(signum))


def clear() -> None:
    """Forget earlier requests (at the start of a command)."""
    _REQUESTED.clear()


def check() -> None:
    """Raise ``KeyboardInterrupt`` when a stop was requested (again, if an earlier one was swallowed)."""
    if _REQUESTED:
        raise KeyboardInterrupt(signal.Signals(_REQUESTED[-1]).name)


def count() -> int:
    """How many stop requests were recorded since the command started (compare before and after a step)."""
    return len(_REQUESTED)


@contextlib.contextmanager
def noted():
    """Within: a stop signal that a Python handler deals with (Python's own Ctrl-C handler, the command's early one)
    is recorded first, so code that catches a KeyboardInterrupt from foreign code (a plugin being imported) can tell
    a real stop (``count()`` grew) from one that code raised itself. Main thread only; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in stop_signals()}

    def noting(signum, frame):
        request(signum)
        previous[signum](signum, frame)

    for signum, handler in previous.items():
        if callable(handler):
            signal.signal(signum, noting)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if callable(handler):
                signal.signal(signum, handler)


def first() -> int | None:
    """The number of the first signal recorded since the command started (its exit code is 128 + it), or None."""
    return _REQUESTED[0] if _REQUESTED else None


def in_grace() -> bool:
    """True within ``GRACE`` seconds of the first stop request: a signal now is the impatient second one."""
    return bool(_REQUESTED) and time.monotonic() - _FIRST_AT[0] < GRACE


def quiet_swallowed_stops() -> None:
    """Python reports a stop's KeyboardInterrupt that lands in a weakref or ``__del__`` callback as "Exception ignored
    in: ... KeyboardInterrupt: SIGTERM" before the command's own line; the request is recorded and ``check()`` raises
    it again, so such reports are dropped (other unraisable exceptions are reported as before)."""
    previous = sys.unraisablehook
    if getattr(previous, "_elmo_quiet_stops", False):
        return

    def hook(unraisable) -> None:
        if not (isinstance(unraisable.exc_value, KeyboardInterrupt) and _REQUESTED):
            previous(unraisable)

    hook._elmo_quiet_stops = True
    sys.unraisablehook = hook


def stop_signals() -> tuple[int, ...]:
    """The signals that stop a command: SIGTERM always; SIGINT and SIGHUP (a closed terminal, a dropped ssh session)
    unless the process inherited them ignored (a background job, ``nohup``), which stay ignored."""
    optional = (signal.SIGINT, getattr(signal, "SIGHUP", None))  # (no SIGHUP on Windows)
    return (signal.SIGTERM,) + tuple(s for s in optional if s is not None and signal.getsignal(s) is not signal.SIG_IGN)


def ignore_signals() -> None:
    """Ignore the stop signals from now on: the process stops, and is only left to exit (with the stopped command's
    code: ``forget_caught_interrupt``)."""
    for signum in stop_signals():
        signal.signal(signum, signal.SIG_IGN)
    forget_caught_interrupt()


EXIT_GRACE = 2.0  # seconds a finished command's exit may still take after a stop signal (atexit callbacks)


def end_on_signals(code: int) -> None:
    """After the command returned ``code``: a stop signal no longer raises (no atexit traceback, no silent 130/143).
    The first lets the exit go on for ``EXIT_GRACE`` seconds, then ends the process with ``code``, its output
    flushed; a second ends it at once. So a process that something keeps alive (a plugin's non-daemon thread, a
    stuck atexit callback) stops when asked, and never by SIGKILL only."""
    def end(*_) -> None:
        if threading.current_thread() is threading.main_thread():  # (a flush that hangs: the next signal kills
            for signum in stop_signals():  # the default way)
                signal.signal(signum, signal.SIG_DFL)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)

    def first(*_) -> None:
        for signum in stop_signals():
            signal.signal(signum, end)
        try:
            threading.Thread(target=lambda: (time.sleep(EXIT_GRACE), end()), daemon=True).start()
        except RuntimeError:  # (no new thread while the interpreter shuts down)
            end()

    for signum in stop_signals():
        signal.signal(signum, first)
    forget_caught_interrupt()


def forget_caught_interrupt() -> None:
    """CPython notes a KeyboardInterrupt that leaves Python code run by a C extension through ``PyRun_*`` (done
    during some imports) as unhandled, even when the command catches it later, and then ends the process by SIGINT
    (exit -2) instead of with the command's exit code. Running one empty statement through that path clears the
    note (``run_eval_code_obj`` resets it first)."""
    try:
        import ctypes

        ctypes.pythonapi.PyRun_SimpleString(b"pass")
    except (ImportError, AttributeError, OSError):  # (another Python implementation: nothing to clear)
        pass

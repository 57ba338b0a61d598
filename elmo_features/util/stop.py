"""Stop requests (Ctrl-C, SIGTERM) that are never lost.

The command's signal handler records the request here and raises ``KeyboardInterrupt``, so that blocking code
(a long forward pass, a download, a wait for worker processes) stops at once. Python can swallow that exception
when the signal arrives while it runs a weakref or ``__del__`` callback ("Exception ignored in: ..."); the long
loops (embedding batches, training steps, predictions) therefore call ``check()`` once per batch, which raises
it again from the recorded request. A stop is acted on within one batch either way.
"""
from __future__ import annotations

import signal

_REQUESTED: list[int] = []  # signal numbers received since the command started


def request(signum: int) -> None:
    """Record a stop request (called by the signal handler)."""
    _REQUESTED.append(int(signum))


def clear() -> None:
    """Forget earlier requests (at the start of a command)."""
    _REQUESTED.clear()


def check() -> None:
    """Raise ``KeyboardInterrupt`` when a stop was requested (again, if an earlier one was swallowed)."""
    if _REQUESTED:
        raise KeyboardInterrupt(signal.Signals(_REQUESTED[-1]).name)

"""Signal dispositions for the tests that send or inspect signals, so they pass however the suite was started: a
shell starts a background job (``cmd &`` in a script, some CI runners) with SIGINT ignored, ``nohup`` ignores SIGHUP,
and child processes inherit both; an ignored SIGINT or SIGHUP then stays ignored in the command (by design)."""
from __future__ import annotations

import contextlib
import signal

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def default_stop_signals() -> None:
    """A ``preexec_fn``: in the child, before exec, SIGINT, SIGTERM and SIGHUP back to their default action, as in a
    terminal's foreground command (Python then installs its own Ctrl-C handler at start-up)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)


@contextlib.contextmanager
def foreground_signals():
    """For the block, in this process: SIGINT at Python's own handler (KeyboardInterrupt), SIGTERM and SIGHUP at
    their default action, as in a terminal's foreground command; the dispositions found are restored after."""
    saved = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)

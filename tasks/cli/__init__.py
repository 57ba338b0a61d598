"""The ``elmo-tasks`` command: one sub-command per module, each module registers its own parser.

A module listed in COMMANDS exposes ``register(subparsers)`` that adds its parser(s) and sets
``func`` (called with the parsed args; returns an exit code or None).

Plugins: ``--include MODULE`` (anywhere on the command line) and the ``elmo_tasks.plugins`` entry points are
imported before the parsers are built (``elmo_tasks.plugins``), so a user's components can be named in configs and
are listed by ``components``.

Errors: every expected user error is an ``elmo_features.util.errors.ElmoTasksError``; it is caught here,
once, and printed as ``error: <message>`` with exit code 2 (an OSError such as "permission denied" or
"no space left on device" too; text a stream or file cannot encode, and a closed standard output for a command
that prints its result: ``elmo_tasks.cli.streams``). ``--debug`` (anywhere on the command line) or ``ELMO_TASKS_DEBUG=1``
(or true/yes/on) shows the traceback instead.

Interrupts: Ctrl-C (SIGINT), SIGTERM and SIGHUP (a closed terminal) raise ``KeyboardInterrupt`` in the main
thread (a SIGINT or SIGHUP the process inherited as ignored, e.g. a background job of a script or ``nohup``, stays
ignored). A command cleans up on the way out (a process pool terminates its workers); here one line
``interrupted; <hint>`` is printed, the hint set by the command as ``args.interrupt_hint`` (a string, or a callable
returning one), and the exit code is 128 + the signal number: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP.
Signals in the seconds after the first are only recorded, and once a command returns (stopped or done) they are
ignored until the process exits (``elmo_features.util.stop``).
"""
from __future__ import annotations

import argparse
import errno
import importlib
import os
import re
import signal
import sys
import threading
import unicodedata


def _exit_if_no_current_folder() -> None:
    """Loading torch from a deleted current folder dies with an "Intel oneMKL FATAL ERROR" about the install: say
    what is wrong, before torch is imported (this module is the ``elmo-tasks`` entry point)."""
    try:
        os.getcwd()
    except FileNotFoundError:
        sys.stderr.write("error: the current folder no longer exists (it was deleted while this shell was in it); "
                         "cd to an existing folder and run the command again\n")
        raise SystemExit(2) from None


STARTING_HINT = "it was still starting (checking its inputs, loading), and nothing was written: rerun the same command"


def _on_stop_while_loading(signum, _frame) -> None:
    """A stop before ``main`` installs its handlers: the line the later handler prints for a command still starting
    (nothing has been done yet: nothing to clean up)."""
    os.write(2, f"interrupted; {STARTING_HINT}\n".encode())
    os._exit(128 + signum)


def _is_the_command() -> bool:
    """Whether this process runs ``elmo-tasks``: its console script, or ``python [options] -m elmo_tasks.cli``."""
    if sys.argv and os.path.basename(sys.argv[0]) in ("elmo-tasks", "elmo-tasks.exe"):
        return True
    orig = list(getattr(sys, "orig_argv", []))
    for i, a in enumerate(orig):  # -m elmo_tasks.cli, -melmo_tasks.cli, and flags joined before it: -um elmo_tasks.cli, -Bm ...
        m = re.fullmatch(r"-[A-Za-z]*?m(.*)", a)
        if m and (m.group(1) or (orig[i + 1] if i + 1 < len(orig) else "")) in ("elmo_tasks.cli", "elmo_tasks.cli.__main__"):
            return True
    return False


def _stop_cleanly_while_loading() -> None:
    """Loading torch takes a second or two, before ``main`` installs its handlers: when this process is the command
    (the console script, or ``python -m elmo_tasks.cli``), a stop signal then ends it with one line and 128 + its number,
    not an import traceback or a silent death. A program of a user's that imports this package keeps its own."""
    if not _is_the_command() or threading.current_thread() is not threading.main_thread():
        return
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) is not signal.SIG_IGN:  # an inherited ignore stays
            signal.signal(signum, _on_stop_while_loading)


_exit_if_no_current_folder()
_stop_cleanly_while_loading()

from elmo_features.util.cli_types import Parser
from elmo_features.util.env import switch, warn_retired
from elmo_features.util.threads import thread_tqdm_lock
from elmo_features.util import distributed, stop
from elmo_features.util.errors import ElmoTasksError, UsageError, first_line
from elmo_features.util.once import new_command
from elmo_features.util.provenance import package_version

from elmo_tasks.experiment.config import find_config
from elmo_tasks.plugins import includes_in, load_plugins
from elmo_tasks.registry import forget_plugins_used, plugins_used
from elmo_tasks.cli.streams import (check_stdout, forgive_stderr, reader_went_away, reopen_closed_stderr,
                               soften_stderr, standard_output_failed, unicode_message)

# sub-command module, in the order shown by --help
COMMANDS = [
    "elmo_features.cli_embed",  # embed
    "elmo_features.training.cli",  # train-bilm, eval-bilm
    "elmo_features.encoders.cli",  # models get, models list
    "elmo_tasks.cli.run",  # run, compare, predict
    "elmo_tasks.cli.components",  # components
    "elmo_tasks.data.cli",  # data get
    "elmo_tasks.wsd.cli",  # wsd
]
DEBUG_ENV = "ELMO_TASKS_DEBUG"
USER_ERROR = 2  # exit code of every user error (argparse uses it too)


def _on_stop_signal(signum, _frame) -> None:
    if stop.in_grace():  # a second Ctrl-C while the first is handled: recorded, the cleanup goes on
        stop.request(signum)
        return
    stop.request(signum)  # kept: a KeyboardInterrupt that Python swallows is raised again by stop.check()
    raise KeyboardInterrupt(signal.Signals(signum).name)


def install_stop_signals() -> dict:
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt (so ``finally`` blocks run); an ignored SIGINT or SIGHUP
    stays ignored (``stop.stop_signals``). Returns the previous handlers (for ``signal.signal`` to restore)."""
    stop.clear()
    stop.quiet_swallowed_stops()
    return {signum: signal.signal(signum, _on_stop_signal) for signum in stop.stop_signals()}


def interrupt_exit_code() -> int:
    """128 + the number of the signal that stopped the command (130 for Ctrl-C, 143 for SIGTERM): the first one
    ``stop`` recorded, whichever way its KeyboardInterrupt reached ``main`` (raised again by ``stop.check()``, or
    chained through a cleanup); SIGINT only for a KeyboardInterrupt that no recorded signal explains."""
    first = stop.first()
    return 128 + int(first if first is not None else signal.SIGINT)


DESCRIPTION = """\
Downstream NLP on frozen ELMo-style features: embed text with a biLM or a Transformer encoder, train and
compare task heads (NER, POS, sentiment) on them, and disambiguate word senses."""
EXAMPLES = """\
examples:
  elmo-tasks data get conll2003 glove-6b-50d
      fetch the data sets the packaged NER configs read (into ./data)
  elmo-tasks compare tiny_ner_conll2003
      compare feature sources on a small NER task (a packaged config)
  elmo-tasks wsd tag sentences.txt --senses senses.h5
      tag the word senses of a text, with a sense file made by
      elmo-tasks wsd senses --source minilm --out senses.h5

'elmo-tasks COMMAND --help' shows a command's options; 'elmo-tasks configs list' the packaged configs."""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="elmo-tasks", description=DESCRIPTION, epilog=EXAMPLES,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-V", "--version", action="version", version=f"%(prog)s {package_version()}",
                        help="print the version and exit")
    parser.add_argument("--debug", action="store_true",
                        help=f"show the traceback of an error (also: {DEBUG_ENV}=1); may follow the sub-command")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    parser.set_defaults(find_config=find_config)  # train-bilm --config takes a packaged config's name too
    return parser


def one_line(text: str) -> str:
    """``text`` on one line: a line break or other control character (a newline in a path, an escape sequence) is
    shown escaped, as ``repr`` shows it (``\\n``), so a log reader sees the whole message and the exact path."""
    return "".join(c if c == "\t" or unicodedata.category(c) not in ("Cc", "Zl", "Zp")
                   else repr(c)[1:-1] for c in text)


def error_message(e: BaseException) -> str:
    """One line for a user error."""
    relayed = re.match(r"(rank \d+): ", str(e)) if isinstance(e, distributed.DistributedError) else None
    if relayed and out_of_memory(e):  # (another rank's allocation failure, passed on in torch's words)
        return f"{relayed.group(1)}: {other_error_message(e)}"
    if isinstance(e, OSError) and not isinstance(e, ElmoTasksError) and e.filename is not None:
        text, code = e.strerror or str(e), e.errno
        hdf5 = re.search(r"errno = (\d+), error message = '([^']*)'", text)  # (HDF5 quotes the system's error in a
        if hdf5:  # long report: its first words and the system's message are what a user needs)
            code, text = int(hdf5.group(1)), f"{hdf5.group(2)} ({text.split(' (')[0]})"
        full = code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
        hint = ("; free some space or write the output elsewhere" if full else
                "; write the output elsewhere" if code == errno.EROFS else "")
        return one_line(f"{e.filename}: {text}{hint}")
    if isinstance(e, OSError) and not isinstance(e, ElmoTasksError) and standard_output_failed(e):
        hint = "raise the file-size limit (ulimit -f)" if e.errno == errno.EFBIG else "free some space"
        return one_line(f"standard output: {e.strerror or e}; {hint}, or redirect it elsewhere")
    return one_line(str(e).strip()) or type(e).__name__


RANKED_COMMANDS = ("run", "compare", "embed", "train-bilm", "wsd senses")  # the commands that run as torchrun ranks
UNRANKED_WRITERS = ("predict", "eval-bilm", "wsd", "data", "models")  # the others that do long work or write


HINTED_COMMANDS = ("run", "compare", "predict", "embed", "train-bilm", "eval-bilm", "wsd", "data")  # (they say what
# was kept, and how to go on, once their work has begun; until then: STARTING_HINT)


def check_not_ranked(args) -> None:
    """A command that does work but does not run as torchrun ranks, launched by torchrun: UsageError (else every rank
    would do the whole work, and all but one stop at the output's lock)."""
    command = getattr(args, "command", None)
    if command == "wsd" and getattr(args, "wsd_command", None) == "senses":
        return  # (its ranks take shards of SemCor and of the glosses)
    if command in UNRANKED_WRITERS and distributed.torchrun_world() > 1:
        raise UsageError(f"{command} does not run under torchrun (WORLD_SIZE={distributed.torchrun_world()}): run it "
                         f"as one process; torchrun runs {', '.join(RANKED_COMMANDS)}")


def out_of_memory(e: BaseException) -> str:
    """What an allocation failure tried (torch's "can't allocate memory: you tried to allocate N bytes"), or ''."""
    if isinstance(e, MemoryError):
        return "a Python allocation failed"
    m = re.search(r"can't allocate memory: you tried to allocate (\d+) bytes", str(e))
    return f"an allocation of {int(m.group(1)) / 2**30:,.1f} GB failed" if m else ""


def other_error_message(e: Exception) -> str | None:
    """One line for an error that is not the toolkit's own kind but is the user's to fix: settings too large for
    the machine's memory (a 10^9-wide layer), text an output (a stream, a UTF-8 file) cannot hold, or any error with
    a plugin's component in play (most likely it broke its contract: shapes, types); None for the others."""
    if isinstance(e, (MemoryError, RuntimeError)) and out_of_memory(e):
        return (f"out of memory: {out_of_memory(e)}; lower the sizes in the config (layer widths, batch sizes), or run "
                "on a machine with more memory")
    if isinstance(e, UnicodeError):
        return one_line(unicode_message(e))
    return plugin_error_message(e) if plugins_used() else None


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (None: the process's own, ``sys.argv``); returns its exit code. For the
    process's own command, a stop signal after it returned ends the process with that code (``stop.end_on_signals``)."""
    code = 1  # (a traceback's)
    try:
        code = _main(argv)
    except SystemExit as e:  # (argparse: --help, a usage error)
        code = e.code if isinstance(e.code, int) else int(e.code is not None)
        raise
    finally:
        if argv is None and threading.current_thread() is threading.main_thread():
            stop.end_on_signals(code)
    return code


def _main(argv: list[str] | None) -> int:
    from_command_line = argv is None  # the process's own command (it exits when main returns)
    argv = list(sys.argv[1:] if argv is None else argv)
    _start(from_command_line)
    debug = switch(DEBUG_ENV, False, "tracebacks stay off") or "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    try:  # before the parsers: a plugin's components are named in configs and listed by `components`
        load_plugins(includes_in(argv))
    except KeyboardInterrupt:  # (a stop signal while the plugins load: a plugin's own KeyboardInterrupt is its error)
        print(f"interrupted; {STARTING_HINT}", file=sys.stderr, flush=True)
        code = interrupt_exit_code()
        stop.clear()  # (a process that goes on must not see this command's stop request)
        return code
    except ElmoTasksError as e:
        if debug:
            raise
        print(f"error: {error_message(e)}", file=sys.stderr)
        return USER_ERROR
    parser = build_parser()
    args = parser.parse_args(argv)
    old = install_stop_signals() if threading.current_thread() is threading.main_thread() else {}
    try:
        check_stdout(args)
        check_not_ranked(args)
        if getattr(args, "command", None) in HINTED_COMMANDS:
            args.interrupt_hint = STARTING_HINT
        rc = args.func(args)
    except KeyboardInterrupt:
        hint = getattr(args, "interrupt_hint", None)
        hint = hint() if callable(hint) else hint
        print("interrupted" + (f"; {hint}" if hint else ""), file=sys.stderr, flush=True)
        if from_command_line and distributed.left_group():  # (a rank stopped while joining: the join's thread is
            _end_now(interrupt_exit_code())  # still in PyTorch's C++ code, which cannot shut down under it)
        return interrupt_exit_code()
    except BrokenPipeError:
        if from_command_line and not debug:
            return reader_went_away()
        raise
    except (ElmoTasksError, OSError) as e:
        if debug:
            raise
        print(f"error: {error_message(e)}", file=sys.stderr)
        if from_command_line and getattr(e, "exit_now", False):  # a library that would crash at exit (HDF5 after a
            _end_now(USER_ERROR)  # failed write): the process ends here, its one line said
        return USER_ERROR
    except Exception as e:  # out of memory, text an output cannot hold, a plugin that broke its contract: one line
        message = None if debug else other_error_message(e)
        if message is None:  # (the toolkit's own bugs keep their traceback)
            raise
        print(f"error: {message}", file=sys.stderr)
        return USER_ERROR
    finally:
        if from_command_line:  # the process only exits now: a late signal must not turn a finished command into a
            stop.ignore_signals()  # silent 130/143 (nor a KeyboardInterrupt in atexit)
        elif old:  # called in a process that goes on: its next work must not see this command's stop request
            for signum, handler in old.items():
                signal.signal(signum, handler)
            stop.clear()
    if from_command_line and distributed.left_group():  # a torchrun rank whose work is done: no interpreter shutdown
        _end_now(int(rc or 0))  # (gloo's threads can abort it after a finished command)
    return int(rc or 0)


def _start(from_command_line: bool) -> None:
    """What every command does first: standard streams made safe, and nothing said or looked up by an earlier
    command of this process carried over."""
    if from_command_line:
        reopen_closed_stderr()
        thread_tqdm_lock()  # no multiprocessing semaphore (and its resource tracker) until a process pool starts
    soften_stderr()
    if from_command_line:
        forgive_stderr()
    warn_retired()
    new_command()  # (warnings said once per command: main called again in one process is another command)
    forget_plugins_used()


def plugin_error_message(e: BaseException) -> str:
    """One line for an unexpected error in a command that used plugin components (``plugins_used``)."""
    return (f"{type(e).__name__}: {one_line(first_line(e))} (in a command using the plugin component(s) "
            f"{'; '.join(plugins_used())}: a component that returns other shapes or types than its contract says "
            "fails inside the toolkit like this; rerun with --debug for the traceback)")


def _end_now(code: int) -> None:
    """End the process at once with ``code``, its output flushed (no interpreter shutdown)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


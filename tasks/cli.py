"""The ``elmo-tasks`` command: one sub-command per module, each module registers its own parser.

A module listed in COMMANDS exposes ``register(subparsers)`` that adds its parser(s) and sets
``func`` (called with the parsed args; returns an exit code or None).

Errors: every expected user error is an ``elmo_features.errors.ElmoTasksError``; it is caught here,
once, and printed as ``error: <message>`` with exit code 2 (an OSError such as "permission denied" or
"no space left on device" too). ``--debug`` (anywhere on the command line) or ``ELMO_TASKS_DEBUG=1``
shows the traceback instead.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from elmo_features.errors import ElmoTasksError

# sub-command module, in the order shown by --help
COMMANDS = [
    "elmo_features.cli_embed",  # embed
    "elmo_features.training.cli",  # train-bilm, eval-bilm
    "tasks.cli_run",  # run, compare, predict
    "tasks.data.cli",  # data get
    "tasks.wsd.cli",  # wsd
]
DEBUG_ENV = "ELMO_TASKS_DEBUG"
USER_ERROR = 2  # exit code of every user error (argparse uses it too)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="elmo-tasks", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true",
                        help=f"show the traceback of an error (also: {DEBUG_ENV}=1); may follow the sub-command")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        if importlib.util.find_spec(name.rsplit(".", 1)[0]) is None:
            continue
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:
                continue  # sub-command not built yet
            raise
        module.register(sub)
    return parser


def error_message(e: BaseException) -> str:
    """One line for a user error."""
    if isinstance(e, OSError) and not isinstance(e, ElmoTasksError) and e.filename is not None:
        return f"{e.filename}: {e.strerror or e}"
    return " ".join(str(e).split("\n")) or type(e).__name__


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    argv = [a for a in argv if a != "--debug"]
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except KeyboardInterrupt:
        hint = getattr(args, "interrupt_hint", None)
        print("interrupted" + (f"; {hint}" if hint else ""), file=sys.stderr)
        return 130
    except (ElmoTasksError, OSError) as e:
        if debug:
            raise
        print(f"error: {error_message(e)}", file=sys.stderr)
        return USER_ERROR
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())

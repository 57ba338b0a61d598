"""The ``elmo-tasks`` command: one sub-command per module, each module registers its own parser.

A module listed in COMMANDS exposes ``register(subparsers)`` that adds its parser(s) and sets
``func`` (called with the parsed args; returns an exit code or None).
"""
from __future__ import annotations

import argparse
import importlib
import sys

# sub-command module, in the order shown by --help
COMMANDS = [
    "elmo_features.cli_embed",  # embed
    "elmo_features.training.cli",  # train-bilm, eval-bilm
    "tasks.cli_run",  # run, compare, predict
    "tasks.data.cli",  # data get
    "tasks.wsd.cli",  # wsd
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="elmo-tasks", description=__doc__.splitlines()[0])
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())

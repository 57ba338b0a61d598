"""``python -m elmo_features.embed`` (e.g. ``torchrun --nproc-per-node N -m elmo_features.embed IN OUT``).

The ``embed`` sub-command on its own, with the same error policy as ``elmo-tasks``: a user error is one
line on stderr and exit code 2 (``--debug`` or ELMO_TASKS_DEBUG=1 shows the traceback).
"""
from __future__ import annotations

import sys

from elmo_features.cli_embed import register
from elmo_features.util.cli_types import Parser
from elmo_features.util.env import DEBUG, switch
from elmo_features.util.errors import ElmoTasksError


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or switch(DEBUG, False, "tracebacks stay off")
    argv = [a for a in argv if a != "--debug"]
    parser = Parser(prog="python -m elmo_features.embed")
    sub = parser.add_subparsers(dest="command")
    register(sub)
    sub.choices["embed"].prog = parser.prog  # (its errors and help name the command as typed)
    args = parser.parse_args(["embed", *argv])
    try:
        return int(args.func(args) or 0)
    except (ElmoTasksError, OSError) as e:
        if debug:
            raise
        msg = f"{e.filename}: {e.strerror or e}" if isinstance(e, OSError) and not isinstance(e, ElmoTasksError) \
            and e.filename is not None else " ".join(str(e).split()) or type(e).__name__
        print(f"error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

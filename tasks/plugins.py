"""Components from the user's own code: ``--include MODULE`` and the ``elmo_tasks.plugins`` entry-point group.

A plugin is an ordinary Python module (or package) whose classes and functions register themselves with the
decorators of ``tasks.registry`` (``@HEADS.register("my_head")``, ``@FEATURES.register(...)``,
``@READERS.register(..., path_kind=...)``), as the built-in components do. Importing it is all it takes:

* ``--include MODULE`` (repeatable, in every command that reads a config, and in ``components``) imports
  MODULE, and every submodule when it is a package, like AllenNLP's ``--include-package``; the current folder
  is searched first, so a module next to the config works without installing it;
* an installed distribution can declare ``[project.entry-points."elmo_tasks.plugins"] NAME = "pkg.module"``;
  every such entry point is imported at the start of each command.

A component that does not meet its registry's contract fails when it registers, with one line naming what is
missing (``tasks.registry.ContractError``). The modules loaded here are loaded again in the worker processes
of ``compare --jobs N`` (``loaded_includes``). ``plugin_digests`` fingerprints the source files of the plugin
modules a run uses (recorded in its metrics.json: ``compare --resume`` refuses a run made with another version).
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import importlib.metadata
import inspect
import os
import pkgutil
import sys
from collections.abc import Iterable

from elmo_features.util.errors import ElmoTasksError

from tasks.registry import CHAR_ENCODERS, FEATURES, FUSIONS, HEADS, READERS

ENTRY_POINT_GROUP = "elmo_tasks.plugins"
_INCLUDED: list[str] = []  # modules loaded by --include, in order (for worker processes)
_ENTRY_POINTS_LOADED = [False]


class PluginError(ElmoTasksError, ImportError):
    """A plugin module named by --include cannot be imported, or a component in it breaks its contract."""


def add_include_argument(parser) -> None:
    """The ``--include MODULE`` option (read by ``tasks.cli.main`` before the command's parser runs)."""
    parser.add_argument("--include", action="append", default=[], metavar="MODULE",
                        help="import MODULE (and its submodules) first, so that the heads, feature sources, fusions "
                             "and readers it registers can be named in configs; repeatable")


def includes_in(argv: Iterable[str]) -> list[str]:
    """The modules named by ``--include MODULE`` / ``--include=MODULE`` anywhere in a command line."""
    argv, out = list(argv), []
    for i, a in enumerate(argv):
        if a == "--include" and i + 1 < len(argv):
            out.append(argv[i + 1])
        elif a.startswith("--include="):
            out.append(a.split("=", 1)[1])
    return out


def _import_tree(name: str) -> None:
    """Import module ``name`` and, when it is a package, all of its submodules. An exception raised by one of them
    carries that module's name as ``plugin_module``."""
    current = name
    try:
        module = importlib.import_module(name)
        for info in pkgutil.walk_packages(getattr(module, "__path__", []), prefix=f"{name}."):
            current = info.name
            importlib.import_module(info.name)
    except BaseException as e:
        e.plugin_module = current
        raise


def _failed_module(name: str, e: BaseException) -> str:
    """Which module of ``--include name`` raised ``e``: "it" or "its submodule NAME", with its file when known."""
    sub = getattr(e, "plugin_module", name)
    try:
        spec = importlib.util.find_spec(sub)
    except (ImportError, ValueError):
        spec = None
    where = f" ({spec.origin})" if spec is not None and spec.origin else ""
    return ("it" if sub == name else f"its submodule {sub}") + where


def include(name: str) -> None:
    """Import a plugin module (and its submodules); one PluginError line when that fails."""
    if name in _INCLUDED:
        return
    if not name or any(not part.isidentifier() for part in name.split(".")):
        raise PluginError(f"--include {name!r}: not a module name (give a dotted Python module name such as "
                          "my_package.components, not a file path)")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # a module next to the user's config, as `python -m` would find it
    try:
        _import_tree(name)
    except ElmoTasksError as e:  # e.g. a ContractError: already one line
        raise PluginError(f"--include {name}: {e}") from None
    except ImportError as e:
        if getattr(e, "name", None) == name:
            raise PluginError(f"--include {name}: module not found; is it installed, or in the current folder "
                              f"{os.getcwd()}?") from None
        raise PluginError(f"--include {name}: importing {_failed_module(name, e)} failed ({type(e).__name__}: "
                          f"{' '.join(str(e).split())})") from None
    except Exception as e:  # a bug in the plugin: name it on one line (--debug shows the traceback)
        raise PluginError(f"--include {name}: importing {_failed_module(name, e)} raised {type(e).__name__}: "
                          f"{' '.join(str(e).split())}") from e
    except SystemExit as e:  # a script's sys.exit() at import would end the command, even with exit code 0
        raise PluginError(f"--include {name}: importing it called sys.exit({e.code!r}); a plugin module must not "
                          "exit when imported (put script code under `if __name__ == \"__main__\":`)") from None
    _INCLUDED.append(name)


def load_entry_points() -> list[str]:
    """Import every ``elmo_tasks.plugins`` entry point of the installed distributions (once per process).
    A plugin that fails is reported on one warning line and skipped: a broken install must not stop every
    command. Returns the names loaded."""
    if _ENTRY_POINTS_LOADED[0]:
        return []
    _ENTRY_POINTS_LOADED[0] = True
    loaded = []
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(getattr(ep, "dist", None), "name", "?")
        try:
            ep.load()
        except (Exception, SystemExit) as e:  # noqa: BLE001  (any failure of foreign code: one line, then go on)
            print(f"warning: plugin {ep.name} = {ep.value} (entry point of {dist}) was not loaded: "
                  f"{type(e).__name__}: {' '.join(str(e).split())}; its components are unavailable",
                  file=sys.stderr, flush=True)
            continue
        loaded.append(ep.name)
    return loaded


def load_plugins(includes: Iterable[str] = ()) -> None:
    """The installed entry-point plugins, then each ``--include`` module."""
    load_entry_points()
    for name in includes:
        include(name)


def loaded_includes() -> list[str]:
    """The ``--include`` modules loaded in this process (worker processes load them too)."""
    return list(_INCLUDED)


BUILT_IN = ("tasks", "elmo_features")  # packages whose components are not plugins (their code is the git commit's)


def plugin_digests(config: dict) -> dict[str, str]:
    """module -> sha256 of its source file, for every plugin module a run of ``config`` (a config dict) uses: the
    ``--include`` modules (and their loaded submodules) and the module of each registered non-built-in component
    that the config names (any string value of it that is a registered name). Modules without a source file are
    left out."""
    modules = {m for name in _INCLUDED for m in sys.modules if m == name or m.startswith(name + ".")}
    for value in _strings(config):
        for registry in (HEADS, FEATURES, FUSIONS, CHAR_ENCODERS, READERS):
            if value in registry:
                module = getattr(registry.get(value), "__module__", None) or ""
                if module and module.split(".")[0] not in BUILT_IN:
                    modules.add(module)
    out = {}
    for name in sorted(modules):
        try:
            path = inspect.getsourcefile(sys.modules[name])
            with open(path, "rb") as f:  # type: ignore[arg-type]
                out[name] = hashlib.sha256(f.read()).hexdigest()
        except (KeyError, TypeError, OSError):  # no such module loaded, or no source file (a built-in, a REPL)
            continue
    return out


def _strings(value) -> list[str]:
    """Every string value in a (nested) config."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def changed_plugin(saved: dict | None, now: dict[str, str]) -> tuple[str, str, str] | None:
    """(module, sha256 then, sha256 now) of the first plugin module recorded in ``saved`` (a run's
    ``plugin_modules``; missing: no plugins) whose source file differs now, else None."""
    for name, digest in sorted((saved or {}).items()):
        if name in now and now[name] != digest:
            return name, str(digest), now[name]
    return None

"""Components from the user's own code: ``--include MODULE`` and the ``elmo_tasks.plugins`` entry-point group.

A plugin is an ordinary Python module (or package) whose classes and functions register themselves with the
decorators of ``elmo_tasks.registry`` (``@HEADS.register("my_head")``, ``@FEATURES.register(...)``,
``@READERS.register(..., path_kind=...)``), as the built-in components do. Importing it is all it takes:

* ``--include MODULE`` (repeatable, in every command that reads a config, and in ``components``) imports
  MODULE, and every submodule when it is a package, like AllenNLP's ``--include-package``; the current folder
  is searched first, so a module next to the config works without installing it;
* an installed distribution can declare ``[project.entry-points."elmo_tasks.plugins"] NAME = "pkg.module"``;
  every such entry point is imported at the start of each command.

A component that does not meet its registry's contract fails when it registers, with one line naming what is
missing (``elmo_tasks.registry.ContractError``). The modules loaded here are loaded again in the worker processes
of ``compare --jobs N`` (``loaded_includes``). ``plugin_digests`` fingerprints the source files of the plugin
modules a run uses (recorded in its metrics.json: ``compare --resume`` refuses a run made with another version).
"""
from __future__ import annotations

import builtins
import contextlib
import hashlib
import importlib
import importlib.util
import importlib.metadata
import inspect
import multiprocessing
import os
import pkgutil
import sys
from collections.abc import Iterable
from pathlib import Path

from elmo_features.util import stop
from elmo_features.util.errors import ElmoTasksError
from elmo_features.util.shadowing import installed_dirs, shadowing_file

from elmo_tasks.registry import CHAR_ENCODERS, FEATURES, FUSIONS, HEADS, READERS

ENTRY_POINT_GROUP = "elmo_tasks.plugins"
BUILT_IN = ("elmo_tasks", "elmo_features")  # packages whose components are not plugins (their code is the git commit's)
_INCLUDED: list[str] = []  # modules loaded by --include, in order (for worker processes)
_ENTRY_POINTS_LOADED = [False]


class PluginError(ElmoTasksError, ImportError):
    """A plugin module named by --include cannot be imported, or a component in it breaks its contract."""


def add_include_argument(parser) -> None:
    """The ``--include MODULE`` option (read by ``elmo_tasks.cli.main`` before the command's parser runs)."""
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
    """Import module ``name`` and, when it is a package, all of its submodules but ``__main__`` ones (a package's
    script: importing it runs it). An exception raised by one of them carries that module's name as
    ``plugin_module``."""
    current = name
    try:
        module = importlib.import_module(name)
        for info in pkgutil.walk_packages(getattr(module, "__path__", []), prefix=f"{name}."):
            if info.name.rsplit(".", 1)[-1] == "__main__":
                continue
            current = info.name
            importlib.import_module(info.name)
    except BaseException as e:
        e.plugin_module = current
        raise


def _toolkit_folders() -> list[Path]:
    """The source folders of the toolkit's own packages (``BUILT_IN``)."""
    out = []
    for top in BUILT_IN:
        module = sys.modules.get(top) or importlib.import_module(top)
        out += [Path(p).resolve() for p in getattr(module, "__path__", [])]
    return out


def is_toolkit(module: str) -> bool:
    """Whether ``module`` is the toolkit's own code: one of its packages or submodules, or a module found inside its
    source folders under another name (``tasks`` from a checkout). Found without importing ``module``."""
    top = module.split(".")[0]
    if top in BUILT_IN:
        return True
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    places = list(spec.submodule_search_locations or []) + ([spec.origin] if spec.has_location else [])
    folders = _toolkit_folders()
    return any(Path(p).resolve() == f or Path(p).resolve().is_relative_to(f) for p in places for f in folders)


@contextlib.contextmanager
def _builtins_kept():
    """Python's builtins (print, open, ...) that a plugin replaces or deletes while it is imported are put back, and
    the plugin's failure is one PluginError naming them: the toolkit's own code (its error line too) calls them."""
    before = dict(vars(builtins))
    try:
        yield
    finally:
        changed = sorted(k for k, v in before.items() if vars(builtins).get(k, _builtins_kept) is not v)
        vars(builtins).update({k: before[k] for k in changed})
    if changed:
        raise PluginError(f"it replaced or deleted Python's builtin(s) {', '.join(changed)} (put back); a plugin "
                          "module must not change builtins: import what it needs instead")


@contextlib.contextmanager
def _torch_defaults_kept():
    """torch's default dtype and device, when a plugin changes them while it is imported (``torch.set_default_dtype(
    torch.float64)``, ``torch.set_default_device("meta")``), are put back, and the plugin's failure is one
    PluginError naming them: the toolkit's models would be built in that dtype or on that device and fail on its
    float32 features (or hold no data at all)."""
    import torch

    dtype, device = torch.get_default_dtype(), torch.get_default_device()
    try:
        yield
    finally:
        now_dtype, now_device = torch.get_default_dtype(), torch.get_default_device()
        torch.set_default_dtype(dtype)
        if now_device != device:  # (cpu: the mode removed, as before any plugin ran)
            torch.set_default_device(None if device == torch.device("cpu") else device)
    changed = [(kind, now, then, why) for kind, now, then, why in (
        ("dtype", now_dtype, dtype, "the toolkit's models and features are float32, and heads built in another dtype "
                                    "fail on them"),
        ("device", now_device, device, "the toolkit puts its models and features on the device it is given "
                                       "(--device, cpu by default), and models built on another device fail on them"))
        if now != then]
    if changed:
        said = " and ".join(f"torch's default {kind} to {now} (put back to {then})" for kind, now, then, _ in changed)
        kinds = [kind for kind, *_ in changed]
        raise PluginError(f"it set {said}; {'; '.join(why for *_, why in changed)}: a plugin module must not change "
                          f"the default {' or '.join(kinds)} (give {'= or '.join(kinds)}= to its own tensors instead)")


@contextlib.contextmanager
def _stdout_to_stderr():
    """What a plugin prints while it is imported goes to standard error: a command's standard output (a YAML config,
    JSON lines) stays its own."""
    if sys.stdout is not None:
        sys.stdout.flush()
    with contextlib.redirect_stdout(sys.stderr):
        try:
            yield
        finally:
            if sys.stderr is not None:
                sys.stderr.flush()


def _failed_module(name: str, e: BaseException) -> str:
    """Which module of ``--include name`` raised ``e``: "it" or "its submodule NAME", with its file when known."""
    sub = getattr(e, "plugin_module", name)
    try:
        spec = importlib.util.find_spec(sub)
    except (ImportError, ValueError):
        spec = None
    where = f" ({spec.origin})" if spec is not None and spec.origin else ""
    return ("it" if sub == name else f"its submodule {sub}") + where


def _own_file_shadowed(name: str) -> str | None:
    """When a module file or package of ``name``'s top-level name lies in the current folder but the name resolves
    to another module (one Python has already imported, such as pprint or json, a built-in one, or one found earlier
    on the path): the PluginError message saying both, else None. Found without importing ``name``."""
    top, here = name.split(".")[0], Path.cwd()
    mine = [p for p in (here / f"{top}.py", here / top / "__init__.py") if p.is_file()]
    if not mine:
        return None
    module = sys.modules.get(top)
    try:
        spec = None if module is not None else importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if module is not None:
        places = list(getattr(module, "__path__", None) or []) + [getattr(module, "__file__", None) or ""]
    elif spec is not None:
        places = list(spec.submodule_search_locations or []) + ([spec.origin] if spec.has_location else [])
    else:
        return None
    places = [str(p) for p in places if p]
    ours = mine[0] if mine[0].name == f"{top}.py" else mine[0].parent
    new = f"my_{top}"
    rename = f"rename it (e.g. to {new}{'.py' if ours.suffix == '.py' else ''}) and give --include {new}" \
        f"{name[len(top):]}"
    if any(Path(p).resolve() in (m.resolve(), m.parent.resolve()) for p in places for m in mine):  # (the current
        # folder's own file or package, unless it takes the name of an installed package, such as transformers)
        hides = shadowing_file(top)
        return None if hides is None else (f"--include {name}: {ours} in the current folder has the name of the "
                                           f"installed package {top} ({hides[1]}), which it would hide for the whole "
                                           f"command (the toolkit and the libraries it uses import that package "
                                           f"too); {rename}")
    kind = "package" if module is not None and hasattr(module, "__path__") or spec and spec.submodule_search_locations \
        else "module"
    found = (f"the {kind} {places[0]}" if places else f"Python's built-in module {top}") + \
        (" (already imported)" if module is not None else "")
    return f"--include {name}: the name {top} is {found}, so {ours} in the current folder was not loaded; {rename}"


def _registered(tree: str | None = None) -> int:
    """How many components the registries hold (``tree``: those defined in that module or its submodules)."""
    return sum(1 for r in (HEADS, FEATURES, FUSIONS, CHAR_ENCODERS, READERS) for _, obj in r.items()
               if tree is None or f"{getattr(obj, '__module__', None)}.".startswith(f"{tree}."))


def include(name: str) -> None:
    """Import a plugin module (and its submodules); one PluginError line when that fails or when ``name`` is not
    the file of that name in the current folder; one warning when a module imported here registers nothing."""
    if name in _INCLUDED:
        return
    if not name or any(not part.isidentifier() for part in name.split(".")):
        raise PluginError(f"--include {name!r}: not a module name (give a dotted Python module name such as "
                          "my_package.components, not a file path)")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # a module next to the user's config, as `python -m` would find it
    if is_toolkit(name):
        raise PluginError(f"--include {name}: this is the toolkit's own code, which every command loads by itself; "
                          "--include names your own plugin module (one that registers components), or leave it out")
    shadowed = _own_file_shadowed(name)
    if shadowed:
        raise PluginError(shadowed)
    stops, before = stop.count(), _registered()
    try:
        with _stdout_to_stderr(), stop.noted(), _builtins_kept(), _torch_defaults_kept():
            _import_tree(name)
    except ElmoTasksError as e:  # e.g. a ContractError: already one line
        raise PluginError(f"--include {name}: {e}") from None
    except ImportError as e:
        if getattr(e, "name", None) == name and name.endswith(".py") and "." not in name[:-3]:
            raise PluginError(f"--include {name}: give the module name, {name[:-3]!r}, not the file name (it is "
                              "imported as Python imports modules: from the current folder or an installed package)")
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
    except KeyboardInterrupt:
        if stop.count() > stops:  # a real stop (Ctrl-C, SIGTERM) while it was imported: the command stops
            raise
        raise PluginError(f"--include {name}: importing {_failed_module(name, sys.exc_info()[1])} raised "
                          "KeyboardInterrupt itself (no stop signal was received); a plugin module must not stop the "
                          "command when imported") from None
    if _registered() == before and not _registered(name) and multiprocessing.parent_process() is None:  # (a
        # worker process: its parent said it)
        print(f"warning: --include {name}: it registered no component (head, feature source, fusion, char encoder or "
              "reader), so a config can name nothing from it; is it the module you meant?", file=sys.stderr,
              flush=True)
    _INCLUDED.append(name)


def load_entry_points() -> list[str]:
    """Import every ``elmo_tasks.plugins`` entry point of the installed distributions (once per process).
    A plugin that fails in any way (an exception, ``sys.exit``, a KeyboardInterrupt raised by its code rather than
    by a stop signal) is named on one warning line and skipped: a broken install must not stop every command.
    Returns the names loaded."""
    if _ENTRY_POINTS_LOADED[0]:
        return []
    _ENTRY_POINTS_LOADED[0] = True
    loaded = []
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(getattr(ep, "dist", None), "name", "?")
        where = f"plugin {ep.name} (entry point of distribution {dist}, module {ep.module})"
        if is_toolkit(ep.module):
            print(f"warning: {where} was not loaded: it is the toolkit's own code, which every command loads by "
                  f"itself; fix or uninstall {dist} (pip uninstall {dist})", file=sys.stderr, flush=True)
            continue
        stops = stop.count()
        try:
            with _stdout_to_stderr(), stop.noted(), _builtins_kept(), _torch_defaults_kept():
                ep.load()
        except BaseException as e:  # noqa: BLE001  (any failure of foreign code: one line, then go on)
            if isinstance(e, KeyboardInterrupt) and stop.count() > stops:  # a real stop: the command stops
                raise
            said = f"SystemExit: it called sys.exit({e.code!r})" if isinstance(e, SystemExit) else \
                f"{type(e).__name__}: {' '.join(str(e).split())}".rstrip(": ")
            print(f"warning: {where} was not loaded: {said}; its components are unavailable (fix or uninstall "
                  f"{dist}: pip uninstall {dist})", file=sys.stderr, flush=True)
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



def plugin_digests(config: dict) -> dict[str, str]:
    """module -> sha256 of its source file, for every plugin module a run of ``config`` (a config dict) uses: the
    ``--include`` modules (and their loaded submodules), the modules loaded from an include's own folder (its
    helpers: ``import myhelper`` beside ``myfeat.py``), and the module of each registered non-built-in component
    that the config names (any string value of it that is a registered name). Modules without a source file are
    left out."""
    modules = {m for name in _INCLUDED for m in sys.modules if m == name or m.startswith(name + ".")}
    modules |= _helper_modules()
    for value in _strings(config):
        for registry in (HEADS, FEATURES, FUSIONS, CHAR_ENCODERS, READERS):
            if value in registry:
                module = getattr(registry.get(value), "__module__", None) or ""
                if module and module.split(".")[0] not in BUILT_IN:
                    modules.add(module)
    out = {}
    for name in sorted(modules):
        digest = _digest(_source_file(sys.modules.get(name)))
        if digest:
            out[name] = digest
    return out


def _source_file(module) -> str | None:
    try:
        return inspect.getsourcefile(module)
    except TypeError:  # a built-in module, or None
        return None


def _digest(path: str | None) -> str | None:
    """sha256 of the file ``path``; None when there is none or it cannot be read."""
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _helper_modules() -> set[str]:
    """The loaded modules whose source lies in the folder an ``--include`` module was imported from (the folder of
    ``myfeat.py``, or the parent of a package ``plugins/``), other than the toolkit's own and installed ones."""
    installed = installed_dirs()
    roots = set()
    for name in _INCLUDED:
        top = sys.modules.get(name.split(".")[0])
        paths = list(getattr(top, "__path__", None) or [])
        where = Path(paths[0]) if paths else Path(_source_file(top) or "")
        if where != Path(""):
            root = where.resolve().parent
            if not any(root.is_relative_to(d) for d in installed):
                roots.add(root)
    if not roots:
        return set()
    found = set()
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in BUILT_IN or not isinstance(getattr(module, "__file__", None), str):
            continue
        path = Path(module.__file__).resolve()
        if any(path.is_relative_to(r) for r in roots) and not any(path.is_relative_to(d) for d in installed):
            found.add(name)
    return found


def _strings(value) -> list[str]:
    """Every string value in a (nested) config."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def changed_plugin(saved: dict | None, now: dict[str, str]) -> str | None:
    """A phrase naming the first plugin module recorded in ``saved`` (a run's ``plugin_modules``; missing: no
    plugins) whose source differs now (``now``: ``plugin_digests``; a module not loaded yet is looked up without
    running it), or that cannot be found any more (moved or renamed); else None."""
    for name, digest in sorted((saved or {}).items()):
        current = now.get(name) or _digest(_spec_origin(name))
        if current is None:
            return (f"plugin module {name} (sha256 {str(digest)[:12]}), which cannot be found now (moved or renamed, "
                    "or its folder is not the current one)")
        if current != digest:
            return f"another version of plugin module {name} (sha256 {str(digest)[:12]} -> {current[:12]})"
    return None


def _spec_origin(name: str) -> str | None:
    """The source file module ``name`` would be imported from (its parent packages are imported), or None."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    return spec.origin if spec is not None and spec.has_location else None

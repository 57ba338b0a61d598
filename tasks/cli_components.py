"""``elmo-tasks components [KIND [NAME]]``: the registered components configs can name, and the keys of one.

Every key is shown with its type and range, its default and its doc, as declared once in the component's
``Config`` dataclass (``elmo_features.util.schema.key``); readers show their keyword options.
"""
from __future__ import annotations

import inspect
import json

from elmo_features.util.errors import UsageError
from elmo_features.util.config_docs import describe_keys, spec_text
from elmo_features.util.schema import option_specs

from . import data as _data, features as _features, heads as _heads  # noqa: F401  (fills the registries)
from .plugins import add_include_argument
from .registry import CHAR_ENCODERS, FEATURES, FUSIONS, HEADS, READERS

KINDS = {"heads": HEADS, "features": FEATURES, "fusions": FUSIONS, "chars": CHAR_ENCODERS, "readers": READERS}
SINGULAR = {"heads": "head", "features": "feature source", "fusions": "fusion", "chars": "char encoder",
            "readers": "reader"}
KIND_OF_FIELD = {"features": "features", "head": "heads", "mix": "fusions", "chars": "chars"}  # a component field


def _first_line(obj) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.splitlines()[0] if doc else ""


def _rows(kind: str, component) -> list[dict]:
    if kind == "readers":  # a function: its keyword options after the path, typed by their annotations
        params = inspect.signature(component).parameters
        return [{"key": name, "type": spec_text(spec) if spec is not None else "", "doc": "",
                 "default": "required" if params[name].default is inspect.Parameter.empty else params[name].default}
                for name, spec in option_specs(component).items()]
    rows = describe_keys(component.Config)
    for r in rows:
        if "component" in r["meta"]:
            kind = KIND_OF_FIELD[r["meta"]["component"]]
            r["type"] = f"a {SINGULAR[kind]} section {{name: ...}} (elmo-tasks components {kind})"
    return rows


def _show(value) -> str:
    return value if value == "required" else json.dumps(value)


def cmd_components(args) -> int:
    kinds = [args.kind] if args.kind else list(KINDS)
    if args.kind and args.kind not in KINDS:
        raise UsageError(f"unknown kind {args.kind!r}; valid kinds: {', '.join(KINDS)}")
    if args.name is None:
        for kind in kinds:
            print(f"{kind}:")
            for name in KINDS[kind].names():
                component = KINDS[kind].get(name)
                module = getattr(component, "__module__", "")
                origin = "" if module.startswith("tasks.") else f" [{module}]"  # a plugin's: where it comes from
                print(f"  {name:<20} {_first_line(component)}{origin}")
        return 0
    try:
        component = KINDS[args.kind].get(args.name)
    except KeyError as e:
        raise UsageError(str(e)) from None
    print(f"{SINGULAR[args.kind]} {args.name}: {_first_line(component)}")
    for r in _rows(args.kind, component):
        print(f"  {r['key']}: {r['type'] + ', ' if r['type'] else ''}default {_show(r['default'])}"
              + (f"\n      {r['doc']}" if r["doc"] else ""))
    return 0


def register(subparsers) -> None:
    """Add the ``components`` sub-command."""
    p = subparsers.add_parser("components", help="list the registered heads, feature sources, fusions, char "
                                                 "encoders and readers, or the config keys of one")
    p.add_argument("kind", nargs="?", help=f"one of {', '.join(KINDS)} (default: all)")
    p.add_argument("name", nargs="?", help="a registered name: show its config keys, types, defaults and docs")
    add_include_argument(p)
    p.set_defaults(func=cmd_components)

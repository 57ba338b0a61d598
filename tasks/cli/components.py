"""``elmo-tasks components [KIND [NAME]]``: the registered components configs can name, and the keys of one;
``elmo-tasks configs list | show NAME [--out FILE]``: the configs that ship inside the package.

Every key is shown with its type and range, its default and its doc, as declared once in the component's
``Config`` dataclass (``elmo_features.util.schema.key``); readers show their keyword options.
"""
from __future__ import annotations

import inspect
import json
import re
import shlex
from pathlib import Path

from elmo_features.util.errors import UsageError
from elmo_features.util.paths import check_no_overwrite, check_output_file, check_own_output, is_stream, is_text_file
from elmo_features.util.provenance import write_text_atomic
from elmo_features.util.config_docs import describe_keys, spec_text
from elmo_features.util.schema import option_specs
from elmo_features.util.wording import did_you_mean

import elmo_tasks.experiment.config  # noqa: F401  (fills the registries)
from elmo_tasks.experiment.config import packaged_configs, packaged_name
from elmo_tasks.plugins import add_include_argument
from elmo_tasks.registry import CHAR_ENCODERS, FEATURES, FUSIONS, HEADS, READERS

KINDS = {"heads": HEADS, "features": FEATURES, "fusions": FUSIONS, "chars": CHAR_ENCODERS, "readers": READERS}
SINGULAR = {"heads": "head", "features": "feature source", "fusions": "fusion", "chars": "char encoder",
            "readers": "reader"}
KIND_OF_FIELD = {"features": "features", "head": "heads", "mix": "fusions", "chars": "chars"}  # a component field


def plain_text(text: str) -> str:
    """A docstring's words as a terminal shows them: reStructuredText markup (``code``, :role:`name`, `title`)
    removed."""
    text = re.sub(r":[a-z]+:`([^`]*)`", r"\1", text)
    return re.sub(r"``(.+?)``|`([^`]+)`", lambda m: m.group(1) if m.group(1) is not None else m.group(2), text)


def _first_line(obj) -> str:
    doc = inspect.getdoc(obj) or ""
    return plain_text(doc.splitlines()[0]) if doc else ""


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
        raise UsageError(f"unknown kind {args.kind!r}{did_you_mean(args.kind, KINDS)}; valid kinds: {', '.join(KINDS)}")
    if args.name is None:
        for kind in kinds:
            print(f"{kind}:")
            for name in KINDS[kind].names():
                component = KINDS[kind].get(name)
                module = getattr(component, "__module__", "")
                origin = "" if module.startswith("elmo_tasks.") else f" [{module}]"  # a plugin's: where it comes from
                print(f"  {name:<20} {_first_line(component)}{origin}")
        return 0
    try:
        component = KINDS[args.kind].get(args.name)
    except KeyError as e:
        raise UsageError(str(e)) from None
    print(f"{SINGULAR[args.kind]} {args.name}: {_first_line(component)}")
    for r in _rows(args.kind, component):
        print(f"  {r['key']}: {r['type'] + ', ' if r['type'] else ''}default {_show(r['default'])}"
              + (f"\n      {plain_text(r['doc'])}" if r["doc"] else ""))
    return 0


def register(subparsers) -> None:
    """Add the ``components`` and ``configs`` sub-commands."""
    register_configs(subparsers)
    p = subparsers.add_parser("components", help="list the registered heads, feature sources, fusions, char "
                                                 "encoders and readers, or the config keys of one")
    p.add_argument("kind", nargs="?", help=f"one of {', '.join(KINDS)} (default: all)")
    p.add_argument("name", nargs="?", help="a registered name: show its config keys, types, defaults and docs")
    add_include_argument(p)
    p.set_defaults(func=cmd_components)


def config_description(path) -> str:
    """A config file's one-line description: its first line, a ``#`` comment (empty when it has none)."""
    with open(path, encoding="utf-8") as f:
        first = f.readline()
    return first.lstrip("#").strip() if first.startswith("#") else ""


def _print_configs(configs: dict) -> None:
    width = max(map(len, configs)) + 2
    for name, path in configs.items():
        print(f"  {name:<{width}}{config_description(path)}")


def cmd_configs_list(args) -> int:
    configs = packaged_configs()
    tasks = {n: p for n, p in configs.items() if "/" not in n}  # the task configs a user runs
    print("Task configs (give a name where a config path goes, e.g. `elmo-tasks compare tiny_ner_conll2003`):")
    _print_configs(tasks)
    if args.all:
        print("Research history: how the shipped biLMs were trained (bilm/) and the studies behind the results "
              "(backbones/, candidates/, diagnosis/, fusion/):")
        _print_configs({n: p for n, p in configs.items() if n not in tasks})
        print("(the bilm/ configs name a training corpus that is not distributed: train on your own text with "
              "`elmo-tasks train-bilm --config bilm/default --set 'train_files=[FILE]' --set heldout_file=FILE`)")
    else:
        print(f"({len(configs) - len(tasks)} more under `elmo-tasks configs list --all`: the biLM training configs "
              "and the research studies)")
    print("(an existing file of that name wins; copy a config to edit it: `elmo-tasks configs show NAME --out "
          "my.yaml`)")
    return 0


def cmd_configs_show(args) -> int:
    name = packaged_name(args.name)
    if name not in packaged_configs():
        raise UsageError(f"configs show: no packaged config {args.name!r}{did_you_mean(name, packaged_configs())}; "
                         "`elmo-tasks configs list --all` shows them")
    text = packaged_configs()[name].read_text(encoding="utf-8")
    if args.out in (None, "-"):  # ("-": standard output, the default)
        print(text, end="")
        return 0
    check_output_file(args.out, "--out", f"{Path(name).name}.yaml")
    if not is_stream(args.out):  # a file of a command's output folder is never replaced, even with --force
        check_own_output(args.out, "--out", "a text file (a config)", is_text_file)
    check_no_overwrite(args.out, args.force, shlex.join(["elmo-tasks", "configs", "show", args.name, "--out", args.out,
                                                         "--force"]))
    write_text_atomic(args.out, text)
    print(f"wrote {args.out} (packaged config {name}); data paths in it are relative to the folder you run from, "
          "where elmo-tasks data get writes data/", flush=True)
    return 0


def register_configs(subparsers) -> None:
    """Add the ``configs`` sub-command (list, show)."""
    p = subparsers.add_parser("configs", help="the configs that ship inside the package: list them, show or copy one",
                              description="The task configs (and biLM training configs) that ship inside the package. "
                                          "run, compare and wsd --config take their names as well as paths.")
    sub = p.add_subparsers(dest="configs_command", metavar="ACTION")
    sub.required = True
    ls = sub.add_parser("list", help="names and one-line descriptions")
    ls.add_argument("--all", action="store_true", help="also list the research history: the biLM training configs "
                                                       "and the studies behind the published results")
    ls.set_defaults(func=cmd_configs_list)
    show = sub.add_parser("show", help="print a packaged config, or copy it to --out FILE to edit it")
    show.add_argument("name", metavar="NAME", help="a packaged config name (elmo-tasks configs list shows them)")
    show.add_argument("--out", help="write it to this file instead of printing it")
    show.add_argument("--force", action="store_true", help="replace --out if it exists")
    show.set_defaults(func=cmd_configs_show)

"""Checked component configs: ``{name: REGISTERED_NAME, **hparams}`` sections.

The keys are checked by the one validation module, ``elmo_features.util.schema`` (``build``, which raises
``ConfigError``; unknown keys are errors listing the valid ones). ``resolve_component`` checks a component
section against the named component's ``Config`` (nested component fields too) and fills in every default;
``component_config`` turns a resolved section back into that ``Config``. This module sits just above
``elmo_tasks.registry`` and below data, features and heads, which use it for their own configs; the run config
(``elmo_tasks.experiment.config``) builds on it.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

from elmo_features.util.errors import ConfigError
from elmo_features.util.schema import build, to_dict

from elmo_tasks.registry import CHAR_ENCODERS, FEATURES, FUSIONS, HEADS, Registry


# upper bounds of the sizes a head or fusion declares: beyond them a model only exhausts memory or never finishes
MAX_UNITS = 4096  # hidden sizes, embedding sizes, filter counts
MAX_LAYERS = 8  # stacked BiLSTM layers


def resolve_component(registry: Registry, section: Any, where: str) -> dict:
    """Check a ``{name: ..., **hparams}`` section against the named component's Config; return it resolved.

    Nested component fields (``metadata={"component": "features"|"mix"}``, a dict or a list of dicts) are
    resolved recursively.
    """
    if isinstance(section, str):
        section = {"name": section}
    if not isinstance(section, dict) or "name" not in section:
        raise ConfigError(f"{where}: expected a mapping with a 'name' key (one of: {', '.join(registry.names())})")
    try:
        comp = registry.get(section["name"])
    except KeyError as e:
        raise ConfigError(f"{where}.name: {e.args[0]}") from None
    cfg = build(comp.Config, section, f"{where} ({section['name']})", also=("name",))
    out = {"name": section["name"], **to_dict(cfg)}
    for f in dataclasses.fields(comp.Config):
        sub = f.metadata.get("component")
        if sub is None or out[f.name] is None:
            continue
        reg = component_registry(sub)
        if isinstance(out[f.name], list):
            out[f.name] = [resolve_component(reg, s, f"{where}.{f.name}[{i}]") for i, s in enumerate(out[f.name])]
            _check_listed_once(out[f.name], f"{where}.{f.name}")
        else:
            out[f.name] = resolve_component(reg, out[f.name], f"{where}.{f.name}")
    return out


def _check_listed_once(sections: list[dict], where: str) -> None:
    """A list of components (a concat's sources) names each resolved section once: a repeat would give the same
    features twice. ConfigError naming both places."""
    seen: dict[str, int] = {}
    for i, s in enumerate(sections):
        first = seen.setdefault(json.dumps(s, sort_keys=True, default=str), i)
        if first != i:
            raise ConfigError(f"{where}[{i}] is {where.rsplit('.', 1)[-1]}[{first}] again (the same section once "
                              "defaults are filled in): it would give the head the same features twice; list each "
                              "once")


def component_registry(kind: str) -> Registry:
    """The registry a nested component field (``metadata={"component": kind}``) names its values in."""
    return {"features": FEATURES, "head": HEADS, "mix": FUSIONS, "chars": CHAR_ENCODERS}[kind]


def component_config(registry: Registry, resolved: dict) -> Any:
    """The Config dataclass instance for a resolved section."""
    comp = registry.get(resolved["name"])
    return comp.Config(**{k: v for k, v in resolved.items() if k != "name"})

"""Checked component configs: YAML values -> typed dataclasses; ``{name: REGISTERED_NAME, **hparams}`` sections.

``from_dict`` builds a dataclass from a mapping, checking keys and types (unknown keys are errors listing the
valid ones). ``resolve_component`` checks a component section against the named component's ``Config``
(nested component fields too) and fills in every default; ``component_config`` turns a resolved section
back into that ``Config``. This module sits just above ``tasks.registry`` and below data, features and heads,
which use it for their own configs; the run config (``tasks.config``) builds on it.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal

from elmo_features.util.errors import ElmoTasksError

from .registry import CHAR_ENCODERS, FEATURES, FUSIONS, HEADS, Registry


class ConfigError(ElmoTasksError, ValueError):
    """A config has an unknown key, an unknown component name or a value of the wrong type."""


# ---------------------------------------------------------------- generic dataclass checking

def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def coerce(value: Any, tp: Any, where: str) -> Any:
    """Check ``value`` against the type hint ``tp`` (int, float, bool, str, Optional, list[X], dict[K, X], Literal)."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise ConfigError(f"{where}: must not be null")
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return coerce(value, a, where)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if len(errors) == 1 else f"{where}: {value!r} matches none of {_type_name(tp)}")
    if origin is Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(repr, choices))}")
        return value
    if origin is list or tp is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        (elem,) = typing.get_args(tp) or (Any,)
        return [coerce(v, elem, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        _, elem = typing.get_args(tp) or (Any, Any)
        return {k: coerce(v, elem, f"{where}.{k}") for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, str):  # YAML reads 1e-3 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, where)
    raise TypeError(f"{where}: unsupported config type {tp!r}")


def from_dict(cls: type, data: Any, where: str) -> Any:
    """Build dataclass ``cls`` from a mapping; unknown keys, missing required keys and bad types are errors."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {data!r}")
    own = cls.__dict__.get("__annotations__", {})  # the class's own keys first, then those of its bases
    fields = {f.name: f for f in sorted(dataclasses.fields(cls), key=lambda f: f.name not in own)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"valid keys: {', '.join(fields) or '(none)'}"
        )
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, f in fields.items():
        if name in data:
            kwargs[name] = coerce(data[name], hints[name], f"{where}.{name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}: missing required key {name!r}")
    obj = cls(**kwargs)
    check = getattr(obj, "check", None)
    if callable(check):
        check(where)
    return obj


def to_dict(obj: Any) -> dict:
    """A dataclass as a plain dict (for YAML)."""
    return dataclasses.asdict(obj)


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
    params = {k: v for k, v in section.items() if k != "name"}
    cfg = from_dict(comp.Config, params, f"{where} ({section['name']})")
    out = {"name": section["name"], **to_dict(cfg)}
    for f in dataclasses.fields(comp.Config):
        sub = f.metadata.get("component")
        if sub is None or out[f.name] is None:
            continue
        reg = component_registry(sub)
        if isinstance(out[f.name], list):
            out[f.name] = [resolve_component(reg, s, f"{where}.{f.name}[{i}]") for i, s in enumerate(out[f.name])]
        else:
            out[f.name] = resolve_component(reg, out[f.name], f"{where}.{f.name}")
    return out


def component_registry(kind: str) -> Registry:
    """The registry a nested component field (``metadata={"component": kind}``) names its values in."""
    return {"features": FEATURES, "head": HEADS, "mix": FUSIONS, "chars": CHAR_ENCODERS}[kind]


def component_config(registry: Registry, resolved: dict) -> Any:
    """The Config dataclass instance for a resolved section."""
    comp = registry.get(resolved["name"])
    return comp.Config(**{k: v for k, v in resolved.items() if k != "name"})

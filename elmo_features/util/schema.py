"""A small declarative schema for JSON/YAML data (types, ranges, required keys), with one-line errors.

    SCHEMA = Obj({"dim": Int(min=1, required=True), "clip": Num(min=0, nullable=True)})
    value = validate(data, SCHEMA, "options.json")   # raises SchemaError naming the key path

Used for the biLM ``options.json`` (elmo_features.model.options) and the biLM training config
(elmo_features.training.config). A string is never accepted for a number or a boolean, except that
``Num(from_str=True)`` reads a numeric string (YAML 1.1 reads ``1e-3`` as a string).
"""
from __future__ import annotations

import math
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

from elmo_features.util.errors import ElmoTasksError


class SchemaError(ElmoTasksError, ValueError):
    """A value does not match its schema; the message names the key path."""


def _at(where: str) -> str:
    return f"{where}: " if where else ""


def validate(value: Any, spec: "Spec", source: str) -> Any:
    """``spec.check(value)`` with errors prefixed by ``source`` (e.g. the file name)."""
    try:
        return spec.check(value, "")
    except SchemaError as e:
        raise SchemaError(f"{source}: {e}") from None


def _show(value: Any) -> str:
    kind = {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "a list",
            dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)
    text = repr(value)
    return f"{text if len(text) <= 60 else text[:57] + '...'} ({kind})"


@dataclass(frozen=True, kw_only=True)
class Spec:
    """Base: ``required`` (object member must be present), ``nullable`` (None allowed)."""

    required: bool = False
    nullable: bool = False

    def check(self, value: Any, where: str) -> Any:
        if value is None:
            if self.nullable:
                return None
            raise SchemaError(f"{_at(where)}must not be null")
        return self._check(value, where)

    def _check(self, value: Any, where: str) -> Any:
        return value


@dataclass(frozen=True, kw_only=True)
class _Range(Spec):
    min: float | None = None  # inclusive
    max: float | None = None  # inclusive
    gt: float | None = None  # exclusive lower bound
    lt: float | None = None  # exclusive upper bound
    choices: tuple | None = None

    def _range(self, value, where: str):
        if self.choices is not None and value not in self.choices:
            raise SchemaError(f"{_at(where)}must be one of {', '.join(map(repr, self.choices))}, got {_show(value)}")
        for bound, ok, text in ((self.min, lambda b: value >= b, ">="), (self.max, lambda b: value <= b, "<="),
                                (self.gt, lambda b: value > b, ">"), (self.lt, lambda b: value < b, "<")):
            if bound is not None and not ok(bound):
                raise SchemaError(f"{_at(where)}must be {text} {bound}, got {value}")
        return value


@dataclass(frozen=True)
class Int(_Range):
    def _check(self, value, where):
        if isinstance(value, bool) or not isinstance(value, int):
            raise SchemaError(f"{_at(where)}expected an integer, got {_show(value)}")
        return self._range(value, where)


@dataclass(frozen=True, kw_only=True)
class Num(_Range):
    from_str: bool = False

    def _check(self, value, where):
        if self.from_str and isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SchemaError(f"{_at(where)}expected a number, got {_show(value)}")
        if not math.isfinite(value):
            raise SchemaError(f"{_at(where)}must be a finite number, got {value}")
        return self._range(value, where)


@dataclass(frozen=True)
class Bool(Spec):
    def _check(self, value, where):
        if not isinstance(value, bool):
            raise SchemaError(f"{_at(where)}expected true or false, got {_show(value)}")
        return value


@dataclass(frozen=True)
class Str(_Range):
    def _check(self, value, where):
        if not isinstance(value, str):
            raise SchemaError(f"{_at(where)}expected a string, got {_show(value)}")
        if self.choices is not None and value not in self.choices:
            raise SchemaError(f"{_at(where)}must be one of {', '.join(map(repr, self.choices))}, got {value!r}")
        return value


@dataclass(frozen=True)
class List(Spec):
    items: Spec = field(default_factory=Spec)
    min_len: int = 0
    max_len: int | None = None

    def _check(self, value, where):
        if not isinstance(value, (list, tuple)):
            raise SchemaError(f"{_at(where)}expected a list, got {_show(value)}")
        if len(value) < self.min_len or (self.max_len is not None and len(value) > self.max_len):
            n = f"{self.min_len}" if self.max_len == self.min_len else \
                f"{self.min_len}..{self.max_len if self.max_len is not None else ''}"
            raise SchemaError(f"{_at(where)}expected a list of {n} items, got {len(value)}")
        return [self.items.check(v, f"{where}[{i}]") for i, v in enumerate(value)]


@dataclass(frozen=True)
class Obj(Spec):
    """An object; ``extra=False`` makes unknown keys errors (listing the valid ones)."""

    fields: dict[str, Spec] = field(default_factory=dict)
    extra: bool = True

    def _check(self, value, where):
        if not isinstance(value, dict):
            raise SchemaError(f"{_at(where)}expected an object, got {_show(value)}")
        if not self.extra:
            unknown = sorted(set(value) - set(self.fields))
            if unknown:
                raise SchemaError(f"{_at(where)}unknown key(s) {unknown}; valid keys: {', '.join(self.fields)}")
        out = dict(value)
        for name, spec in self.fields.items():
            if name in value:
                out[name] = spec.check(value[name], f"{where}.{name}" if where else name)
            elif spec.required:
                raise SchemaError(f"missing required key '{where + '.' if where else ''}{name}'")
        return out


# ---------------------------------------------------------------- strict readers (no key given twice)

def _strict_loader():
    import yaml

    class StrictLoader(yaml.SafeLoader):
        """yaml.SafeLoader that refuses a mapping key given twice (PyYAML keeps the last one silently)."""

    def construct_mapping(loader, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: merged keys may be overridden
                continue
            key = loader.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice (first on line {seen[key] + 1})", key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return StrictLoader


def load_yaml(text: str, name: str = "<config>"):
    """``yaml.safe_load`` that refuses a key given twice in one mapping (a yaml.YAMLError naming both lines);
    ``name`` (the file) appears in error positions."""
    import io

    import yaml

    stream = io.StringIO(text)
    stream.name = name
    return yaml.load(stream, Loader=_strict_loader())  # noqa: S506 - a SafeLoader subclass


def load_json(text: str):
    """``json.loads`` that refuses a key given twice in one object (a ValueError naming the key)."""
    import json

    def pairs(items):
        out = {}
        for k, v in items:
            if k in out:
                raise ValueError(f"the key {k!r} is given twice in one object")
            out[k] = v
        return out

    return json.loads(text, object_pairs_hook=pairs)


def read_config_file(path: str | Path, error: type[Exception], kind: str = "yaml"):
    """The parsed content of a YAML (``kind="yaml"``) or JSON config file, every problem one ``error`` line naming
    the file: not found, a folder, not UTF-8, not valid YAML/JSON, a key given twice."""
    import yaml

    path = Path(path)
    what = "the options JSON file" if kind == "json" else "a YAML config file"
    try:
        text = path.read_text(encoding="utf-8")
        return load_json(text) if kind == "json" else load_yaml(text, str(path))
    except FileNotFoundError:
        raise error(f"{'options' if kind == 'json' else 'config'} file not found: {path}") from None
    except IsADirectoryError:
        raise error(f"{path} is a folder; give {what}") from None
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start})"
                    + ("; is this the weights file?" if kind == "json" else "")) from None
    except yaml.YAMLError as e:
        raise error(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
    except ValueError as e:  # json.JSONDecodeError, a key given twice
        raise error(f"{path}: not valid JSON ({e})") from None


def apply_set(raw: dict, assignment: str, error: type[Exception]) -> None:
    """Apply one ``--set key.sub=value`` (the value read as YAML: numbers, booleans, lists, mappings; quote a string
    that looks like one) to a raw config mapping in place; every problem one ``error`` line."""
    import yaml

    key, sep, text = assignment.partition("=")
    if not sep or not key.strip():
        raise error(f"--set {assignment!r}: expected key.sub=value")
    parts = key.strip().split(".")
    node = raw
    for i, part in enumerate(parts[:-1]):
        nxt = node.get(part) if isinstance(node, dict) else None
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise error(f"--set {assignment!r}: {'.'.join(parts[: i + 1])} is not a section")
        node = nxt
    try:
        node[parts[-1]] = load_yaml(text) if text.strip() else None
    except yaml.YAMLError as e:
        why = " ".join(str(getattr(e, "problem", None) or e).split())
        raise error(f"--set {assignment!r}: the value is not valid YAML ({why}); quote a string, "
                    "e.g. --set 'key=\"a, b\"'") from None

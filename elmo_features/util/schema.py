"""The one validation module of every config: declare a key once (type, range, default, doc) and check data against
it with one-line errors naming the key path. Reading files and ``--set`` are ``elmo_features.util.config_files``.

    @dataclass
    class Training:                      # a config section
        lr: float = key(Num(gt=0), 1e-3, doc="Adam's learning rate")
        epochs: int = 10                 # no ``key``: the type hint is the spec (Int())
        def check(self, where): ...      # optional cross-key rules, run after the keys are checked

    cfg = build(Training, data, "train.yaml:")   # a ConfigError naming the key path; unknown keys list the valid ones

A spec (``Int``, ``Num``, ``Bool``, ``Str``, ``List``, ``Map``, ``Obj``, ``Record``, ``OneOf``) checks one value; a
dataclass is checked as a ``Record`` of its fields (each field's ``key`` spec, else the spec of its type hint).
Every config uses this: the biLM ``options.json`` (elmo_features.model.options), the biLM training config
(elmo_features.training.config), the task configs (elmo_tasks.experiment.config, elmo_tasks.components) and data reader options
(``check_options``); ``elmo_features.util.config_docs`` describes the keys for users. A string is never accepted
for a number or a boolean, except that a float key reads a numeric string (YAML 1.1 reads ``1e-3`` as a string).
Every problem is one ``ConfigError`` (``elmo_features.util.errors``) line; a caller gives the context, the file and
the key prefix, as ``where``, and catches nothing.
"""
from __future__ import annotations

import collections.abc
import contextlib
import contextvars
import dataclasses
import inspect
import math
import sys
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from elmo_features.util.errors import ConfigError
from elmo_features.util.wording import did_you_mean


_SAVED = contextvars.ContextVar("saved_config", default=False)


@contextlib.contextmanager
def saved_config():
    """Within it, configs are ones a finished run saved: a ``settings_rule`` added since warns instead of refusing
    (the trained model stays usable)."""
    token = _SAVED.set(True)
    try:
        yield
    finally:
        _SAVED.reset(token)


def settings_rule(message: str) -> None:
    """A cross-key rule against settings that would act on nothing: ConfigError ``message`` for a new config, a
    warning for a saved one (``saved_config``; a run made before the rule existed)."""
    if not _SAVED.get():
        raise ConfigError(message)
    print(f"warning: {message} (accepted for a run saved with it, or the resumed comparison that made such runs; "
          "it has no effect)", file=sys.stderr)


def _at(where: str) -> str:
    return "" if not where else f"{where} " if where.endswith(":") else f"{where}: "


def join_key(where: str, name: str) -> str:
    """The path of key ``name`` inside ``where``: ``"run.yaml: training"`` -> ``"run.yaml: training.lr"``; a
    ``where`` ending in ":" is a file (``"run.yaml:"`` -> ``"run.yaml: lr"``)."""
    return f"{where} {name}" if where.endswith(":") else f"{where}.{name}" if where else name


def _show(value: Any) -> str:
    kind = {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "a list",
            dict: "a mapping", type(None): "null"}.get(type(value), type(value).__name__)
    text = repr(value)
    return f"{text if len(text) <= 60 else text[:57] + '...'} ({kind})"


@dataclass(frozen=True, kw_only=True)
class Spec:
    """Base (accepts any value): ``required`` (a mapping member must be present), ``nullable`` (None allowed)."""

    required: bool = False
    nullable: bool = False

    def check(self, value: Any, where: str) -> Any:
        if value is None:
            if self.nullable:
                return None
            raise ConfigError(f"{_at(where)}must not be null")
        return self._check(value, where)

    def _check(self, value: Any, where: str) -> Any:
        return value


@dataclass(frozen=True, kw_only=True)
class Ranged(Spec):
    """Base of the specs with bounds (``min``/``max`` inclusive, ``gt``/``lt`` exclusive) or fixed ``choices``."""
    min: float | None = None  # inclusive
    max: float | None = None  # inclusive
    gt: float | None = None  # exclusive lower bound
    lt: float | None = None  # exclusive upper bound
    choices: tuple | None = None

    def bounds_text(self) -> str:
        """The bounds in words: ``in [0, 1)``, ``>= 1``, ``> 0`` ("" when unbounded)."""
        low = f"[{self.min}" if self.min is not None else f"({self.gt}" if self.gt is not None else None
        high = f"{self.max}]" if self.max is not None else f"{self.lt})" if self.lt is not None else None
        if low and high:
            return f"in {low}, {high}"
        if low:
            return f"{'>=' if low[0] == '[' else '>'} {low[1:]}"
        return f"{'<=' if high[-1] == ']' else '<'} {high[:-1]}" if high else ""

    def _range(self, value, where: str):
        if self.choices is not None and value not in self.choices:
            raise ConfigError(f"{_at(where)}must be one of {', '.join(map(repr, self.choices))}, got {_show(value)}")
        if not ((self.min is None or value >= self.min) and (self.gt is None or value > self.gt)
                and (self.max is None or value <= self.max) and (self.lt is None or value < self.lt)):
            raise ConfigError(f"{_at(where)}must be {self.bounds_text()}, got {value}")
        return value


@dataclass(frozen=True)
class Int(Ranged):
    def _check(self, value, where):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{_at(where)}expected an integer, got {_show(value)}")
        return self._range(value, where)


@dataclass(frozen=True, kw_only=True)
class Num(Ranged):
    """A number; ``from_str`` reads a numeric string; ``as_float`` returns a float (an integer given is converted)."""

    from_str: bool = False
    as_float: bool = False

    def _check(self, value, where):
        if self.from_str and isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{_at(where)}expected a number, got {_show(value)}")
        if not math.isfinite(value):
            raise ConfigError(f"{_at(where)}must be a finite number, got {value}")
        return float(self._range(value, where)) if self.as_float else self._range(value, where)


@dataclass(frozen=True)
class Bool(Spec):
    def _check(self, value, where):
        if not isinstance(value, bool):
            raise ConfigError(f"{_at(where)}expected true or false, got {_show(value)}")
        return value


@dataclass(frozen=True)
class Str(Ranged):
    def _check(self, value, where):
        if not isinstance(value, str):
            raise ConfigError(f"{_at(where)}expected a string, got {_show(value)}")
        if self.choices is not None and value not in self.choices:
            raise ConfigError(f"{_at(where)}must be one of {', '.join(map(repr, self.choices))}, got {value!r}")
        return value


@dataclass(frozen=True)
class Choice(Ranged):
    """One of fixed values of any type (a ``Literal`` hint)."""

    def _check(self, value, where):
        return self._range(value, where)


@dataclass(frozen=True)
class List(Spec):
    items: Spec = field(default_factory=Spec)
    min_len: int = 0
    max_len: int | None = None

    def _check(self, value, where):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{_at(where)}expected a list, got {_show(value)}")
        if len(value) < self.min_len or (self.max_len is not None and len(value) > self.max_len):
            n = (f"{self.min_len}" if self.max_len == self.min_len else f"at least {self.min_len}"
                 if self.max_len is None else f"{self.min_len}..{self.max_len}")
            raise ConfigError(f"{_at(where)}expected a list of {n} item(s), got {len(value)}")
        return [self.items.check(v, f"{where}[{i}]") for i, v in enumerate(value)]


@dataclass(frozen=True)
class Map(Spec):
    """A mapping of any keys to values of one spec."""

    values: Spec = field(default_factory=Spec)

    def _check(self, value, where):
        if not isinstance(value, dict):
            raise ConfigError(f"{_at(where)}expected a mapping, got {_show(value)}")
        return {k: self.values.check(v, join_key(where, str(k))) for k, v in value.items()}


@dataclass(frozen=True)
class OneOf(Spec):
    """The first of several specs that accepts the value (a union hint such as ``str | list[int]``)."""

    options: tuple = ()
    text: str = ""

    def _check(self, value, where):
        errors = []
        for spec in self.options:
            try:
                return spec.check(value, where)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if len(errors) == 1 else f"{_at(where)}{_show(value)} is none of {self.text}")


def _unknown(where: str, unknown: list, valid) -> ConfigError:
    valid = list(valid)
    guess = did_you_mean(unknown[0], valid) if len(unknown) == 1 else ""
    return ConfigError(f"{_at(where)}unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                       f"valid keys: {', '.join(valid) or '(none)'}{guess}")


@dataclass(frozen=True)
class Obj(Spec):
    """A mapping with named members (a file format's block); ``extra=False`` makes unknown keys errors (listing the
    valid ones), ``extra=True`` keeps them as they are."""

    fields: dict[str, Spec] = field(default_factory=dict)
    extra: bool = True

    def _check(self, value, where):
        if not isinstance(value, dict):
            raise ConfigError(f"{_at(where)}expected a mapping, got {_show(value)}")
        if not self.extra:
            unknown = sorted(set(value) - set(self.fields), key=str)
            if unknown:
                raise _unknown(where, unknown, self.fields)
        out = dict(value)
        for name, spec in self.fields.items():
            if name in value:
                out[name] = spec.check(value[name], join_key(where, name))
            elif spec.required:
                raise ConfigError(f"{_at(where)}missing required key {name!r}")
        return out


# ---------------------------------------------------------------- dataclasses: keys declared once

def key(spec: Spec | None = None, default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING,
        doc: str = "", path: str = "", meta: dict | None = None):
    """A config key declared once: its spec (type and range; None: the spec of the type hint), its default (or
    ``factory``; neither: a required key), a one-line ``doc``, ``path`` when the key sits elsewhere in the file
    than its field name says (``"embedding.dim"``), and ``meta``: more field metadata for the code that uses it."""
    return field(default=default, default_factory=factory,
                 metadata={"spec": spec, "doc": doc, "path": path, **(meta or {})})


def _type_text(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def spec_of_type(tp: Any) -> Spec:
    """The spec a type hint stands for: int, float, bool, str, Any, X | None, unions, list[X], dict[K, X], Literal,
    and dataclasses (a ``Record``)."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return Spec(nullable=True)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(tp))
        if len(args) == 1:
            return dataclasses.replace(spec_of_type(args[0]), nullable=nullable)
        return OneOf(options=tuple(spec_of_type(a) for a in args), text=_type_text(tp), nullable=nullable)
    if origin is Literal:
        return Choice(choices=typing.get_args(tp))
    if origin in (list, collections.abc.Sequence) or tp is list:
        (elem,) = typing.get_args(tp) or (Any,)
        return List(spec_of_type(elem))
    if origin is dict or tp is dict:
        _, elem = typing.get_args(tp) or (Any, Any)
        return Map(spec_of_type(elem))
    simple = {bool: Bool, int: Int, str: Str}
    if tp in simple:
        return simple[tp]()
    if tp is float:
        return Num(as_float=True, from_str=True)
    if dataclasses.is_dataclass(tp):
        return Record(tp)
    raise TypeError(f"unsupported config type {tp!r}")


def key_specs(cls: type, numeric_strings: bool = True) -> dict[str, Spec]:
    """Each field of dataclass ``cls`` with its spec (own keys first, then those of its bases); a float field
    returns floats and, with ``numeric_strings`` (YAML), reads a numeric string; a field without a default is
    required."""
    own = cls.__dict__.get("__annotations__", {})
    hints = typing.get_type_hints(cls)
    out = {}
    for f in sorted(dataclasses.fields(cls), key=lambda f: f.name not in own):
        spec = f.metadata.get("spec") or spec_of_type(hints[f.name])
        if isinstance(spec, Num) and float in (hints[f.name], *typing.get_args(hints[f.name])):
            spec = dataclasses.replace(spec, as_float=True, from_str=numeric_strings)
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out[f.name] = dataclasses.replace(spec, required=required)
    return out


def key_path(f: dataclasses.Field) -> tuple[str, ...]:
    """Where a field's key sits in the file: its ``path`` (``("embedding", "dim")``), else its name."""
    return tuple((f.metadata.get("path") or f.name).split("."))


@dataclass(frozen=True)
class Record(Spec):
    """A mapping checked against dataclass ``cls`` and returned as an instance: unknown keys (listing the valid
    ones; ``extra=True`` ignores them), missing required keys, each key's spec, then ``cls.check(where)`` for rules
    across keys. ``numeric_strings=False`` (JSON, which has real numbers) refuses "3" for a float key."""

    cls: type = object
    extra: bool = False
    numeric_strings: bool = True
    also: tuple = ()  # keys the caller reads itself (a component's ``name``): valid, listed, not passed to ``cls``

    def _check(self, value, where):
        if not isinstance(value, dict):
            raise ConfigError(f"{_at(where)}expected a mapping, got {_show(value)}")
        specs = key_specs(self.cls, self.numeric_strings)
        paths = {f.name: key_path(f) for f in dataclasses.fields(self.cls)}
        valid = list(dict.fromkeys([*self.also, *(paths[name][0] for name in specs)]))
        unknown = sorted(set(value) - set(valid), key=str)
        if unknown and not self.extra:
            raise _unknown(where, unknown, valid)
        kwargs = {}
        for name, spec in specs.items():
            node, parts = value, paths[name]
            for i, part in enumerate(parts[:-1]):
                node = node.get(part, {})
                if not isinstance(node, dict):
                    raise ConfigError(f"{_at(join_key(where, '.'.join(parts[:i + 1])))}expected a mapping, "
                                      f"got {_show(node)}")
            if parts[-1] in node:
                kwargs[name] = spec.check(node[parts[-1]], join_key(where, ".".join(parts)))
            elif spec.required:
                at = join_key(where, ".".join(parts[:-1])) if len(parts) > 1 else where
                raise ConfigError(f"{_at(at)}missing required key {parts[-1]!r}")
        obj = self.cls(**kwargs)
        if callable(getattr(obj, "check", None)):
            obj.check(where)
        return obj


def build(cls: type, data: Any, where: str, also: tuple = ()) -> Any:
    """Dataclass ``cls`` from a mapping (None: all defaults), every problem one ``ConfigError`` line naming the key
    path after ``where`` (a file: ``"run.yaml:"``, or a file and a section: ``"run.yaml: training"``); ``also``:
    keys the caller reads itself (valid and listed among the valid keys, not passed to ``cls``)."""
    return Record(cls, also=tuple(also)).check({} if data is None else data, where)


def to_dict(obj: Any) -> dict:
    """A config dataclass as a plain dict (for YAML)."""
    return dataclasses.asdict(obj)


# ---------------------------------------------------------------- keyword options of a function

def option_specs(fn, skip: int = 1) -> dict[str, Spec | None]:
    """The keyword options of ``fn`` after its first ``skip`` parameters, as config keys: the spec of each
    annotation (None where the annotation has none, e.g. a path type)."""
    hints = typing.get_type_hints(fn)
    out: dict[str, Spec | None] = {}
    for p in list(inspect.signature(fn).parameters.values())[skip:]:
        if p.kind not in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD):
            continue
        try:
            out[p.name] = spec_of_type(hints[p.name]) if p.name in hints else None
        except TypeError:
            out[p.name] = None
    return out


def check_options(fn, options: Any, where: str, skip: int = 1) -> dict:
    """Keyword options for ``fn`` checked like config keys (unknown ones listing the valid ones, then each value
    against its annotation), every problem one ``ConfigError`` line naming ``where``."""
    specs = option_specs(fn, skip)
    if not isinstance(options, dict):
        raise ConfigError(f"{_at(where)}expected a mapping, got {_show(options)}")
    unknown = sorted(set(options) - set(specs), key=str)
    if unknown:
        raise _unknown(where, unknown, specs)
    return {k: v if specs[k] is None else specs[k].check(v, join_key(where, k)) for k, v in options.items()}

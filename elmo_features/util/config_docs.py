"""Config keys described for users (``elmo-tasks components``): a spec in words, and each key of a config
dataclass with its type, default and doc, from its declaration (``elmo_features.util.schema.key``)."""
from __future__ import annotations

import dataclasses

from elmo_features.util.schema import (Bool, Int, List, Map, Num, Obj, OneOf, Ranged, Record, Spec, Str, key_path,
                                       key_specs)


def spec_text(spec: Spec) -> str:
    """A spec in words: ``integer >= 1``, ``number in [0, 1)``, ``one of 'a', 'b'``, ``list of integer``."""
    if isinstance(spec, Ranged) and spec.choices is not None:
        text = "one of " + ", ".join(map(repr, spec.choices))
    elif isinstance(spec, List):
        text = f"list of {spec_text(spec.items)}"
    elif isinstance(spec, Map):
        text = "mapping" if type(spec.values) is Spec else f"mapping of {spec_text(spec.values)}"
    elif isinstance(spec, OneOf):
        text = " or ".join(spec_text(o) for o in spec.options)
    elif isinstance(spec, Record):
        text = f"{spec.cls.__name__} section"
    else:
        text = {Int: "integer", Num: "number", Bool: "true/false", Str: "string", Obj: "mapping"}.get(type(spec), "any")
    if isinstance(spec, Ranged) and spec.choices is None and spec.bounds_text():
        text += " " + spec.bounds_text()
    return text + (" or null" if spec.nullable and not text.endswith("or null") else "")


def describe_keys(cls: type) -> list[dict]:
    """Each key of config dataclass ``cls``: name, type (``spec_text``), default ("required" if none), doc and the
    field's other metadata (``meta``)."""
    specs = key_specs(cls)
    out = []
    for f in sorted(dataclasses.fields(cls), key=lambda f: list(specs).index(f.name)):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = "required"
        out.append({"key": ".".join(key_path(f)), "type": spec_text(specs[f.name]), "default": default,
                    "doc": f.metadata.get("doc", ""),
                    "meta": {k: v for k, v in f.metadata.items() if k not in ("spec", "doc", "path")}})
    return out

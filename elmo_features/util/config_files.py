"""Config files read strictly (a key given twice is an error, not last-wins) and the one ``--set key.sub=value``
override syntax of every command. Checking the values is ``elmo_features.util.schema``; every problem of either is
one ``ConfigError`` line."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from elmo_features.util.errors import ConfigError
from elmo_features.util.paths import show_bytes, undecodable_byte
from elmo_features.util.text_input import binary_kind, nul_kind


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


def _check_readable(text: str, path: Path) -> None:
    """A config's text that no YAML/JSON parser should see: UTF-16 without a byte-order mark (ASCII and NUL bytes
    pass as UTF-8) or a Jsonnet file (AllenNLP's config language), as one ConfigError."""
    kind = nul_kind(text[:4096].encode("utf-8", "surrogatepass"), 1) if "\x00" in text[:4096] else None
    if kind:
        raise ConfigError(f"{path}: {kind.replace('FILE', str(path))}")
    if path.suffix.lower() in (".jsonnet", ".libsonnet"):
        raise ConfigError(f"{path}: a Jsonnet file (AllenNLP's config language) is not read: render it first "
                          f"(jsonnet {path} > config.json, with --ext-str for its std.extVar values) and give the "
                          "JSON, or write the config as YAML")


def read_config_file(path: str | Path, kind: str = "yaml"):
    """The parsed content of a YAML (``kind="yaml"``) or JSON config file, every problem one ``ConfigError`` line
    naming the file: not found, a folder, not UTF-8, not valid YAML/JSON, a key given twice."""
    import yaml

    path = Path(path)
    what = "the options JSON file" if kind == "json" else "a YAML config file"
    try:
        text = path.read_text(encoding="utf-8-sig")  # (a byte-order mark, as some editors write, is dropped)
        _check_readable(text, path)
        data = load_json(text) if kind == "json" else load_yaml(text, str(path))
    except FileNotFoundError:
        raise ConfigError(f"{'options' if kind == 'json' else 'config'} file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path} is a folder; give {what}") from None
    except UnicodeDecodeError as e:
        found = binary_kind(e.object[:16])
        if found and not e.object.startswith(b"\x89HDF"):  # (an HDF5 file gets the weights-file hint below)
            raise ConfigError(f"{path}: {found.replace('FILE', str(path)).replace(', or name it with .gz', '')}") from None
        hint = "; is this the weights file?" if kind == "json" and e.object[:4] == b"\x89HDF" else ""
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start}){hint}") from None
    except ConfigError:
        raise  # (_check_readable's, before the ValueError below)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
    except ValueError as e:  # json.JSONDecodeError, a key given twice
        raise ConfigError(f"{path}: not valid JSON ({e})") from None
    except RecursionError:  # (the parsers recurse once per level)
        raise ConfigError(f"{path}: nested too deeply (hundreds of levels of [ or {{); write a flat config") from None
    if data is not None and not isinstance(data, dict):  # (None: an empty file, which the caller reads as {})
        shape = "a JSON object {...}" if kind == "json" else "`key: value` lines"
        raise ConfigError(f"{path}: expected a mapping of keys to values at the top level ({shape}), got a "
                          f"{_kind(data)}; fix the file, or give {what}")
    check_expanded_size(data, str(path))
    return data


MAX_CONFIG_VALUES = 200_000  # values of a config with every YAML alias expanded (a real config has a few hundred)


def _kind(value) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(value),
                                                                                             type(value).__name__)


def check_expanded_size(data, where: str, limit: int = MAX_CONFIG_VALUES) -> int:
    """The number of values in ``data`` once every YAML alias is expanded (a node reached twice counts twice, as a
    copy of the config would hold it), counted over the distinct nodes only: a few aliases of aliases ("billion
    laughs") would expand to billions of values and hang whoever copies the config. Above ``limit``, or a node that
    contains itself (``&a [*a]``): one ConfigError line."""
    sizes: dict[int, int] = {}
    stack: list = [(data, False)]
    on_path: set[int] = set()
    while stack:
        node, done = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        children = list(node.values()) if isinstance(node, dict) else node
        if done:
            on_path.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes.get(id(c), 1) for c in children)
            if sizes[id(node)] > limit:
                raise ConfigError(f"{where}: the config holds more than {limit} values once its YAML aliases (*name) "
                                  "are expanded (aliases of aliases?); write the values out, or use fewer aliases")
            continue
        if id(node) in on_path:
            raise ConfigError(f"{where}: a YAML alias refers to a node that contains it (a recursive structure); "
                              "a config must be a tree: write the values out")
        if id(node) in sizes:
            continue
        on_path.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in children)
    return sizes.get(id(data), 1)


def check_utf8_argument(text: str, what: str) -> None:
    """A command-line argument holding a byte that is not UTF-8 (decoded by Python as a ``\\udc80``-``\\udcff``
    surrogate): one ConfigError line naming the byte (quoting it cannot help)."""
    byte = undecodable_byte(text)
    if byte is not None:
        raise ConfigError(f"{what} '{show_bytes(text)}': byte 0x{byte:02x} is not valid UTF-8 (the terminal's "
                          "or script's encoding?); give UTF-8 text")


def apply_set(raw: dict, assignment: str) -> None:
    """Apply one ``--set key.sub=value`` (the value read as YAML: numbers, booleans, lists, mappings; quote a string
    that looks like one) to a raw config mapping in place; every problem one ``ConfigError`` line."""
    import yaml

    check_utf8_argument(assignment, "--set")
    key, sep, text = assignment.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {assignment!r}: expected key.sub=value")
    parts = key.strip().split(".")
    node = raw
    for i, part in enumerate(parts[:-1]):
        nxt = node.get(part) if isinstance(node, dict) else None
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise ConfigError(f"--set {assignment!r}: {'.'.join(parts[: i + 1])} is not a section")
        node = nxt
    try:
        value = load_yaml(text) if text.strip() not in ("", "-") else (text.strip() or None)  # ("-": the string, not
        # YAML's one-item list [None])
    except yaml.YAMLError as e:
        why = " ".join(str(getattr(e, "problem", None) or e).split())
        raise ConfigError(f"--set {assignment!r}: the value is not valid YAML ({why}); quote a string, "
                          "e.g. --set 'key=\"a, b\"'") from None
    if re.search(r"(^|\s)#", text) and "#" not in json.dumps(value, default=str):  # YAML dropped it as a comment
        fix = (f"quote it, e.g. --set '{key.strip()}=\"{text.strip()}\"'" if isinstance(value, str) or value is None
               else "drop the comment")  # (a number or a list quoted would become a string)
        raise ConfigError(f"--set {assignment!r}: YAML reads ' #' as the start of a comment, which would cut the value "
                          f"to {value!r}; {fix}")
    check_expanded_size(value, f"--set {key.strip()}")
    old = node.get(parts[-1])
    switch = isinstance(old, dict) and isinstance(value, dict) and "name" in value and value["name"] != old.get("name")
    if isinstance(old, dict) and isinstance(value, dict) and not switch and [k for k in old if k not in value]:
        dropped = [k for k in old if k not in value]  # (a mapping replaces the section: its other keys go; another
        # component's name, e.g. head={name: crf_tagger}, replaces them on purpose)
        print(f"warning: --set {key.strip()}=... replaces the whole {key.strip()} section: "
              f"{', '.join(dropped[:6])}{', ...' if len(dropped) > 6 else ''} take their defaults; to change one key, "
              f"--set {key.strip()}.{next(iter(value), 'KEY')}=VALUE", file=sys.stderr)
    node[parts[-1]] = value

"""Words for messages: "did you mean X?" for a mistyped name, and counts or per-key values written as words (never
a Python dict)."""
from __future__ import annotations

import difflib
from typing import Iterable, Mapping


def close_name(name: object, choices: Iterable[str]) -> str | None:
    """The valid name closest to ``name`` when one is close enough to be a typo (difflib's ratio >= 0.6) or the only
    one it begins, else None."""
    if not isinstance(name, str) or not name:
        return None
    choices = [c for c in choices if isinstance(c, str)]
    exact = [c for c in choices if c.lower() == name.lower()]  # another case: the same name
    if exact:
        return exact[0]
    found = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    starting = [c for c in choices if c.startswith(name)] if len(name) >= 3 else []  # a name cut short
    return found[0] if found else starting[0] if len(starting) == 1 else None


def did_you_mean(name: object, choices: Iterable[str]) -> str:
    """`` (did you mean X?)`` for a mistyped ``name`` close to one of ``choices``, else the empty string: put it
    right after the unknown name in a message."""
    found = close_name(name, choices)
    return f" (did you mean {found}?)" if found is not None and found != name else ""


def mapping_text(mapping: Mapping[object, object], limit: int | None = None) -> str:
    """``{"semcor": 50, "synset": 53}`` as ``semcor 50, synset 53`` (the first ``limit`` items, then ``...``): counts
    and per-key values in a message, never a Python dict."""
    items = list(mapping.items())
    shown = items if limit is None else items[:limit]
    text = ", ".join(f"{k} {v}" for k, v in shown)
    return text + (", ..." if len(shown) < len(items) else "")


def first_few(items: Iterable[object], n: int = 5) -> str:
    """The first ``n`` items, then ``and N more``: a long list named in a line of readable length."""
    items = list(items)
    return ", ".join(map(str, items[:n])) + (f" and {len(items) - n:,} more" if len(items) > n else "")


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun`` in the number it takes: ``1 sense``, ``22 senses``, ``1,500 senses`` (``plural``: the
    plural when it is not ``noun`` + s)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"

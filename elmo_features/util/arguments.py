"""Checks of Python API arguments, shared by ``batch_to_ids``, ``Embedder``, ``TransformerEmbedder``, ``ScalarMix`` and
``ElmoHub`` (and the masks of the task heads and fusions): a wrong type is a ``TypeError``, a wrong value a
``UsageError`` (a ``ValueError``), each naming the argument and the offending value, e.g. "sentence 0 has a token
of type int: 5"."""
from __future__ import annotations

import math
import numbers
import os
import re
import sys
from typing import Any

import numpy as np

from elmo_features.util.errors import UsageError
from elmo_features.util.once import first_time

_SPACE = re.compile(r"\s")  # whitespace as str.split() splits on it

FLOAT32_MAX = 3.4028234663852886e38  # a larger weight becomes inf in a float32 tensor


def _show(value: Any) -> str:
    return f"{type(value).__name__}: {str(value)[:40]!r}" if isinstance(value, (str, bytes)) else \
        f"{type(value).__name__}: {repr(value)[:40]}"


def _rows(value: Any, what: str) -> list:
    """``value`` as a list (NumPy arrays through ``tolist``); a string or a non-iterable is a TypeError."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{what} is a {type(value).__name__} ({value[:40]!r}); pass tokenized sentences "
                        "(list[list[str]])")
    if isinstance(value, (set, frozenset, dict)):  # (a set's order changes from one process to the next)
        why = "its keys would be the tokens" if isinstance(value, dict) else "its order is not defined"
        raise TypeError(f"{what} is a {type(value).__name__} ({why}); pass a list (tokenized sentences: "
                        "list[list[str]])")
    try:
        return list(value)
    except TypeError:
        raise TypeError(f"{what} is {_show(value)}, not a list; pass tokenized sentences (list[list[str]])") from None


def check_sentences(sentences: Any, row: str = "sentence {}") -> list[list[str]]:
    """Tokenized sentences as lists of non-empty strings (one pass over the tokens). ``row`` names sentence k in
    messages ("sentence {}" or ElmoHub's "tokens[{}]")."""
    out = []
    for k, s in enumerate(_rows(sentences, "sentences")):
        s = _rows(s, row.format(k))
        for j, tok in enumerate(s):
            if not isinstance(tok, str) or not tok or tok.isspace():
                if not isinstance(tok, str):
                    raise TypeError(f"{row.format(k)} has a token of type {type(tok).__name__}: {tok!r}")
                raise UsageError(f"{row.format(k)} has an empty or whitespace-only token at position {j}: {tok!r}; "
                                 "tokens must hold a character other than whitespace")
            if _SPACE.search(tok) and first_time(("whitespace inside a token",)):
                print(f"warning: {row.format(k)} token {j} {tok!r} holds whitespace: it is embedded as one token, "
                      f"while the same line read from a file is split into {len(tok.split())}; split it if that was "
                      "meant (said once)", file=sys.stderr)
        out.append(s)
    return out


def check_int(value: Any, name: str, minimum: int = 1) -> int:
    """An integer (not a bool, not a float) >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {_show(value)}")
    if value < minimum:
        raise UsageError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_bool(value: Any, name: str) -> bool:
    """True or False (NumPy booleans included); "no" or 0 are TypeErrors."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {_show(value)}")
    return bool(value)


def check_optional_bool(value: Any, name: str) -> bool | None:
    """None (auto), True or False; "no" or 0 are TypeErrors."""
    if value is None:
        return None
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True, False or None, got {_show(value)}")
    return bool(value)


def check_path_argument(value: Any, name: str, forms: str) -> Any:
    """A file path argument: a str or os.PathLike (else a TypeError); an empty or blank string is a UsageError."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or Path), got {_show(value)}")
    if not str(value).strip():
        raise UsageError(f"{name} {str(value)!r} is empty (an unset variable?); give {forms}")
    return value


def check_float(value: Any, name: str, minimum: float | None = None) -> float:
    """A finite real number that fits float32 (>= ``minimum`` if given)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {_show(value)}")
    if not math.isfinite(value) or abs(value) > FLOAT32_MAX:
        raise UsageError(f"{name} must be a finite number (within float32's range), got {value}")
    if minimum is not None and value < minimum:
        raise UsageError(f"{name} must be >= {minimum}, got {value}")
    return float(value)


def check_mask(mask: Any, name: str, prefix: bool = False, shape: tuple | None = None, like: str = "x's") -> Any:
    """A mask tensor (True or 1 at real tokens): bool, or numbers that are all exactly 0 or 1 (a mask of 0.5, 2 or
    -1 would silently weigh the tokens); anything else is a UsageError naming ``name`` and the first other value.
    One ``.all()`` check, none for a bool mask. ``shape``: the (B, T) the mask must have (that of the input ``like``
    names, e.g. "x's"): a mask of another shape, or not a tensor (a list), is one UsageError naming both shapes
    (a shorter mask would otherwise be read as padding). ``prefix``: the mask (B, T) must also be left-aligned, each
    row's real tokens first (an API that reads a row's mask as its length: a gap such as [1, 0, 1] is a UsageError
    naming the row; one more vectorised check). Returns the mask as bool."""
    torch = sys.modules.get("torch")  # (not imported: the mask cannot be a tensor)
    tensor = torch is not None and torch.is_tensor(mask)
    if not tensor or shape is not None and tuple(mask.shape) != tuple(shape):
        want = f" matching {like} (B, T) = {tuple(shape)}" if shape is not None else ""
        got = tuple(mask.shape) if tensor else f"a {type(mask).__name__} (give a tensor: torch.tensor(mask))"
        raise UsageError(f"{name} must be a (B, T) tensor{want}, got {got}")
    if mask.dtype != torch.bool:
        binary = (mask == 0) | (mask == 1)
        if not bool(binary.all()):
            bad = mask[~binary].flatten()[0]
            raise UsageError(f"{name} must be bool (True at real tokens) or hold only 0 and 1; it holds "
                             f"{bad.item() if hasattr(bad, 'item') else bad!r}")
        mask = mask != 0
    if prefix and mask.shape[-1] > 1:
        gaps = mask[..., 1:] & ~mask[..., :-1]  # (B, T-1): a real token right after a padded one
        if bool(gaps.any()):
            row, pos = (int(i) for i in gaps.reshape(-1, gaps.shape[-1]).nonzero()[0])
            raise UsageError(f"{name} must be left-aligned (each row's real tokens first, then padding); row {row} "
                             f"has a real token at position {pos + 1} after padding; pack each sequence's tokens "
                             "to the start of its row")
    return mask


def uninformative_rows(matrix) -> str | None:
    """Why the rows of ``matrix`` (V, d) would tell words apart in nothing, or None: every value is zero, or every
    row is the same (checked on the first rows first: a large matrix with variety answers at once)."""
    m = np.asarray(matrix)
    if not (m[:1024].any() or m.any()):
        return "every vector is zero"
    if len(m) > 1 and not ((m[:1024] != m[0]).any() or (m != m[0]).any()):
        return "every word has the same vector"
    return None

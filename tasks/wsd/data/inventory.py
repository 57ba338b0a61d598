"""WordNet 3.0 sense inventory from ``index.sense`` (sense_key synset_offset sense_number tag_cnt).

Candidates of a lemma and pos are the keys whose lemma and ss_type match (NOUN=1, VERB=2, ADJ=3 or 5
(satellite), ADV=4), ordered by WordNet sense number; the first sense is sense number 1.
"""
from __future__ import annotations

import os
from pathlib import Path

from elmo_features.util.errors import ElmoTasksError
from elmo_features.util.text_input import iter_lines

POS_SS_TYPES = {"NOUN": ("1",), "VERB": ("2",), "ADJ": ("3", "5"), "ADV": ("4",)}
SS_TYPE_POS = {t: pos for pos, types in POS_SS_TYPES.items() for t in types}


class InventoryError(ElmoTasksError, ValueError):
    """A missing or malformed sense inventory."""


def split_key(key: str) -> tuple[str, str]:
    """(lemma, pos) of a sense key such as ``bank%1:17:01::`` -> ("bank", "NOUN")."""
    lemma, _, rest = key.partition("%")
    if not rest or rest[0] not in SS_TYPE_POS:
        raise ValueError(f"not a WordNet sense key: {key!r}")
    return lemma.lower(), SS_TYPE_POS[rest[0]]


def find_index_sense(path: str | os.PathLike) -> Path:
    """The ``index.sense`` file given itself or a WordNet dict folder (``dict/`` subfolder accepted; a leading ``~``
    is the home folder, as in every path option)."""
    p = Path(path).expanduser()
    if p.is_file() and p.name != "index.sense":  # another name: its first line must read as index.sense's
        with open(p, encoding="utf-8", errors="replace") as f:
            first = f.readline().split()
        if len(first) != 4 or "%" not in first[0]:
            raise InventoryError(f"{p}: not a WordNet index.sense (its first line is not 'sense_key offset "
                                 "sense_number tag_count'); give a WordNet 3.0 dict folder or its index.sense")
    for cand in (p, p / "index.sense", p / "dict" / "index.sense"):
        if cand.is_file():
            return cand
    raise InventoryError(
        f"no WordNet 3.0 index.sense at {p}; run `elmo-tasks data get wordnet-3.0` (-> data/wordnet-3.0/) "
        "or pass --wordnet with any WordNet 3.0 dict folder")


class SenseInventory:
    """Sense keys per (lemma, pos), in WordNet sense-number order."""

    def __init__(self, entries: dict[tuple[str, str], list[tuple[int, str]]], source: str = "") -> None:
        self._senses = {lp: [k for _, k in sorted(v)] for lp, v in entries.items()}
        self._number = {k: n for v in entries.values() for n, k in v}
        self.source = source

    @classmethod
    def from_path(cls, path: str | os.PathLike) -> "SenseInventory":
        """Read ``index.sense`` (or a folder holding it); malformed lines raise with file and line."""
        index = find_index_sense(path)
        entries: dict[tuple[str, str], list[tuple[int, str]]] = {}
        for lineno, line in iter_lines(index):  # the text policy of elmo_features.util.text_input
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 4 or not parts[2].isdigit():
                raise InventoryError(f"{index}:{lineno}: expected 'sense_key synset_offset sense_number "
                                     f"tag_cnt', got {line.strip()!r}")
            try:
                lp = split_key(parts[0])
            except ValueError as e:
                raise InventoryError(f"{index}:{lineno}: {e}") from None
            entries.setdefault(lp, []).append((int(parts[2]), parts[0]))
        if not entries:
            raise InventoryError(f"{index}: empty sense index")
        return cls(entries, str(index))

    def __len__(self) -> int:
        return len(self._number)

    def __contains__(self, key: str) -> bool:
        return key in self._number

    def candidates(self, lemma: str, pos: str) -> list[str]:
        """Sense keys of lemma+pos in sense-number order ([] when WordNet has none)."""
        return self._senses.get((lemma.lower(), pos), [])

    def first_sense(self, lemma: str, pos: str) -> str | None:
        """The WordNet first sense (sense number 1) of lemma+pos, or None when unknown."""
        cands = self.candidates(lemma, pos)
        return cands[0] if cands else None

    def sense_number(self, key: str) -> int:
        """WordNet sense number of a key (large for keys not in the inventory)."""
        return self._number.get(key, 10**6)

"""WordNet 3.0's own files as a graph of senses: every sense key with its synset, the synset's lemmas, gloss,
lexicographer file and hypernyms (``index.sense``, ``data.{noun,verb,adj,adv}``, ``lexnames``), as the
sense-vector method needs them (``tasks/wsd/senses.py``).

A synset is named by its part of speech and offset (``n02084071``); adjective satellites (``s`` in the data
file, ss_type 5 in a sense key) live in ``data.adj`` and are named ``a...``. Hypernyms are the ``@`` pointers
(not the instance hypernyms ``@i``); verbs and nouns have them, adjectives and adverbs do not.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from elmo_features.util.text_input import iter_lines

from elmo_tasks.wsd.data.inventory import InventoryError, find_index_sense

FILES = {"n": "data.noun", "v": "data.verb", "a": "data.adj", "r": "data.adv"}
SS_TYPE_POS = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}  # a sense key's ss_type -> data file
POS_NAMES = {"n": "NOUN", "v": "VERB", "a": "ADJ", "r": "ADV"}
GLOSS_TEXTS = ("definition", "full")  # a gloss sentence's last part: the definition (LMMS's, NLTK's definition()),
# or the gloss field as written, with its quoted usage examples


@dataclass
class Synset:
    """One synset: its lemmas (as written in the data file, underscores for spaces), gloss, lexicographer
    file number and hypernym synset ids."""

    id: str
    lexfile: int
    lemmas: list[str]
    gloss: str
    hypernyms: list[str] = field(default_factory=list)


def definition(gloss: str) -> str:
    """A gloss field without its quoted usage examples: its ';'-separated parts that are not quotes."""
    parts = [p.strip() for p in gloss.split(";")]
    return "; ".join(p for p in parts if p and not p.startswith('"')) or gloss.strip()


class WordNet:
    """Sense keys and synsets of a WordNet 3.0 dict folder."""

    def __init__(self, folder: str | os.PathLike):
        index = find_index_sense(folder)
        self.folder = index.parent
        self.synsets: dict[str, Synset] = {}
        for pos, name in FILES.items():
            path = self.folder / name
            if not path.is_file():
                raise InventoryError(f"{path}: missing; the sense-vector method reads WordNet's data files (run "
                                     "`elmo-tasks data get wordnet-3.0`)")
            self._read_data(path, pos)
        self.synset_of: dict[str, str] = {}  # sense key -> synset id
        self.sense_number: dict[str, int] = {}
        self.tag_count: dict[str, int] = {}  # sense key -> WordNet's tag_cnt (its sense's count in semantic concordances)
        self.keys_of: dict[str, list[str]] = {}  # synset id -> its sense keys, in index.sense order
        for lineno, line in iter_lines(index):  # UTF-8, a bad byte named by file, line and column
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 4 or "%" not in parts[0]:
                raise InventoryError(f"{index}:{lineno}: expected 'sense_key synset_offset sense_number tag_cnt'")
            key, offset = parts[0], parts[1]
            sid = SS_TYPE_POS.get(key.partition("%")[2][:1], "?") + offset
            if sid not in self.synsets:
                raise InventoryError(f"{index}:{lineno}: {key} points at synset {sid}, which no data file holds")
            self.synset_of[key] = sid
            self.sense_number[key] = int(parts[2])
            self.tag_count[key] = int(parts[3]) if parts[3].isdigit() else 0
            self.keys_of.setdefault(sid, []).append(key)

    def _read_data(self, path: Path, pos: str) -> None:
        for lineno, line in iter_lines(path):  # UTF-8, a bad byte named by file, line and column
            if line.startswith("  ") or not line.strip():
                continue  # the licence header
            head, _, gloss = line.partition(" | ")
            fields = head.split()
            try:
                n_words = int(fields[3], 16)
                lemmas = [re.sub(r"\((a|p|ip)\)$", "", w) for w in fields[4:4 + 2 * n_words:2]]  # adj markers
                at = 4 + 2 * n_words
                n_ptrs = int(fields[at])
                ptrs = [fields[at + 1 + 4 * i: at + 5 + 4 * i] for i in range(n_ptrs)]
                sid = pos + fields[0]
                hyper = [p[2].replace("s", "a") + p[1] for p in ptrs if p[0] == "@"]
                self.synsets[sid] = Synset(sid, int(fields[1]), lemmas, gloss.strip(), hyper)
            except (IndexError, ValueError):
                raise InventoryError(f"{path}:{lineno}: not a WordNet data line") from None

    def lemma_of(self, key: str) -> str:
        """The lemma of a sense key as text (``take_place%2:30:00::`` -> ``take place``)."""
        return key.partition("%")[0].replace("_", " ")

    def pos_of(self, key: str) -> str:
        """NOUN, VERB, ADJ or ADV."""
        return POS_NAMES[SS_TYPE_POS[key.partition("%")[2][:1]]]

    def gloss_sentence(self, key: str, text: str = "definition") -> list[str]:
        """The augmented gloss of a sense, LMMS's "lemma - synset lemmas - definition", as whitespace tokens;
        ``text="full"``: the whole gloss field, its quoted usage examples too (``GLOSS_TEXTS``)."""
        syn = self.synsets[self.synset_of[key]]
        lemmas = ", ".join(w.replace("_", " ") for w in syn.lemmas)
        gloss = syn.gloss if text == "full" else definition(syn.gloss)
        gloss = gloss.replace(";", " ; ").replace("(", " ( ").replace(")", " ) ").replace('"', ' " ')
        return f"{self.lemma_of(key)} - {lemmas} - {gloss}".replace(",", " ,").split()

    def keys(self) -> list[str]:
        """Every sense key, sorted."""
        return sorted(self.synset_of)

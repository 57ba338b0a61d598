"""WordNet's morphy: the base forms of a word form for a part of speech, from WordNet's own exception lists
(``noun.exc``, ``verb.exc``, ``adj.exc``, ``adv.exc``) and its detachment rules (morph(7WN)), keeping the forms
that WordNet has as lemmas of that part of speech."""
from __future__ import annotations

from pathlib import Path

from elmo_features.util.text_input import iter_lines

RULES = {"NOUN": [("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"), ("men", "man"),
                  ("ies", "y")],
         "VERB": [("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")],
         "ADJ": [("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
         "ADV": []}
EXC_FILES = {"NOUN": "noun.exc", "VERB": "verb.exc", "ADJ": "adj.exc", "ADV": "adv.exc"}


class Morphy:
    """Base forms per part of speech; ``lemmas``: (lemma, pos) pairs WordNet has (underscores for spaces)."""

    def __init__(self, folder: str | Path, lemmas: set[tuple[str, str]]):
        self.lemmas = lemmas
        self.exceptions: dict[str, dict[str, list[str]]] = {}
        for pos, name in EXC_FILES.items():
            table: dict[str, list[str]] = {}
            path = Path(folder) / name
            if path.is_file():
                for _, line in iter_lines(path):  # UTF-8, a bad byte named by file, line and column
                    parts = line.split()
                    if len(parts) >= 2:
                        table.setdefault(parts[0], []).extend(parts[1:])
            self.exceptions[pos] = table

    def base_forms(self, word: str, pos: str) -> list[str]:
        """The lemmas of ``word`` (a token or a multiword joined by underscores) for ``pos``, most direct first:
        the form itself, its exceptions, then the detachment rules' results."""
        found = []
        for cand in self.forms(word, pos):
            if (cand, pos) in self.lemmas and cand not in found:
                found.append(cand)
        return found

    def forms(self, word: str, pos: str) -> list[str]:
        """Every form morphy tries for ``word`` and ``pos`` (lower-cased), lemma of WordNet or not: the word, its
        exceptions, the detachment rules' results."""
        form = word.lower()
        return [form, *self.exceptions[pos].get(form, []),
                *(form[: -len(suf)] + rep for suf, rep in RULES[pos] if form.endswith(suf) and len(form) > len(suf))]

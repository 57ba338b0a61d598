"""WordNet's multi-word expressions found in a tokenized sentence ("took off" -> take_off, "New York" -> new_york,
"school boards" -> school_board), so that ``wsd tag`` tags them as one unit.

The rule, kept simple: from left to right, at each token the longest run of tokens (at least two) that spells a
multi-word lemma of the sense file wins, and the search goes on after it. A run spells a lemma when its words,
lower-cased and joined by underscores, are the lemma (any part of speech); or, for a verb, when the first word's
morphy form (WordNet's exceptions and detachment rules: took -> take, turns -> turn) and the other words are; or,
for a noun, when the last word's morphy form and the words before it are. A run holding a token marked with its
part of speech (``bank/NOUN``) is not joined: the mark names a single word's part of speech.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from elmo_tasks.wsd.data.morphy import Morphy


class MultiwordIndex:
    """The multi-word lemmas ``pairs`` ((lemma with underscores, part of speech)) found in token lists."""

    def __init__(self, pairs: Iterable[tuple[str, str]], morphy: Morphy):
        self.pos_of: dict[str, set[str]] = {}
        for lemma, pos in pairs:
            if "_" in lemma:
                self.pos_of.setdefault(lemma, set()).add(pos)
        self.longest = max((lemma.count("_") + 1 for lemma in self.pos_of), default=0)
        self.morphy = morphy

    def __len__(self) -> int:
        return len(self.pos_of)

    def lemmas(self, words: Sequence[str]) -> list[tuple[str, str]]:
        """The (lemma, part of speech) pairs the run ``words`` spells (the module's rule), exact spellings first."""
        low = [w.lower() for w in words]
        found = [(lemma, p) for lemma in ["_".join(low)] for p in sorted(self.pos_of.get(lemma, ()))]
        for pos, forms in (("VERB", [[f, *low[1:]] for f in self.morphy.forms(low[0], "VERB")[1:]]),
                           ("NOUN", [[*low[:-1], f] for f in self.morphy.forms(low[-1], "NOUN")[1:]])):
            for form in forms:
                lemma = "_".join(form)
                if pos in self.pos_of.get(lemma, ()) and (lemma, pos) not in found:
                    found.append((lemma, pos))
        return found

    def units(self, words: Sequence[str], marked: Sequence[bool] = ()) -> list[tuple[int, int, list[tuple[str, str]]]]:
        """The sentence ``words`` cut into units (first token, end token, the (lemma, pos) pairs of a multi-word unit,
        [] for a single token), left to right, longest multi-word match first; ``marked[i]``: token i carries a
        part-of-speech mark (never joined)."""
        marked = list(marked) or [False] * len(words)
        out, i = [], 0
        while i < len(words):
            for n in range(min(self.longest, len(words) - i), 1, -1):
                if any(marked[i:i + n]):
                    continue
                pairs = self.lemmas(words[i:i + n])
                if pairs:
                    out.append((i, i + n, pairs))
                    i += n
                    break
            else:
                out.append((i, i + 1, []))
                i += 1
        return out

"""WordNet's usage examples as sense-annotated contexts: the quoted sentences in a synset's gloss field
(``"the bank of the river"``) with the word of one of the synset's own lemmas found in them, by morphy.

The example illustrates its synset, so the matched word is tagged with that lemma's sense key. Training sets of
WSD systems often add these examples ("WordNet examples", e.g. Bevilacqua & Navigli, ACL 2020); here they give
a context vector to senses SemCor never tags (``tasks/wsd/example_sums.py``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from elmo_tasks.wsd.data.morphy import Morphy
from elmo_tasks.wsd.data.wordnet import POS_NAMES, WordNet

TOKEN = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*|\S")  # words (with inner hyphens and apostrophes), else one character


@dataclass(frozen=True)
class TaggedExample:
    """One example sentence as tokens, with ``key`` tagging the tokens ``start:end``."""

    tokens: tuple[str, ...]
    key: str
    start: int
    end: int


def example_texts(gloss: str) -> list[str]:
    """The quoted usage examples of a gloss field (the definition is the unquoted part)."""
    return [e.strip() for e in re.findall(r'"([^"]+)"', gloss) if e.strip()]


def tokenize(text: str) -> list[str]:
    """Words and punctuation marks of an example sentence."""
    return TOKEN.findall(text)


def _find(tokens: list[str], lemma: str, pos: str, morphy: Morphy) -> tuple[int, int] | None:
    """The first span of ``tokens`` that is ``lemma`` (underscores for spaces) in some inflection: a one-word
    lemma by morphy; a multiword one with every word but one as in the lemma and that one an inflection morphy
    undoes ("took place")."""
    parts = lemma.split("_")
    n = len(parts)
    low = [t.lower() for t in tokens]
    for i in range(len(tokens) - n + 1):
        span = low[i:i + n]
        if span == parts:
            return i, i + n
        if n == 1:
            if lemma in morphy.base_forms(span[0], pos):
                return i, i + 1
            continue
        differ = [j for j in range(n) if span[j] != parts[j]]
        if len(differ) == 1 and parts[differ[0]] in morphy.forms(span[differ[0]], pos):
            return i, i + n
    return None


def tagged_examples(wn: WordNet, morphy: Morphy | None = None, only=None) -> list[TaggedExample]:
    """Every usage example of every synset in which one of the synset's lemmas occurs, tagged with that lemma's
    sense key (the synset's first lemma found, in its data file's order); examples without one are skipped.
    ``only`` (a collection of sense keys): the examples of the synsets holding one of them (a few lemmas' senses,
    without matching the examples of all of WordNet)."""
    if morphy is None:
        morphy = Morphy(wn.folder, {(k.partition("%")[0], wn.pos_of(k)) for k in wn.synset_of})
    out = []
    for sid in sorted(wn.synsets):
        if only is not None and not any(k in only for k in wn.keys_of.get(sid, ())):
            continue
        syn = wn.synsets[sid]
        keys = {k.partition("%")[0]: k for k in wn.keys_of.get(sid, [])}
        pos = POS_NAMES[sid[0]]
        for text in example_texts(syn.gloss):
            tokens = tokenize(text)
            for lemma in syn.lemmas:
                key = keys.get(lemma.lower())
                span = _find(tokens, lemma.lower(), pos, morphy) if key else None
                if span is not None:
                    out.append(TaggedExample(tuple(tokens), key, *span))
                    break
    return out

"""The two standard baselines: WordNet first sense and the training corpus' most frequent sense."""
from __future__ import annotations

from collections import Counter
from typing import Sequence

from elmo_tasks.wsd.data.examples import WsdTarget


def first_sense_answers(targets: Sequence[WsdTarget]) -> dict[str, str | None]:
    """WordNet first sense of each target's lemma+pos (None when WordNet lacks the lemma)."""
    return {t.id: t.first_sense for t in targets}


class MostFrequentSense:
    """Most frequent gold key per (lemma, pos) of the training targets (each key of a target counted
    once; ties go to the lower WordNet sense number), backing off to the WordNet first sense."""

    def __init__(self, train: Sequence[WsdTarget]) -> None:
        counts: dict[tuple[str, str], Counter] = {}
        rank: dict[tuple[str, str], dict[str, int]] = {}
        for t in train:
            lp = (t.lemma, t.pos)
            counts.setdefault(lp, Counter()).update(set(t.gold))
            rank.setdefault(lp, {k: i for i, k in enumerate(t.candidates)})
        if not counts:
            raise ValueError("no training targets for the most-frequent-sense baseline")
        self.mfs = {lp: min(c, key=lambda k: (-c[k], rank[lp].get(k, len(rank[lp])), k)) for lp, c in counts.items()}

    def answers(self, targets: Sequence[WsdTarget]) -> tuple[dict[str, str | None], int]:
        """(id -> key, number of targets whose lemma+pos was not in training: WordNet first sense)."""
        out: dict[str, str | None] = {}
        backoff = 0
        for t in targets:
            key = self.mfs.get((t.lemma, t.pos))
            if key is None:
                backoff += 1
                key = t.first_sense
            out[t.id] = key
        return out, backoff

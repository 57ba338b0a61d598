"""Scoring as the framework's ``Scorer.java``, and key files in its answer format.

Per instance of the system file that is in the gold standard, each of its (distinct) answers counts
``1/len(answers)`` as correct when it is among the gold keys, else as wrong; answers for unknown ids
are ignored. P = correct / (correct + wrong), R = correct / gold instances, F1 their harmonic mean.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Mapping

from elmo_features.util.provenance import write_text_atomic



@dataclass(frozen=True)
class Score:
    """Counts and P/R/F1 (fractions in [0, 1])."""

    correct: float
    answered: float  # correct + wrong (fractional with multi-answer instances)
    total: int

    @property
    def precision(self) -> float:
        return self.correct / self.answered if self.answered else 0.0

    @property
    def recall(self) -> float:
        return self.correct / self.total if self.total else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def as_dict(self) -> dict:
        """Counts plus P/R/F1 in percent (rounded to 0.1 as the scorer prints them)."""
        return {"correct": self.correct, "answered": self.answered, "total": self.total,
                "P": round(100 * self.precision, 1), "R": round(100 * self.recall, 1), "F1": round(100 * self.f1, 1)}


def score(gold: Mapping[str, Iterable[str]], system: Mapping[str, Iterable[str] | str]) -> Score:
    """Score system answers (id -> key or keys) against gold (id -> keys), exactly as Scorer.java."""
    if not gold:
        raise ValueError("empty gold standard: nothing to score")
    ok = notok = 0.0
    for iid, answers in system.items():
        if iid not in gold:
            continue
        answers = {answers} if isinstance(answers, str) else set(answers)
        if not answers:
            continue
        keys = set(gold[iid])
        good = sum(1 for a in answers if a in keys)
        ok += good / len(answers)
        notok += (len(answers) - good) / len(answers)
    return Score(ok, ok + notok, len(gold))


def merge_scores(scores: Iterable[Score]) -> Score:
    """Score of the union of disjoint test sets (the framework's ALL)."""
    scores = list(scores)
    return Score(sum(s.correct for s in scores), sum(s.answered for s in scores), sum(s.total for s in scores))


def write_key_file(path: str | os.PathLike, answers: Mapping[str, str | Iterable[str]], order: Iterable[str]) -> None:
    """Write ``instance_id key`` lines (framework answer format) in the given id order, atomically.

    Instances without an answer (None or missing) are left out, so the scorer counts them as unanswered.
    """
    lines = []
    for iid in order:
        a = answers.get(iid)
        if not a:
            continue
        keys = [a] if isinstance(a, str) else list(a)
        lines.append(" ".join([iid, *keys]) + "\n")
    write_text_atomic(path, "".join(lines))

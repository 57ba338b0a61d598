"""Task metrics: strict span F1 (seqeval), token accuracy, sentence accuracy and macro-F1 (scikit-learn)."""
from __future__ import annotations

from collections import Counter
from typing import Iterable

SCHEMES = ("BIO", "IOB1", "BIOES")


def iob1_to_bio(tags: list[str]) -> list[str]:
    """IOB1 (I- may start a span; B- only between same-type spans) -> BIO (every span starts with B-)."""
    out = []
    prev = "O"
    for t in tags:
        if t.startswith("I-") and (prev == "O" or prev[2:] != t[2:]):
            t = "B-" + t[2:]
        out.append(t)
        prev = t
    return out


def span_f1(gold: list[list[str]], pred: list[list[str]], scheme: str) -> dict[str, float]:
    """Strict span precision/recall/F1 (seqeval mode="strict"; IOB2 for BIO, IOBES for BIOES).

    IOB1 sequences are converted to BIO first. Ill-formed predicted spans count as errors (strict mode).
    """
    from seqeval.metrics import f1_score, precision_score, recall_score  # lazy: seqeval imports scikit-learn (slow)
    from seqeval.scheme import IOB2, IOBES

    if scheme not in SCHEMES:
        raise ValueError(f"unknown tag scheme {scheme!r}; valid: {', '.join(SCHEMES)}")
    if len(gold) != len(pred) or any(len(g) != len(p) for g, p in zip(gold, pred)):
        raise ValueError("span_f1: gold and predicted tag sequences differ in number or length")
    if scheme == "IOB1":
        gold, pred = [iob1_to_bio(g) for g in gold], [iob1_to_bio(p) for p in pred]
    mode = dict(mode="strict", scheme=IOBES if scheme == "BIOES" else IOB2, zero_division=0)
    return {
        "precision": float(precision_score(gold, pred, **mode)),
        "recall": float(recall_score(gold, pred, **mode)),
        "f1": float(f1_score(gold, pred, **mode)),
    }


def token_accuracy(gold: list[list[str]], pred: list[list[str]]) -> float:
    """Fraction of tokens whose predicted tag equals the gold tag."""
    n = sum(len(g) for g in gold)
    if n == 0:
        raise ValueError("token_accuracy: no tokens")
    return sum(a == b for g, p in zip(gold, pred) for a, b in zip(g, p)) / n


def classification_scores(gold: list[str], pred: list[str]) -> dict[str, float]:
    """Accuracy and macro-F1 over the union of gold and predicted labels (sklearn)."""
    from sklearn.metrics import accuracy_score, f1_score  # lazy: scikit-learn is slow to import

    if not gold:
        raise ValueError("classification_scores: no examples")
    labels = sorted(set(gold) | set(pred))
    return {
        "accuracy": float(accuracy_score(gold, pred)),
        "macro_f1": float(f1_score(gold, pred, labels=labels, average="macro", zero_division=0)),
    }


def unseen_labels(gold_labels: Iterable[str], known: set[str]) -> Counter:
    """Count gold labels that the model never saw in training (they can never be predicted)."""
    return Counter(label for label in gold_labels if label not in known)

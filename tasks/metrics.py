"""Task metrics: strict span F1 (tag spans from tasks.data.tag_schemes), token accuracy, sentence accuracy and
macro-F1 (scikit-learn)."""
from __future__ import annotations

from collections import Counter
from typing import Iterable

from .data.tag_schemes import check_scheme_name, tags_to_spans


def span_f1(gold: list[list[str]], pred: list[list[str]], scheme: str) -> dict[str, float]:
    """Strict span precision/recall/F1 (micro): a predicted span counts when its type and both ends match.

    Spans come from ``tag_schemes.tags_to_spans(strict=False)`` in ``scheme`` (IOB1, BIO or BIOES): an
    ill-formed chunk (BIO ``I-`` after ``O``, a BIOES chunk without its ``E-``) is no span, so it counts as
    an error, as in seqeval's strict mode.
    """
    scheme = check_scheme_name(scheme)
    if len(gold) != len(pred) or any(len(g) != len(p) for g, p in zip(gold, pred)):
        raise ValueError("span_f1: gold and predicted tag sequences differ in number or length")
    correct = n_gold = n_pred = 0
    for g, p in zip(gold, pred):
        gs, ps = set(tags_to_spans(g, scheme, strict=False)), set(tags_to_spans(p, scheme, strict=False))
        correct, n_gold, n_pred = correct + len(gs & ps), n_gold + len(gs), n_pred + len(ps)
    precision = correct / n_pred if n_pred else 0.0
    recall = correct / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


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

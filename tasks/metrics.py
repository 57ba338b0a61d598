"""Task metrics: strict span F1 (seqeval), token accuracy, sentence accuracy and macro-F1 (scikit-learn)."""
from __future__ import annotations

from collections import Counter
from typing import Iterable

from elmo_tasks.data.tag_schemes import check_scheme_name, spans_to_tags, tags_to_spans


def span_f1(gold: list[list[str]], pred: list[list[str]], scheme: str) -> dict[str, float]:
    """Strict span precision/recall/F1 (micro) by seqeval's strict mode: a predicted span counts when its type and
    both ends match, and an ill-formed chunk (BIO ``I-`` after ``O``, a BIOES chunk without its ``E-``) is no span.

    BIO and BIOES are scored as they are. IOB1 is first re-encoded as BIO by ``tag_schemes`` (an ill-formed IOB1
    chunk dropped, as BIO's are), because seqeval's strict IOB1 reads ill-formed chunks its own way.
    """
    from seqeval.metrics.v1 import precision_recall_fscore_support  # lazy: pulls in scikit-learn
    from seqeval.scheme import IOB2, IOBES

    scheme = check_scheme_name(scheme)
    if len(gold) != len(pred) or any(len(g) != len(p) for g, p in zip(gold, pred)):
        raise ValueError("span_f1: gold and predicted tag sequences differ in number or length")
    if scheme == "IOB1":
        gold, pred = ([spans_to_tags(tags_to_spans(t, "IOB1", strict=False), len(t), "BIO") for t in seqs]
                      for seqs in (gold, pred))
    precision, recall, f1, _ = precision_recall_fscore_support(
        gold, pred, average="micro", zero_division=0, scheme=IOBES if scheme == "BIOES" else IOB2)
    return {"precision": float(precision), "recall": float(recall), "f1": float(f1)}


def scores_text(scores: dict) -> str:
    """Scores as one line for people, rounded the same way by every command: ``precision 0.8912, f1 0.8899, ...``
    (fractions to 4 decimals, counts as they are)."""
    return ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in scores.items())


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

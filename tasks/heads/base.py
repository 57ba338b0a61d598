"""The task-head contract shared by every head, and a BiLSTM encoder heads can reuse.

A head is an ``nn.Module`` with a ``Config`` dataclass (its hyperparameters, checked by elmo_tasks.experiment.config) that
turns features (B, T, D) + mask (B, T) into a loss and predictions. Everything that depends on the data set
(the label set, a tag scheme) is the head's ``vocab``: a JSON-able dict built from the training data by
``build_vocab`` and saved next to the checkpoint, so a reloaded head is rebuilt exactly.
"""
from __future__ import annotations

import abc
import sys
from collections import Counter
from typing import Any, ClassVar

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from elmo_features.util.arguments import check_mask
from elmo_features.util.devices import module_device
from elmo_features.util.once import first_time

from elmo_tasks.data.types import DataFormatError
from elmo_tasks.metrics import unseen_labels
from elmo_tasks.registry import HEADS, class_contract


class Head(nn.Module, abc.ABC):
    """Base class of task heads (see docs/adding_a_head.md): implement ``gold_labels``, ``loss``, ``predict``,
    ``evaluate`` and ``format_prediction``, and set ``Config`` and ``primary_metric``."""

    Config: ClassVar[type]  # dataclass of hyperparameters
    primary_metric: ClassVar[str]  # the dev metric used for early stopping (higher is better)
    block_output: ClassVar[bool] = False  # format_prediction gives a multi-line block (blank line between)
    # the class name of the examples it takes (e.g. "TaggedSentence"), matched against a reader's return annotation
    # before any work; None: not checked
    example_type: ClassVar[str | None] = None

    def __init__(self, config: Any, input_dim: int, vocab: dict):
        super().__init__()
        self.config = config
        self.input_dim = input_dim
        self.vocab = vocab

    # ------------------------------------------------------------ data (override as needed)
    @classmethod
    @abc.abstractmethod
    def gold_labels(cls, example: Any) -> list[str]:
        """The gold labels of one example (tags of a sentence, or [label])."""

    @classmethod
    def check_example(cls, example: Any, where: str) -> None:
        """Raise ValueError with ``where`` in the message if the example is malformed."""

    @classmethod
    def check_scored_examples(cls, vocab: dict, examples: list, where: str) -> None:
        """Raise DataFormatError (naming ``where``) when the head's metrics are undefined on a dev/test set."""

    @classmethod
    def check_labels_seen(cls, vocab: dict, examples: list, where: str, what: str = "labels",
                          of=None) -> None:
        """DataFormatError (naming ``where``) when no gold label of a dev/test set (``of(label)``: what is compared,
        e.g. an entity type; None: skipped) occurs in the training data (``vocab["labels"]``): every prediction
        would be wrong by construction, and a score of 0 would be reported as a result."""
        of = of or (lambda lab: lab)
        gold = {of(lab) for ex in examples for lab in cls.gold_labels(ex)} - {None}
        known = {of(lab) for lab in vocab.get("labels") or []} - {None}
        if gold and known and not gold & known:
            show = lambda names: ", ".join(sorted(map(str, names))[:5]) + (", ..." if len(names) > 5 else "")
            raise DataFormatError(f"{where}: none of its {what} ({show(gold)}) occurs in the training data "
                                  f"({show(known)}): every prediction is wrong by construction, so its score would "
                                  "measure nothing; give a set of the task the head is trained on (or check the "
                                  "reader's label column)")

    @classmethod
    def build_vocab(cls, config: Any, train_examples: list, data_options: dict) -> dict:
        """Label set (sorted) from the training data; ``data_options`` are the reader options."""
        labels = sorted({lab for ex in train_examples for lab in cls.gold_labels(ex)})
        if not labels:
            raise DataFormatError(f"{cls.__name__}: the training data has no labels; check data.train and the "
                                  "reader's options (e.g. tag_column)")
        _warn_case_variants(labels)
        return {"labels": labels}

    @classmethod
    def token_positions(cls, example: Any) -> list[int] | None:
        """The tokens of ``example`` whose features the head reads (None: all of them). A head that reads a few
        tokens (e.g. ``wsd_linear``: the targets) lets long data sets keep only those rows (tasks/features/subset.py)."""
        return None

    @classmethod
    def demo_examples(cls) -> list:
        """A few tiny labelled examples of the kind this head takes (for smoke tests and docs)."""
        raise NotImplementedError

    def blank_example(self, tokens: list[str]) -> Any:
        """An unlabelled example for plain-text prediction."""
        raise NotImplementedError(f"{type(self).__name__} cannot predict from plain text; use --reader")

    def unseen(self, examples: list) -> Counter:
        """Gold labels in ``examples`` that never occurred in training (counted, not an error)."""
        known = set(self.vocab["labels"])
        return unseen_labels((lab for ex in examples for lab in self.gold_labels(ex)), known)

    # ------------------------------------------------------------ model
    def bind_features(self, features: Any) -> None:
        """Called once by ``TaskModel`` with the feature source, before training or loading a state: parts that
        need the source's layer shapes (a head's ``output_mix``) are built here. Default: nothing."""

    @property
    def uses_layers(self) -> bool:
        """True when ``loss``/``predict`` also need ``layers=``: the source's unfused layers (L, B, T, D)."""
        return False

    def regularization(self) -> torch.Tensor:
        """A penalty added to the training loss (e.g. an output mix's L2); 0 by default."""
        return torch.zeros((), device=module_device(self))

    def report(self) -> dict:
        """JSON-able learned weights of the head worth reporting (e.g. its output mix); empty by default."""
        return {}

    @abc.abstractmethod
    def loss(self, x: torch.Tensor, mask: torch.Tensor, examples: list) -> torch.Tensor:
        """Mean training loss of a batch. x: (B, T, D), mask: (B, T) bool."""

    def loss_units(self, examples: list) -> int:
        """How many units the mean of ``loss`` over ``examples`` divides by (default: the examples). Data-parallel
        training weights each rank's loss by its share of them, so that it equals one process's mean."""
        return len(examples)

    @abc.abstractmethod
    def predict(self, x: torch.Tensor, mask: torch.Tensor, examples: list) -> list:
        """One JSON-able prediction per example (label strings)."""

    @abc.abstractmethod
    def evaluate(self, examples: list, predictions: list) -> dict[str, float]:
        """Metrics (must include ``primary_metric``)."""

    @abc.abstractmethod
    def format_prediction(self, example: Any, prediction: Any) -> str:
        """Text for one prediction in ``elmo-tasks predict`` output."""


HEADS.set_contract(class_contract(Head, attributes=("primary_metric",)))


class TaggingHead(Head):
    """A head that labels every token of a ``TaggedSentence``: its gold labels are the sentence's tags."""

    example_type = "TaggedSentence"

    @classmethod
    def gold_labels(cls, example) -> list[str]:
        return list(example.tags)

    @classmethod
    def check_scored_examples(cls, vocab: dict, examples: list, where: str) -> None:
        cls.check_labels_seen(vocab, examples, where, "tags")

    @classmethod
    def check_example(cls, example, where: str) -> None:
        if len(example.tokens) != len(example.tags):
            raise DataFormatError(f"{where}: {len(example.tokens)} tokens but {len(example.tags)} tags")


def run_packed(lstm: nn.LSTM, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """A bidirectional batch-first ``lstm`` over the first ``lengths`` steps of each row, packed so padding never
    leaks: (B, T, D), (B,) -> (B, T, 2H), zero at padding. A row of length 0 (all padding) gives zeros and a batch
    of 0 rows an empty (0, T, 2H), as AllenNLP's encoders do (torch's packing refuses both)."""
    B, T = x.shape[:2]
    keep = lengths > 0  # (B,)
    if B and bool(keep.all()):
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        return pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=T)[0]  # (B, T, 2H)
    out = x.new_zeros(B, T, 2 * lstm.hidden_size)  # (B, T, 2H)
    if bool(keep.any()):
        out[keep] = run_packed(lstm, x[keep], lengths[keep])  # the rows with a token
    return out


class BiLSTMEncoder(nn.Module):
    """Dropout -> BiLSTM (packed, so padding never leaks) -> dropout. hidden_dim 0 = dropout only. A row of
    padding only gives zeros, a batch of 0 rows an empty output (``run_packed``)."""

    def __init__(self, input_dim: int, hidden_dim: int, num_layers: int = 1, dropout: float = 0.0):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.lstm = None
        self.output_dim = input_dim
        if hidden_dim > 0:
            self.lstm = nn.LSTM(input_dim, hidden_dim, num_layers=num_layers, batch_first=True,
                                bidirectional=True, dropout=dropout if num_layers > 1 else 0.0)
            self.output_dim = 2 * hidden_dim

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T, D), (B, T) -> (B, T, output_dim), zero at padding."""
        mask = check_mask(mask, "BiLSTMEncoder mask", prefix=True, shape=x.shape[:2])  # (B, T) bool, left-aligned
        x = self.drop(x)
        if self.lstm is None:
            return x * mask.unsqueeze(-1).to(x.dtype)
        return self.drop(run_packed(self.lstm, x, mask.sum(1)))  # (B, T, 2H)


def _warn_case_variants(labels: list) -> None:
    """One warning line for training labels that differ only in letter case (``pos`` and ``POS``): they are
    separate classes, which is rarely what the data meant."""
    groups: dict[str, list[str]] = {}
    for lab in labels:
        if isinstance(lab, str):
            groups.setdefault(lab.casefold(), []).append(lab)
    alike = [g for g in groups.values() if len(g) > 1]
    if alike and first_time(("case variants", tuple(alike[0]))):
        more = f" (and {len(alike) - 1} more such group(s))" if len(alike) > 1 else ""
        print(f"warning: the training labels {' and '.join(map(repr, alike[0]))} differ only in letter case{more}: "
              "they are separate classes; if they mean one, write them alike in the data", file=sys.stderr)

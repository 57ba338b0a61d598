"""``sentence_classifier``: BiLSTM encoder + max/mean pooling + linear layer; accuracy and macro-F1."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn
from torch.nn import functional as F

from ..metrics import classification_scores
from .base import BiLSTMEncoder, Head


@dataclass
class SentenceClassifierConfig:
    hidden_dim: int = 64  # BiLSTM hidden size per direction (0 = pool the features directly)
    num_layers: int = 1
    dropout: float = 0.5
    pooling: Literal["max", "mean"] = "max"


class SentenceClassifier(Head):
    """Pools BiLSTM states over the unpadded tokens and classifies the sentence."""

    Config = SentenceClassifierConfig
    primary_metric = "accuracy"

    def __init__(self, config: SentenceClassifierConfig, input_dim: int, vocab: dict):
        super().__init__(config, input_dim, vocab)
        self.labels: list[str] = list(vocab["labels"])
        self.index = {t: i for i, t in enumerate(self.labels)}
        self.encoder = BiLSTMEncoder(input_dim, config.hidden_dim, config.num_layers, config.dropout)
        self.out = nn.Linear(self.encoder.output_dim, len(self.labels))

    @classmethod
    def gold_labels(cls, example) -> list[str]:
        return [example.label]

    @classmethod
    def check_example(cls, example, where: str) -> None:
        if example.label is None or str(example.label) == "":
            raise ValueError(f"{where}: the example has no label")

    @classmethod
    def demo_examples(cls) -> list:
        from tasks.data.types import LabeledSentence

        rows = [
            ("pos", "a great and moving film"), ("neg", "dull and boring"), ("pos", "great fun"),
            ("neg", "a boring mess"), ("pos", "moving and great"), ("neg", "boring , dull , long"),
        ]
        return [LabeledSentence(s.split(), lab) for lab, s in rows]

    def blank_example(self, tokens: list[str]):
        from tasks.data.types import LabeledSentence

        return LabeledSentence(list(tokens), "")

    def logits(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T, D), (B, T) -> (B, n_labels)."""
        h = self.encoder(x, mask)  # (B, T, H)
        m = mask.unsqueeze(-1)  # (B, T, 1)
        if self.config.pooling == "max":
            pooled = h.masked_fill(~m, float("-inf")).max(dim=1).values  # (B, H)
        else:
            pooled = (h * m).sum(1) / m.sum(1).clamp(min=1)  # (B, H)
        return self.out(pooled)

    def loss(self, x: torch.Tensor, mask: torch.Tensor, examples: list) -> torch.Tensor:
        gold = torch.tensor([self.index[ex.label] for ex in examples], dtype=torch.long)  # (B,)
        return F.cross_entropy(self.logits(x, mask), gold)

    def predict(self, x: torch.Tensor, mask: torch.Tensor, examples: list) -> list[str]:
        return [self.labels[i] for i in self.logits(x, mask).argmax(dim=1).tolist()]

    def evaluate(self, examples: list, predictions: list) -> dict[str, float]:
        return classification_scores([ex.label for ex in examples], list(predictions))

    def format_prediction(self, example, prediction: str) -> str:
        return f"{prediction}\t{' '.join(example.tokens)}"

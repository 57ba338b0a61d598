"""``sentence_classifier``: BiLSTM encoder + max/mean pooling + linear layer; accuracy and macro-F1."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn
from torch.nn import functional as F

from elmo_features.util.schema import Int, Num, key

from elmo_tasks.components import MAX_LAYERS, MAX_UNITS
from elmo_tasks.data.types import DataFormatError, LabeledSentence
from elmo_tasks.metrics import classification_scores
from elmo_tasks.registry import HEADS
from elmo_tasks.heads.base import Head
from elmo_tasks.heads.output_mix import OutputMixOption
from elmo_tasks.heads.token_input import TokenInputOptions, input_and_encoder, token_input_vocab


@dataclass
class SentenceClassifierConfig(TokenInputOptions):
    # + the strong-baseline options of TokenInputOptions (docs/strong_baselines.md), all off by default
    hidden_dim: int = key(Int(min=0, max=MAX_UNITS), 64,
                          doc="BiLSTM hidden size per direction (0 = pool the features directly)")
    num_layers: int = key(Int(min=1, max=MAX_LAYERS), 1)
    dropout: float = key(Num(min=0, lt=1), 0.5)
    pooling: Literal["max", "mean"] = "max"
    output_mix: dict | None = key(default=None, meta={"component": "mix"},
                                  doc="ELMo sec. 3.3: a separate fusion of the biLM layers also at the BiLSTM output "
                                      "(docs/fusion.md); null = off")


@HEADS.register("sentence_classifier")
class SentenceClassifier(OutputMixOption, Head):
    """Pools BiLSTM states over the unpadded tokens and classifies the sentence.

    With ``output_mix``, the pooled vector is that of [BiLSTM states; a second fusion of the biLM layers]."""

    Config = SentenceClassifierConfig
    primary_metric = "accuracy"
    example_type = "LabeledSentence"

    def __init__(self, config: SentenceClassifierConfig, input_dim: int, vocab: dict):
        super().__init__(config, input_dim, vocab)
        self.labels: list[str] = list(vocab["labels"])
        self.index = {t: i for i, t in enumerate(self.labels)}
        self.inputs, self.encoder = input_and_encoder(config, input_dim, vocab)
        self.out = nn.Linear(self.encoder.output_dim, len(self.labels))
        self.output_mix = None  # built by bind_features when config.output_mix is set

    @classmethod
    def gold_labels(cls, example) -> list[str]:
        return [example.label]

    @classmethod
    def check_scored_examples(cls, vocab: dict, examples: list, where: str) -> None:
        cls.check_labels_seen(vocab, examples, where)

    @classmethod
    def check_example(cls, example, where: str) -> None:
        if example.label is None or str(example.label) == "":
            raise DataFormatError(f"{where}: the example has no label")

    @classmethod
    def build_vocab(cls, config: SentenceClassifierConfig, train_examples: list, data_options: dict) -> dict:
        return {**super().build_vocab(config, train_examples, data_options), **token_input_vocab(config, train_examples)}

    @classmethod
    def demo_examples(cls) -> list:
        rows = [
            ("pos", "a great and moving film"), ("neg", "dull and boring"), ("pos", "great fun"),
            ("neg", "a boring mess"), ("pos", "moving and great"), ("neg", "boring , dull , long"),
        ]
        return [LabeledSentence(s.split(), lab) for lab, s in rows]

    def blank_example(self, tokens: list[str]):
        return LabeledSentence(list(tokens), "")

    def pool(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T, H), (B, T) -> (B, H): max or mean over the unpadded tokens."""
        m = mask.unsqueeze(-1)  # (B, T, 1)
        if self.config.pooling == "max":
            return h.masked_fill(~m, float("-inf")).max(dim=1).values  # (B, H)
        return (h * m).sum(1) / m.sum(1).clamp(min=1)  # (B, H)

    def logits(self, x: torch.Tensor, mask: torch.Tensor, layers: torch.Tensor | None = None,
               examples: list | None = None) -> torch.Tensor:
        """(B, T, D), (B, T) [, layers (L, B, T, D) for output_mix] [, the B examples, for chars/casing]
        -> (B, n_labels)."""
        if self.inputs is not None:
            x = self.inputs(x, mask, examples)  # (B, T, D + chars + casing)
        scores = self.out(self.pool(self.encoder(x, mask), mask))  # (B, n_labels)
        if self.output_mix is not None:  # pooling is per dimension: pool([h; m]) = [pool(h); pool(m)]
            scores = scores + self.output_mix.out(self.pool(self.output_mix.mixed(layers, mask), mask))
        return scores

    def loss(self, x: torch.Tensor, mask: torch.Tensor, examples: list,
             layers: torch.Tensor | None = None) -> torch.Tensor:
        gold = torch.tensor([self.index[ex.label] for ex in examples], dtype=torch.long, device=x.device)  # (B,)
        return F.cross_entropy(self.logits(x, mask, layers, examples), gold)

    def predict(self, x: torch.Tensor, mask: torch.Tensor, examples: list,
                layers: torch.Tensor | None = None) -> list[str]:
        return [self.labels[i] for i in self.logits(x, mask, layers, examples).argmax(dim=1).tolist()]

    def evaluate(self, examples: list, predictions: list) -> dict[str, float]:
        return classification_scores([ex.label for ex in examples], list(predictions))

    def format_prediction(self, example, prediction: str) -> str:
        return f"{prediction}\t{' '.join(example.tokens)}"

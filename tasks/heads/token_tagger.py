"""``token_tagger``: a per-token softmax tagger (POS or chunk tags), scored by token accuracy."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from elmo_features.util.schema import Int, Num, key

from elmo_tasks.components import MAX_UNITS
from elmo_tasks.data.types import TaggedSentence
from elmo_tasks.metrics import token_accuracy
from elmo_tasks.registry import HEADS
from elmo_tasks.heads.base import BiLSTMEncoder, TaggingHead


@dataclass
class TokenTaggerConfig:
    hidden_dim: int = key(Int(min=0, max=MAX_UNITS), 0,
                          doc="BiLSTM hidden size per direction; 0 = a linear probe on the features")
    dropout: float = key(Num(min=0, lt=1), 0.0)


@HEADS.register("token_tagger")
class TokenTagger(TaggingHead):
    """Features -> (optional BiLSTM) -> linear -> softmax over the tag set, independently per token."""

    Config = TokenTaggerConfig
    block_output = True
    primary_metric = "accuracy"

    def __init__(self, config: TokenTaggerConfig, input_dim: int, vocab: dict):
        super().__init__(config, input_dim, vocab)
        self.labels: list[str] = list(vocab["labels"])  # built from the training data by Head.build_vocab
        self.index = {t: i for i, t in enumerate(self.labels)}
        self.encoder = BiLSTMEncoder(input_dim, config.hidden_dim, 1, config.dropout)
        self.out = nn.Linear(self.encoder.output_dim, len(self.labels))

    @classmethod
    def demo_examples(cls) -> list:
        rows = [("the cat sat", "DT NN VBD"), ("a dog ran home", "DT NN VBD NN"), ("John sat", "NNP VBD"),
                ("the dog sat", "DT NN VBD")]
        return [TaggedSentence(s.split(), t.split(), {}) for s, t in rows]

    def blank_example(self, tokens: list[str]):
        return TaggedSentence(list(tokens), [self.labels[0]] * len(tokens), {})

    def logits(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T, D), (B, T) -> (B, T, n_labels)."""
        return self.out(self.encoder(x, mask))

    def loss(self, x: torch.Tensor, mask: torch.Tensor, examples: list) -> torch.Tensor:
        gold = torch.full(mask.shape, -100, dtype=torch.long, device=x.device)  # (B, T); -100 = padding, ignored
        for b, ex in enumerate(examples):
            gold[b, : len(ex.tags)] = torch.tensor([self.index[t] for t in ex.tags], device=x.device)
        return F.cross_entropy(self.logits(x, mask).transpose(1, 2), gold, ignore_index=-100)

    def loss_units(self, examples: list) -> int:
        return sum(len(ex.tags) for ex in examples)  # the cross-entropy is a mean over tokens

    def predict(self, x: torch.Tensor, mask: torch.Tensor, examples: list) -> list[list[str]]:
        best = self.logits(x, mask).argmax(dim=-1)  # (B, T)
        return [[self.labels[i] for i in best[b, : len(ex.tokens)].tolist()] for b, ex in enumerate(examples)]

    def evaluate(self, examples: list, predictions: list) -> dict[str, float]:
        return {"accuracy": token_accuracy([list(ex.tags) for ex in examples], predictions)}

    def format_prediction(self, example, prediction: list[str]) -> str:
        return "\n".join(f"{tok}\t{tag}" for tok, tag in zip(example.tokens, prediction))

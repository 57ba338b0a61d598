"""``crf_tagger``: a BiLSTM-CRF sequence tagger (NER), scored by strict span F1 for the tag scheme."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from elmo_features.util.schema import Int, Num, key

from elmo_tasks.components import MAX_LAYERS, MAX_UNITS
from elmo_tasks.data.tag_schemes import (END, START, TagSchemeError, allowed_transitions, check_scheme_name,
                                detect_scheme, is_transition_allowed, scheme_tag, split_tag, tags_to_spans)
from elmo_tasks.data.types import DataFormatError, TaggedSentence
from elmo_tasks.metrics import span_f1, token_accuracy
from elmo_tasks.registry import HEADS
from elmo_tasks.heads.base import TaggingHead
from elmo_tasks.heads.crf import ConditionalRandomField
from elmo_tasks.heads.output_mix import OutputMixOption
from elmo_tasks.heads.token_input import TokenInputOptions, input_and_encoder, token_input_vocab


@dataclass
class CrfTaggerConfig(TokenInputOptions):
    # + the strong-baseline options of TokenInputOptions (docs/strong_baselines.md), all off by default
    hidden_dim: int = key(Int(min=0, max=MAX_UNITS), 100,
                          doc="BiLSTM hidden size per direction (0 = no LSTM: a linear-chain CRF on the features)")
    num_layers: int = key(Int(min=1, max=MAX_LAYERS), 1)
    dropout: float = key(Num(min=0, lt=1), 0.5)
    scheme: Literal["auto", "BIO", "IOB1", "BIOES"] = key(default="auto",
                                                          doc="auto: the reader's scheme, else detected from the tags")
    constrained_decoding: bool = key(default=True, doc="Viterbi obeys the scheme's allowed transitions")
    output_mix: dict | None = key(default=None, meta={"component": "mix"},
                                  doc="ELMo sec. 3.3: a separate fusion of the biLM layers also at the BiLSTM output "
                                      "(docs/fusion.md); null = off")


def _entity_type(tag: str) -> str | None:
    """``B-PER`` -> ``PER``; None for ``O`` or a malformed tag (scored as an error, not refused here)."""
    try:
        return split_tag(tag)[1]
    except TagSchemeError:
        return None


MAX_BAD_SENTENCES = 0.05  # a larger share of training sentences with transitions the scheme forbids: a mismatch


def check_tag_transitions(examples: list, scheme: str) -> None:
    """Refuse training data whose tag sequences break ``scheme`` in many sentences (BIO data declared BIOES,
    IOB1 data declared BIO, ...): the CRF's constrained decoding could never output its entities. A few
    broken sentences (annotation noise) pass."""
    bad, first = 0, None
    for i, ex in enumerate(examples):
        tags = [START, *ex.tags, END]
        parts = [(START, None)] + [scheme_tag(t, scheme, k) for k, t in enumerate(ex.tags)] + [(END, None)]
        for k in range(len(parts) - 1):
            if not is_transition_allowed(scheme, *parts[k], *parts[k + 1]):
                bad += 1
                where = (f"{tags[k + 1]} starts a sentence" if k == 0 else f"{tags[k]} ends a sentence"
                         if k == len(parts) - 2 else f"{tags[k + 1]} after {tags[k]}")
                first = first or f"example {i + 1}: {where}"
                break
    if bad > MAX_BAD_SENTENCES * len(examples):
        raise DataFormatError(f"training data: {bad} of {len(examples)} sentences break the {scheme} tag scheme "
                              f"({first}); the data is in another scheme: set head.scheme or the reader's scheme "
                              "option to the data's scheme (BIO, IOB1 or BIOES)")


@HEADS.register("crf_tagger")
class CrfTagger(OutputMixOption, TaggingHead):
    """BiLSTM over the features -> per-tag emission scores -> CRF (forward algorithm loss, Viterbi decoding).

    With ``output_mix``, the emission layer sees [BiLSTM states; a second fusion of the biLM layers]."""

    Config = CrfTaggerConfig
    block_output = True
    primary_metric = "f1"

    def __init__(self, config: CrfTaggerConfig, input_dim: int, vocab: dict):
        super().__init__(config, input_dim, vocab)
        self.labels: list[str] = list(vocab["labels"])
        self.scheme: str = vocab["scheme"]
        self.index = {t: i for i, t in enumerate(self.labels)}
        self.inputs, self.encoder = input_and_encoder(config, input_dim, vocab)
        self.emit = nn.Linear(self.encoder.output_dim, len(self.labels))
        self.crf = ConditionalRandomField(len(self.labels), allowed_transitions(self.scheme, self.labels))
        self.output_mix = None  # built by bind_features when config.output_mix is set

    # ------------------------------------------------------------ data
    @classmethod
    def build_vocab(cls, config: CrfTaggerConfig, train_examples: list, data_options: dict) -> dict:
        labels = super().build_vocab(config, train_examples, data_options)["labels"]
        try:  # the scheme the reader declares, else the one the training tag sequences are in
            scheme = check_scheme_name(config.scheme if config.scheme != "auto" else data_options.get("scheme")
                                       or detect_scheme([ex.tags for ex in train_examples]))
            for i, t in enumerate(labels):
                scheme_tag(t, scheme, i)
        except TagSchemeError as e:
            raise DataFormatError(f"training data: {e}; set head.scheme or the reader's scheme option to the "
                                  "data's tag scheme") from None
        check_tag_transitions(train_examples, scheme)
        return {"labels": labels, "scheme": scheme, **token_input_vocab(config, train_examples)}

    @classmethod
    def check_scored_examples(cls, vocab: dict, examples: list, where: str) -> None:
        """Strict span F1 needs gold entities: without any, precision and recall are undefined (not 0.0)."""
        if not any(tags_to_spans(ex.tags, vocab["scheme"], strict=False) for ex in examples):
            raise DataFormatError(f"{where} has no gold entities (every tag is O): span F1 is undefined on it; give a "
                                  "file with entities (or check the reader's tag column)")
        cls.check_labels_seen(vocab, examples, where, "entity types", of=_entity_type)

    @classmethod
    def demo_examples(cls) -> list:
        rows = [
            ("John lives in Paris", "B-PER O O B-LOC"),
            ("Mary Ann Smith visited Berlin yesterday", "B-PER I-PER I-PER O B-LOC O"),
            ("the cat sat", "O O O"),
            ("Paris is big", "B-LOC O O"),
            ("Smith met John in Berlin", "B-PER O B-PER O B-LOC"),
            ("New York is not Paris", "B-LOC I-LOC O O B-LOC"),
        ]
        return [TaggedSentence(s.split(), t.split(), {}) for s, t in rows]

    def blank_example(self, tokens: list[str]):
        return TaggedSentence(list(tokens), ["O"] * len(tokens), {})

    # ------------------------------------------------------------ model
    def emissions(self, x: torch.Tensor, mask: torch.Tensor, layers: torch.Tensor | None = None,
                  examples: list | None = None) -> torch.Tensor:
        """(B, T, D), (B, T) [, layers (L, B, T, D) for output_mix] [, the B examples, for chars/casing] -> (B, T, K)."""
        if self.inputs is not None:
            x = self.inputs(x, mask, examples)  # (B, T, D + chars + casing)
        scores = self.emit(self.encoder(x, mask))  # (B, T, K)
        if self.output_mix is not None:
            scores = scores + self.output_mix.out(self.output_mix.mixed(layers, mask))  # + (B, T, D') -> (B, T, K)
        return scores

    def loss(self, x: torch.Tensor, mask: torch.Tensor, examples: list,
             layers: torch.Tensor | None = None) -> torch.Tensor:
        B, T = mask.shape
        tags = torch.zeros(B, T, dtype=torch.long, device=x.device)  # (B, T)
        for b, ex in enumerate(examples):
            tags[b, : len(ex.tags)] = torch.tensor([self.index[t] for t in ex.tags], dtype=torch.long, device=x.device)
        return self.crf.neg_log_likelihood(self.emissions(x, mask, layers, examples), tags, mask) / B

    def predict(self, x: torch.Tensor, mask: torch.Tensor, examples: list,
                layers: torch.Tensor | None = None) -> list[list[str]]:
        paths = self.crf.viterbi(self.emissions(x, mask, layers, examples), mask,
                                 constrained=self.config.constrained_decoding)
        return [[self.labels[i] for i in p] for p in paths]

    def evaluate(self, examples: list, predictions: list) -> dict[str, float]:
        gold = [list(ex.tags) for ex in examples]
        scores = span_f1(gold, predictions, self.scheme)
        scores["token_accuracy"] = token_accuracy(gold, predictions)
        return scores

    def format_prediction(self, example, prediction: list[str]) -> str:
        return "\n".join(f"{tok}\t{tag}" for tok, tag in zip(example.tokens, prediction))

"""``wsd_linear``: a linear softmax over each target's candidate senses (word-sense disambiguation).

Every sense key seen in training has a weight vector and a bias. A target (a span of tokens; a
multiword target is the mean of its token features) is scored against the WordNet candidates of its
lemma+pos that have weights; with none, the prediction is the WordNet first sense. Examples are
``elmo_tasks.wsd.data.examples.WsdSentence`` (reader ``raganato``). Metrics follow the framework's scorer:
precision, recall and F1 over targets (one answer each; targets without an answer are unanswered).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from elmo_features.util.schema import Num, key

from elmo_tasks.data.types import DataFormatError
from elmo_tasks.wsd.data.examples import WsdSentence, WsdTarget
from elmo_tasks.wsd.data.scorer import score
from elmo_tasks.registry import HEADS
from elmo_tasks.heads.base import Head


@dataclass
class WsdLinearConfig:
    dropout: float = key(Num(min=0, lt=1), 0.0, doc="on the target vectors during training")


@HEADS.register("wsd_linear")
class WsdLinear(Head):
    """Per-sense linear scores on target vectors, softmax over the target's seen candidates."""

    Config = WsdLinearConfig
    primary_metric = "f1"
    example_type = "WsdSentence"
    block_output = True

    def __init__(self, config: WsdLinearConfig, input_dim: int, vocab: dict):
        super().__init__(config, input_dim, vocab)
        self.labels: list[str] = list(vocab["labels"])  # sense keys seen in training
        self.index = {k: i for i, k in enumerate(self.labels)}
        self.weight = nn.Parameter(torch.zeros(len(self.labels), input_dim))  # (K, D)
        self.bias = nn.Parameter(torch.zeros(len(self.labels)))  # (K,)
        self.drop = nn.Dropout(config.dropout)

    # ------------------------------------------------------------ data
    @classmethod
    def gold_labels(cls, example) -> list[str]:
        return [k for t in example.targets for k in t.gold]

    @classmethod
    def check_example(cls, example, where: str) -> None:
        for t in example.targets:
            if not 0 <= t.start < t.end <= len(example.tokens):
                raise DataFormatError(f"{where}: target {t.id} spans tokens {t.start}:{t.end} of a "
                                      f"{len(example.tokens)}-token sentence")

    @classmethod
    def token_positions(cls, example) -> list[int]:
        """Only the target tokens' features are read (a target's vector is the mean over its tokens)."""
        return sorted({j for t in example.targets for j in range(t.start, t.end)})

    @classmethod
    def build_vocab(cls, config, train_examples: list, data_options: dict) -> dict:
        labels = sorted({k for ex in train_examples for k in cls.gold_labels(ex)})
        if not labels:
            raise DataFormatError("wsd_linear: the training data has no gold sense keys (its targets need keys "
                                  "in the gold key file)")
        return {"labels": labels}

    @classmethod
    def demo_examples(cls) -> list:
        fin, river = "bank%1:14:00::", "bank%1:17:01::"
        rows = [("the bank lent money", fin), ("the river bank was muddy", river), ("money from the bank", fin),
                ("we sat on the bank of the river", river)]
        out = []
        for s, sense in rows:
            toks = s.split()
            i = toks.index("bank")
            out.append(WsdSentence(toks, [WsdTarget(f"d0.s{len(out)}.t0", i, i + 1, "bank", "NOUN",
                                                    [river, fin], [sense])], f"d0.s{len(out)}"))
        return out

    # ------------------------------------------------------------ model
    def _pairs(self, x: torch.Tensor, examples: list, with_gold: bool):
        """Flattened (target, candidate) pairs of a batch.

        Returns target vectors v (M, D), pair_t (P,) target row of each pair, pair_k (P,) sense row,
        pair_gold (P,) bool, and [(target, row or None)] for every target (None: no scored candidate).
        """
        B, T, D = x.shape
        tok, tok_t, lengths, pair_t, pair_k, pair_gold, targets = [], [], [], [], [], [], []
        for b, ex in enumerate(examples):
            for t in ex.targets:
                cands = [self.index[k] for k in t.candidates if k in self.index]
                gold: set[int] = set()
                if with_gold:
                    gold = {self.index[k] for k in t.gold if k in self.index}
                    cands += [g for g in sorted(gold) if g not in cands]
                    if len(cands) < 2 or not gold:
                        continue  # nothing to learn from this target
                elif not cands:
                    targets.append((t, None))
                    continue
                m = len(lengths)
                tok += [b * T + j for j in range(t.start, t.end)]
                tok_t += [m] * (t.end - t.start)
                lengths.append(t.end - t.start)
                pair_t += [m] * len(cands)
                pair_k += cands
                pair_gold += [c in gold for c in cands]
                targets.append((t, m))
        if not lengths:
            return None, None, None, None, targets
        dev = x.device
        v = x.new_zeros(len(lengths), D).index_add(0, torch.tensor(tok_t, device=dev),
                                                   x.reshape(B * T, D)[torch.tensor(tok, device=dev)])  # (M, D)
        v = v / torch.tensor(lengths, dtype=x.dtype, device=dev).unsqueeze(1)  # (M, D) mean over each target's tokens
        return (v, torch.tensor(pair_t, dtype=torch.long, device=dev), torch.tensor(pair_k, dtype=torch.long, device=dev),
                torch.tensor(pair_gold, dtype=torch.bool, device=dev), targets)

    def pair_scores(self, v: torch.Tensor, pair_t: torch.Tensor, pair_k: torch.Tensor) -> torch.Tensor:
        """Logits (P,) of each (target, sense) pair: v[t] . W[k] + b[k]."""
        return (v[pair_t] * self.weight[pair_k]).sum(-1) + self.bias[pair_k]

    @staticmethod
    def _segment_logsumexp(logits: torch.Tensor, seg: torch.Tensor, M: int) -> torch.Tensor:
        """(P,) logits grouped by seg (P,) -> (M,) log-sum-exp per group (-inf for an empty group)."""
        mx = logits.new_full((M,), float("-inf")).scatter_reduce(0, seg, logits.detach(), "amax")  # (M,)
        s = logits.new_zeros(M).index_add(0, seg, torch.exp(logits - mx[seg]))  # (M,)
        return torch.log(s) + mx

    def loss(self, x: torch.Tensor, mask: torch.Tensor, examples: list) -> torch.Tensor:
        """-log of the probability mass on the gold keys, averaged over targets with a choice to make."""
        v, pair_t, pair_k, pair_gold, _ = self._pairs(x, examples, with_gold=True)
        if v is None:
            return (self.weight.sum() + self.bias.sum()) * 0.0  # keeps the graph; no signal in this batch
        logits = self.pair_scores(self.drop(v), pair_t, pair_k)  # (P,)
        M = v.shape[0]
        all_lse = self._segment_logsumexp(logits, pair_t, M)  # (M,)
        gold_lse = self._segment_logsumexp(logits[pair_gold], pair_t[pair_gold], M)  # (M,)
        return (all_lse - gold_lse).mean()

    def loss_units(self, examples: list) -> int:
        """The targets ``loss`` averages over: those with a gold key and 2+ known candidates (as in ``_pairs``)."""
        n = 0
        for ex in examples:
            for t in ex.targets:
                cands = [self.index[k] for k in t.candidates if k in self.index]
                gold = {self.index[k] for k in t.gold if k in self.index}
                n += bool(gold) and len(cands) + len(gold - set(cands)) >= 2
        return n

    def predict(self, x: torch.Tensor, mask: torch.Tensor, examples: list) -> list[list[str | None]]:
        """Per example, one key per target (first sense when no candidate has weights; None if WordNet
        has no candidate). Ties go to the candidate with the lower sense number."""
        v, pair_t, pair_k, _, targets = self._pairs(x, examples, with_gold=False)
        best = None
        if v is not None:
            logits = self.pair_scores(v, pair_t, pair_k)  # (P,)
            M, P = v.shape[0], logits.shape[0]
            mx = logits.new_full((M,), float("-inf")).scatter_reduce(0, pair_t, logits, "amax")  # (M,)
            pos = torch.where(logits == mx[pair_t], torch.arange(P, device=logits.device), P)  # (P,) index at the max, else P
            first = torch.full((M,), P, dtype=torch.long, device=logits.device).scatter_reduce(0, pair_t, pos, "amin")  # (M,)
            best = pair_k[first]  # (M,) sense row of the first best candidate
        answers = {}
        for t, m in targets:
            answers[t.id] = t.first_sense if m is None else self.labels[int(best[m])]
        return [[answers[t.id] for t in ex.targets] for ex in examples]

    def evaluate(self, examples: list, predictions: list) -> dict[str, float]:
        gold = {t.id: t.gold for ex in examples for t in ex.targets if t.gold}
        system = {t.id: p for ex, preds in zip(examples, predictions) for t, p in zip(ex.targets, preds) if p}
        s = score(gold, system)
        return {"precision": s.precision, "recall": s.recall, "f1": s.f1}

    def format_prediction(self, example, prediction: list) -> str:
        return "\n".join(f"{t.id} {p}" for t, p in zip(example.targets, prediction) if p)

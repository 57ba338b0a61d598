"""The ``wsd_linear`` head: candidate softmax, multi-key gold, multiword targets, back-off, metrics."""
from __future__ import annotations

import torch

from elmo_tasks.wsd.data.examples import WsdSentence, WsdTarget
from elmo_tasks.wsd.head import WsdLinear, WsdLinearConfig
from elmo_tasks.registry import HEADS

FIN, RIVER = "bank%1:14:00::", "bank%1:17:01::"


def _features(examples, D=4):
    """(B, T, D) features: a token's vector says which sense context it is in (dims 0/1), plus noise."""
    g = torch.Generator().manual_seed(0)
    T = max(len(ex.tokens) for ex in examples)
    x = 0.1 * torch.randn(len(examples), T, D, generator=g)
    for b, ex in enumerate(examples):
        for t in ex.targets:
            x[b, t.start:t.end, 0 if t.gold == [FIN] else 1] += 1.0
    mask = torch.zeros(len(examples), T, dtype=torch.bool)
    for b, ex in enumerate(examples):
        mask[b, : len(ex.tokens)] = True
    return x, mask


def test_registered_and_learns_the_demo_senses():
    assert HEADS.get("wsd_linear") is WsdLinear
    examples = WsdLinear.demo_examples()
    vocab = WsdLinear.build_vocab(WsdLinearConfig(), examples, {})
    assert vocab == {"labels": [FIN, RIVER]}
    torch.manual_seed(0)
    head = WsdLinear(WsdLinearConfig(), 4, vocab)
    x, mask = _features(examples)
    head.eval()
    assert head.predict(x, mask, examples) == [[RIVER]] * 4  # zero init: ties -> first candidate (sense 1)
    opt = torch.optim.Adam(head.parameters(), lr=0.1)
    head.train()
    first = None
    for _ in range(30):
        loss = head.loss(x, mask, examples)
        first = first if first is not None else float(loss.detach())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss.detach()) < 0.5 * first
    head.eval()
    preds = head.predict(x, mask, examples)
    assert preds == [[t.gold[0] for t in ex.targets] for ex in examples]
    assert head.evaluate(examples, preds) == {"precision": 1.0, "recall": 1.0, "f1": 1.0}


def test_backoff_multiword_mean_and_unanswered():
    vocab = {"labels": [FIN, RIVER]}
    head = WsdLinear(WsdLinearConfig(), 2, vocab)
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    ex = WsdSentence(["a", "b", "c", "d"], [
        WsdTarget("t0", 0, 2, "bank", "NOUN", [RIVER, FIN], [FIN]),  # mean of tokens 0,1 = (0.6, 0.5) -> FIN
        WsdTarget("t1", 1, 2, "bank", "NOUN", [RIVER, FIN], [RIVER]),  # token 1 alone = (0.2, 1.0) -> RIVER
        WsdTarget("t2", 2, 3, "bank", "VERB", ["bank%2:00:00::"], []),  # no candidate with weights: first sense
        WsdTarget("t3", 3, 4, "zzz", "NOUN", [], [])])  # WordNet has nothing: None
    x = torch.tensor([[[1.0, 0.0], [0.2, 1.0], [5.0, 5.0], [1.0, 1.0]]])  # (1, 4, 2)
    mask = torch.ones(1, 4, dtype=torch.bool)
    preds = head.predict(x, mask, [ex])
    assert preds == [[FIN, RIVER, "bank%2:00:00::", None]]
    m = head.evaluate([ex], preds)  # gold only for t0, t1: both right
    assert m["f1"] == 1.0
    assert head.format_prediction(ex, preds[0]).splitlines() == [f"t0 {FIN}", f"t1 {RIVER}", "t2 bank%2:00:00::"]


def test_loss_uses_all_gold_keys_and_skips_targets_without_a_choice():
    head = WsdLinear(WsdLinearConfig(), 2, {"labels": [FIN, RIVER]})
    with torch.no_grad():
        head.bias.copy_(torch.tensor([0.0, 2.0]))
    x, mask = torch.zeros(1, 2, 2), torch.ones(1, 2, dtype=torch.bool)
    both = WsdSentence(["a", "b"], [WsdTarget("t0", 0, 1, "bank", "NOUN", [RIVER, FIN], [FIN, RIVER])])
    assert float(head.loss(x, mask, [both]).detach()) == 0.0  # all probability mass is gold
    one = WsdSentence(["a", "b"], [WsdTarget("t0", 0, 1, "bank", "NOUN", [RIVER, FIN], [FIN])])
    expected = -torch.log_softmax(torch.tensor([0.0, 2.0]), 0)[0]
    assert torch.isclose(head.loss(x, mask, [one]), expected)
    single = WsdSentence(["a"], [WsdTarget("t0", 0, 1, "bank", "NOUN", [FIN], [FIN])])
    loss = head.loss(x[:, :1], mask[:, :1], [single])
    assert float(loss.detach()) == 0.0 and loss.requires_grad  # nothing to learn, but backward() still works

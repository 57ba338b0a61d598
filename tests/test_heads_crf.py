"""The CRF: forward algorithm and Viterbi against brute-force enumeration; tag-scheme constraints."""
from __future__ import annotations

import itertools

import pytest
import torch

from elmo_tasks.data.tag_schemes import allowed_transitions, is_transition_allowed, scheme_tag
from elmo_tasks.heads.crf import ConditionalRandomField


def random_crf(K: int, seed: int, constraints=None) -> ConditionalRandomField:
    torch.manual_seed(seed)
    crf = ConditionalRandomField(K, constraints)
    with torch.no_grad():
        for p in crf.parameters():
            p.normal_(0, 1.0)
    return crf


@torch.no_grad()
def brute_force(crf, emissions, length, allowed=None):
    """All K^n paths of one sequence: (logsumexp of scores, best path) by explicit enumeration."""
    K = crf.num_tags
    scores, paths = [], []
    for path in itertools.product(range(K), repeat=length):
        if allowed is not None:
            pairs = [(K, path[0])] + list(zip(path, path[1:])) + [(path[-1], K + 1)]
            if not all(p in allowed for p in pairs):
                continue
        s = crf.start[path[0]] + crf.end[path[-1]]
        s = s + sum(emissions[t, path[t]] for t in range(length))
        s = s + sum(crf.transitions[path[t - 1], path[t]] for t in range(1, length))
        scores.append(float(s))
        paths.append(list(path))
    best = max(range(len(scores)), key=lambda i: scores[i])
    return torch.logsumexp(torch.tensor(scores, dtype=torch.float64), 0).item(), paths[best], scores[best]


def test_log_partition_and_path_score_match_enumeration():
    K, T = 3, 4
    crf = random_crf(K, 0)
    torch.manual_seed(1)
    emissions = torch.randn(3, T, K)
    lengths = [4, 2, 1]
    mask = torch.arange(T).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    logz = crf.log_partition(emissions, mask)
    tags = torch.randint(0, K, (3, T))
    scores = crf.path_score(emissions, tags, mask)
    for b, n in enumerate(lengths):
        expected, _, _ = brute_force(crf, emissions[b], n)
        assert abs(logz[b].item() - expected) < 1e-4
        path = tags[b, :n].tolist()
        manual = (crf.start[path[0]] + crf.end[path[-1]] + sum(emissions[b, t, path[t]] for t in range(n))
                  + sum(crf.transitions[path[t - 1], path[t]] for t in range(1, n)))
        assert abs(scores[b].item() - manual.item()) < 1e-5
    # probabilities of all paths sum to one
    nll = crf.neg_log_likelihood(emissions[:1, :2], torch.tensor([[0, 1]]), mask[:1, :2])
    assert 0 < float(torch.exp(-nll.detach())) < 1


def test_viterbi_matches_enumeration_unconstrained():
    K, T = 3, 5
    for seed in range(4):
        crf = random_crf(K, seed)
        torch.manual_seed(100 + seed)
        emissions = torch.randn(2, T, K)
        mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
        paths = crf.viterbi(emissions, mask, constrained=False)
        for b, n in enumerate([5, 3]):
            _, best, _ = brute_force(crf, emissions[b], n)
            assert paths[b] == best


def test_viterbi_matches_enumeration_constrained():
    labels = ["B-PER", "I-PER", "O"]
    allowed = set(allowed_transitions("BIO", labels))
    for seed in range(4):
        crf = random_crf(3, seed, sorted(allowed))
        torch.manual_seed(200 + seed)
        emissions = torch.randn(1, 4, 3) * 3
        mask = torch.ones(1, 4, dtype=torch.bool)
        path = crf.viterbi(emissions, mask)[0]
        _, best, _ = brute_force(crf, emissions[0], 4, allowed)
        assert path == best


def test_bio_constraints_forbid_i_after_o_and_at_start():
    labels = ["B-LOC", "B-PER", "I-LOC", "I-PER", "O"]
    crf = ConditionalRandomField(len(labels), allowed_transitions("BIO", labels))
    with torch.no_grad():  # make O -> I-PER and START -> I-PER very attractive
        crf.transitions[4, 3] = 50.0
        crf.start[3] = 50.0
    emissions = torch.zeros(1, 4, 5)
    emissions[0, :, 3] = 10.0  # I-PER everywhere
    emissions[0, 1, 4] = 12.0  # O at position 1
    mask = torch.ones(1, 4, dtype=torch.bool)
    unconstrained = [labels[i] for i in crf.viterbi(emissions, mask, constrained=False)[0]]
    assert unconstrained[0] == "I-PER"  # the scores alone would produce an invalid sequence
    path = [labels[i] for i in crf.viterbi(emissions, mask)[0]]
    assert path[0] != "I-PER" and path[0] != "I-LOC"
    for prev, cur in zip(path, path[1:]):
        if cur.startswith("I-"):
            assert prev in ("B-" + cur[2:], cur), path


@pytest.mark.parametrize("scheme,frm,to,ok", [
    ("BIO", "O", "I-PER", False), ("BIO", "B-PER", "I-PER", True), ("BIO", "B-PER", "I-LOC", False),
    ("BIO", "I-PER", "B-LOC", True), ("BIO", "START", "I-PER", False), ("BIO", "I-PER", "END", True),
    ("IOB1", "O", "I-PER", True), ("IOB1", "O", "B-PER", False), ("IOB1", "I-PER", "B-PER", True),
    ("IOB1", "I-PER", "B-LOC", False), ("IOB1", "START", "B-PER", False),
    ("BIOES", "B-PER", "E-PER", True), ("BIOES", "B-PER", "O", False), ("BIOES", "S-PER", "B-LOC", True),
    ("BIOES", "I-PER", "E-LOC", False), ("BIOES", "START", "E-PER", False), ("BIOES", "I-PER", "END", False),
    ("BIOES", "E-PER", "END", True), ("BIOES", "O", "I-PER", False),
])
def test_transition_table(scheme, frm, to, ok):
    f = ("START", None) if frm == "START" else scheme_tag(frm, scheme)
    t = ("END", None) if to == "END" else scheme_tag(to, scheme)
    assert is_transition_allowed(scheme, f[0], f[1], t[0], t[1]) is ok


def test_bad_tag_for_scheme_is_rejected():
    with pytest.raises(ValueError, match="not a valid BIO tag"):
        allowed_transitions("BIO", ["S-PER", "O"])


def test_training_reduces_nll():
    labels = ["B-PER", "I-PER", "O"]
    crf = ConditionalRandomField(3, allowed_transitions("BIO", labels))
    torch.manual_seed(0)
    emissions = torch.randn(4, 5, 3, requires_grad=True)
    tags = torch.tensor([[0, 1, 2, 2, 0]] * 4)
    mask = torch.ones(4, 5, dtype=torch.bool)
    opt = torch.optim.Adam(list(crf.parameters()) + [emissions], lr=0.1)
    first = None
    for _ in range(30):
        loss = crf.neg_log_likelihood(emissions, tags, mask)
        first = first if first is not None else float(loss.detach())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss.detach()) < 0.2 * first
    assert crf.viterbi(emissions.detach(), mask)[0] == [0, 1, 2, 2, 0]

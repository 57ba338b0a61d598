"""The quick `wsd senses --lemmas` path reads only what its lemmas need: the model's weights state is a checksum of
their bytes (not a float64 pass per fingerprint), and WordNet's usage examples are matched for their synsets only.
A tiny WordNet (test_wsd_senses) and small tensors."""
from __future__ import annotations

import torch

from test_wsd_senses import write_wordnet


def test_weights_state_is_a_checksum_that_sees_every_edit_without_the_float64_pass(monkeypatch):
    from elmo_features.embedding import feature_cache

    def no_float64_pass(t):
        raise AssertionError("the float64 weighted sum is read for a CPU tensor")

    monkeypatch.setattr(feature_cache, "_weighted_sum", no_float64_pass)
    w = torch.nn.Parameter(torch.randn(6, 4))
    b16 = torch.randn(3, 5).to(torch.bfloat16)
    state = feature_cache.tensors_state([w, b16, torch.zeros(0)])
    assert state == feature_cache.tensors_state([w, b16, torch.zeros(0)])  # the same weights: the same state
    w.data[[0, 1]] = w.data[[1, 0]]  # a row swap through .data: no version counter sees it
    moved = feature_cache.tensors_state([w, b16, torch.zeros(0)])
    assert moved != state and moved[0][0] == state[0][0]
    b16.view(torch.int16)[0, 0] += 1  # one bit of a bf16 value
    assert feature_cache.tensors_state([w, b16, torch.zeros(0)]) != moved


def test_examples_of_a_few_lemmas_are_those_of_all_wordnet_matched_for_their_synsets_only(tmp_path, monkeypatch):
    from elmo_tasks.wsd.data import wn_examples
    from elmo_tasks.wsd.data.wordnet import WordNet

    wn = WordNet(write_wordnet(tmp_path / "wn"))
    every = wn_examples.tagged_examples(wn)
    assert every  # (the tiny WordNet's glosses quote examples)
    seen = []
    find = wn_examples._find
    monkeypatch.setattr(wn_examples, "_find", lambda tokens, lemma, *a: seen.append(lemma) or find(tokens, lemma, *a))
    for key in sorted(wn.synset_of):
        seen.clear()
        few = wn_examples.tagged_examples(wn, only={key})
        assert [e for e in few if e.key == key] == [e for e in every if e.key == key]
        assert set(seen) <= set(wn.synsets[wn.synset_of[key]].lemmas)  # no other synset's examples were matched

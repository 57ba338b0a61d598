"""The quick `wsd senses --lemmas` path reads only what its lemmas need: the model's weights state is a checksum of
their bytes (not a float64 pass per fingerprint), and WordNet's usage examples are matched for their synsets only.
A tiny WordNet (test_wsd_senses) and small tensors."""
from __future__ import annotations

import h5py
import torch

from test_wsd_senses import write_wordnet
from test_wsd_senses_build import tiny  # noqa: F401 (the fixture)


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


def test_a_few_lemmas_read_only_their_semcor_sentences_unparsed_the_others(tmp_path, monkeypatch):
    """``load_dataset_where``: the sentences of the wanted keys' instances (and every n-th), as the whole parse gives
    them, the others never parsed; a malformed sentence among them is named by its line in the file."""
    import pytest

    from elmo_tasks.wsd.data import reader
    from test_wsd_senses_build import write_train

    folder = write_train(tmp_path / "train")
    whole = reader.load_dataset(folder)
    parsed = []
    part = reader._parse_part
    monkeypatch.setattr(reader, "_parse_part", lambda path, text, line0: parsed.append(text) or part(path, text, line0))
    few = reader.load_dataset_where(folder, lambda k: k.startswith("rock%"))
    rock = [s for s in whole.sentences if any(k.startswith("rock%") for i in s.instances for k in whole.gold[i.id])]
    assert few.sentences == rock and len(parsed) == len(rock) == 2
    assert few.gold == {i.id: whole.gold[i.id] for s in rock for i in s.instances}
    sampled = reader.load_dataset_where(folder, lambda k: k.startswith("rock%"), every=5)
    assert [s.id for s in sampled.sentences] == [s.id for n, s in enumerate(whole.sentences)
                                                 if n % 5 == 0 or s in rock]
    xml = folder / "train.data.xml"
    lines = xml.read_text().splitlines()
    bad = next(n for n, line in enumerate(lines) if 'lemma="rock"' in line)
    lines[bad] = lines[bad].replace("</instance>", "</wf>")
    xml.write_text("\n".join(lines) + "\n")
    with pytest.raises(reader.WsdFormatError, match=rf"train.data.xml:{bad + 1}: malformed XML"):
        reader.load_dataset_where(folder, lambda k: k.startswith("rock%"))


def test_a_lemmas_build_never_parses_all_of_semcor(tiny, monkeypatch):
    from elmo_tasks.cli import main
    from elmo_tasks.wsd.data import reader

    def whole_parse(path):
        raise AssertionError("all of SemCor parsed for a --lemmas build")

    monkeypatch.setattr(reader, "read_data_xml", whole_parse)
    assert main(["wsd", "senses", "--config", "c.yaml", "--source", "elmo", "--lemmas", "rock", "--out", "r.h5",
                 "--cache-dir", "none", "--progress", "off"]) == 0
    with h5py.File(tiny / "r.h5", "r") as f:
        assert f["counts"][()].tolist() == [2] and "pos_head" in f  # its SemCor instances, and a POS head


def test_the_w_per_part_of_speech_is_answers_choice_for_every_w_at_once():
    """The held-out choice of w per part of speech (every w of the grid in one array operation per instance) gives
    ``answer``'s answers and accuracies, ties and back-offs included, and the accuracy of all instances with them."""
    from types import SimpleNamespace

    import numpy as np

    from elmo_tasks.wsd.sense_method import _best_w_per_pos
    from elmo_tasks.wsd.senses import POS, W_GRID, Candidates, accuracy, answer

    rng = np.random.default_rng(0)
    graph = SimpleNamespace(keys=[f"k{i}" for i in range(30)])
    held, cands = [], Candidates([], [], [], [], [])
    for n in range(400):
        rows = rng.choice(30, size=int(rng.integers(0, 5)), replace=False)
        c = np.round(rng.normal(size=len(rows)), 1) * (n % 7 != 0)  # (some all-zero: the back-off; ties by rounding)
        g = np.round(rng.normal(size=len(rows)), 1)
        gold = {graph.keys[int(rng.integers(30))]} | ({graph.keys[rows[0]]} if len(rows) and n % 3 else set())
        held.append(SimpleNamespace(id=f"t{n}", pos=(*POS, "X")[n % 5], gold=gold, first_sense=graph.keys[n % 30]))
        for f, v in (("rows", rows), ("ctx", c), ("gloss", g), ("pos", held[-1].pos), ("ranks", np.arange(1.0, 1 + len(rows)))):
            getattr(cands, f).append(v)
    w_pos, acc_pos, total = _best_w_per_pos(held, cands, graph)
    for pos in POS:  # the old way: one answer() call per w
        idx = [i for i, t in enumerate(held) if t.pos == pos]
        sub = [held[i] for i in idx]
        sub_c = Candidates(*[[getattr(cands, f)[i] for i in idx] for f in ("rows", "ctx", "gloss", "pos", "ranks")])
        accs = [accuracy(sub, answer(sub, sub_c, graph, {pos: w})[0]) for w in W_GRID]
        assert (w_pos[pos], acc_pos[pos]) == (W_GRID[int(np.argmax(accs))], round(max(accs), 4))
    assert total == accuracy(held, answer(held, cands, graph, w_pos)[0])
    assert len(set(w_pos.values())) > 1  # (the case exercises more than one choice)


def test_pooled_layers_hold_the_per_word_arrays_of_a_few_sentences_at_a_time(monkeypatch):
    """A chunk of glosses is embedded ``POOL_AT`` sentences at a time and pooled at once: the same pooled arrays
    as one call for the whole chunk, never more per-word arrays than that in memory."""
    import numpy as np

    from elmo_tasks.wsd import senses

    rng = np.random.default_rng(0)
    sents = [[f"w{int(x)}" for x in rng.integers(0, 50, size=int(n))] for n in rng.integers(1, 9, size=23)]

    class Source:
        calls: list = []

        def word_layers(self, batch, split):
            self.calls.append(len(batch))
            return [np.stack([np.array([[float(w[1:]) + l, -float(w[1:])] for w in s]) for l in range(3)]).astype(
                np.float32) for s in batch]  # (L, n, 2)

    pool = lambda i, a: {"sentence": a.mean(axis=1)}  # noqa: E731
    whole = senses.pooled_layers(lambda: sents, pool, ("sentence",), len(sents), Source(), "f", None, False, "x")
    monkeypatch.setattr(senses, "POOL_AT", 4)
    Source.calls = []
    parts = senses.pooled_layers(lambda: sents, pool, ("sentence",), len(sents), Source(), "f", None, False, "x")
    assert max(Source.calls) == 4 and sum(Source.calls) == len(sents)
    np.testing.assert_array_equal(parts["sentence"], whole["sentence"])

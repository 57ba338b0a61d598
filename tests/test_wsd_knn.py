"""1-NN WSD (sense averages, cosine choice, back-off), multiword averaging and the two baselines."""
from __future__ import annotations

import numpy as np
import pytest

from elmo_tasks.wsd.data.examples import WsdSentence, WsdTarget
from elmo_tasks.wsd.data.reader import WsdFormatError
from elmo_tasks.features.base import FeatureContext, FeatureSource
from elmo_tasks.wsd.baselines import MostFrequentSense, first_sense_answers
from elmo_tasks.wsd.vectors import all_layers, instance_layers
from elmo_tasks.wsd.knn import SenseSums, mix_layers, nearest_sense

FIN, RIVER, TILT = "bank%1:14:00::", "bank%1:17:01::", "bank%2:38:00::"


def T(i, gold=(), cands=(RIVER, FIN), lemma="bank", pos="NOUN", start=0, end=1):
    return WsdTarget(f"t{i}", start, end, lemma, pos, list(cands), list(gold))


class Given:
    """A feature source whose per-word arrays are given."""

    def __init__(self, arrays):
        self.arrays = arrays

    def word_layers(self, sentences, split):
        return self.arrays


def test_multiword_target_is_the_mean_of_its_tokens():
    ex = [WsdSentence(["a", "river", "bank", "z"], [T(0, start=1, end=3), T(1, start=3, end=4)])]
    layers = [np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)]  # (L=2, n=4, D=3)
    v = instance_layers(Given(layers), ex, "test")
    assert v.shape == (2, 2, 3)
    np.testing.assert_allclose(v[0], layers[0][:, 1:3].mean(axis=1))
    np.testing.assert_allclose(v[1], layers[0][:, 3])
    with pytest.raises(ValueError, match="4 tokens but features for 3"):
        instance_layers(Given([np.zeros((2, 3, 3), np.float32)]), ex, "test")


def test_sense_sums_count_each_gold_key_and_mix_linearly():
    targets = [T(0, [FIN]), T(1, [FIN, RIVER]), T(2, [RIVER])]
    vecs = np.array([[[1, 0], [0, 2]], [[3, 0], [0, 4]], [[0, 5], [6, 0]]], dtype=np.float32)  # (N=3, L=2, D=2)
    sums = SenseSums.from_targets(targets, vecs, chunk=2)  # chunks smaller than N
    assert sums.keys == [FIN, RIVER] and sums.counts.tolist() == [2, 2]
    np.testing.assert_allclose(sums.centroids([1, 0]), [[2, 0], [1.5, 2.5]])
    w = [0.25, 0.75]
    expected = np.stack([mix_layers(vecs[[0, 1]], w).mean(0), mix_layers(vecs[[1, 2]], w).mean(0)])
    np.testing.assert_allclose(sums.centroids(w), expected, rtol=1e-6)


def test_nearest_sense_by_cosine_not_distance():
    keys = [FIN, RIVER]
    centroids = np.array([[10.0, 0.0], [0.0, 1.0]])  # FIN far but same direction
    targets = [T(0), T(1)]
    answers, backoff = nearest_sense(targets, np.array([[1.0, 0.1], [0.2, 1.0]]), keys, centroids)
    assert answers == {"t0": FIN, "t1": RIVER} and backoff == 0


def test_only_seen_candidates_of_the_lemma_compete_and_backoff():
    keys = [FIN, TILT]  # TILT (a verb sense) is nearest but not a candidate of bank NOUN
    centroids = np.array([[0.0, 1.0], [1.0, 0.0]])
    targets = [T(0, cands=(RIVER, FIN)),            # only FIN seen -> FIN
               T(1, cands=("bank%1:99:00::",)),     # nothing seen -> WordNet first sense
               T(2, cands=(), lemma="zzz"),         # WordNet lacks the lemma -> no answer
               T(3, cands=(RIVER, FIN))]            # zero vector -> back off
    vecs = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    answers, backoff = nearest_sense(targets, vecs, keys, centroids)
    assert answers == {"t0": FIN, "t1": "bank%1:99:00::", "t2": None, "t3": RIVER}
    assert backoff == 3


def test_ties_go_to_the_lower_sense_number():
    answers, _ = nearest_sense([T(0)], np.array([[1.0, 1.0]]), [FIN, RIVER], np.array([[1.0, 1.0], [2.0, 2.0]]))
    assert answers["t0"] == RIVER  # RIVER is sense 1 in the candidate order


class _OneLayer(FeatureSource):
    """A feature source with one vector per word (no per-layer arrays): the base class's word_layers."""

    Config = None

    def precompute(self, sentences, split):
        return [np.ones((len(s), 4), np.float32) for s in sentences]

    def collate(self, items, T):
        return items

    def forward(self, batch, mask):
        return batch


def test_all_layers_adds_a_layer_axis_to_single_vector_sources():
    out = all_layers(_OneLayer(None, FeatureContext()), [["a", "b"], ["c"]], "test")
    assert [a.shape for a in out] == [(1, 2, 4), (1, 1, 4)]


def test_all_layers_refuses_a_source_without_per_word_arrays_in_one_line():
    class Tuples(_OneLayer):
        def precompute(self, sentences, split):
            return [(np.ones((len(s), 4)),) for s in sentences]

    with pytest.raises(WsdFormatError, match="WSD 1-NN needs per-word vectors: feature source Tuples: precompute "
                                             "gives tuple items"):
        all_layers(Tuples(None, FeatureContext()), [["a", "b"]], "test")


def test_first_sense_and_most_frequent_sense_with_ties_and_backoff():
    train = [T(0, [FIN]), T(1, [FIN, RIVER]), T(2, [RIVER]),  # tie 2-2: RIVER has the lower sense number
             T(3, [TILT], cands=(TILT,), pos="VERB"), T(4, [TILT], cands=(TILT,), pos="VERB")]
    mfs = MostFrequentSense(train)
    test = [T(10), T(11, cands=(TILT,), pos="VERB"), T(12, cands=("x%1:00:00::",), lemma="x")]
    answers, backoff = mfs.answers(test)
    assert answers == {"t10": RIVER, "t11": TILT, "t12": "x%1:00:00::"} and backoff == 1
    assert first_sense_answers(test) == {"t10": RIVER, "t11": TILT, "t12": "x%1:00:00::"}
    train.append(T(5, [FIN]))
    assert MostFrequentSense(train).answers([T(10)])[0] == {"t10": FIN}


def test_instance_layers_in_chunks_equal_one_pass_and_hold_one_chunk():
    """Chunked extraction (a source's per-word arrays asked for a few sentences at a time) gives the same (N, L, D)
    vectors as one pass, in example order, and never asks for more than ``chunk`` sentences at once."""
    from elmo_tasks.wsd.data.examples import WsdSentence, WsdTarget
    from elmo_tasks.wsd.vectors import instance_layers

    rng = np.random.default_rng(0)
    table = {}

    class Source:
        asked: list[int] = []

        def word_layers(self, sentences, split):
            self.asked.append(len(sentences))
            return [np.stack([table.setdefault(w, rng.normal(size=3).astype(np.float32)) for w in s], 0)[None]
                    .repeat(2, 0) * np.arange(1, 3, dtype=np.float32)[:, None, None] for s in sentences]  # (2, n, 3)

    examples = [WsdSentence([f"w{i}", f"v{i}", "x"],
                            [WsdTarget(f"s{i}.t{j}", j, j + 1 + (j == 1), "w", "NOUN", [], []) for j in range(i % 3)],
                            f"s{i}") for i in range(7)]
    one = instance_layers(Source(), examples, "train")  # one pass
    Source.asked = []
    chunked = instance_layers(Source(), examples, "train", chunk=3)
    assert Source.asked == [3, 3, 1] and chunked.shape == one.shape == (6, 2, 3)
    np.testing.assert_array_equal(chunked, one)

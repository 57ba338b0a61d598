"""The scorer follows the framework's Scorer.java; key files are in its answer format."""
from __future__ import annotations

import pytest

from elmo_tasks.wsd.data.reader import read_gold_keys
from elmo_tasks.wsd.data.scorer import merge_scores, score, write_key_file


def test_counts_with_unanswered_and_multi_key_gold():
    gold = {"a": ["k1"], "b": ["k2", "k3"], "c": ["k4"], "d": ["k5"]}
    system = {"a": "k1", "b": "k3", "c": "wrong"}  # d unanswered; b matches its second gold key
    s = score(gold, system)
    assert (s.correct, s.answered, s.total) == (2, 3, 4)
    assert s.precision == pytest.approx(2 / 3) and s.recall == pytest.approx(0.5)
    assert s.f1 == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    assert s.as_dict()["F1"] == 57.1


def test_several_answers_share_one_credit_and_unknown_ids_are_ignored():
    gold = {"a": ["k1"], "b": ["k2"]}
    s = score(gold, {"a": ["k1", "x"], "b": ["k2", "k2"], "zzz": ["k9"]})  # repeated answers count once
    assert (s.correct, s.answered, s.total) == (1.5, 2, 2)
    assert s.precision == 0.75 and s.recall == 0.75


def test_nothing_answered_and_empty_gold():
    s = score({"a": ["k"]}, {})
    assert (s.precision, s.recall, s.f1) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="empty gold"):
        score({}, {"a": "k"})


def test_merge_is_the_union_of_test_sets():
    s1, s2 = score({"a": ["k"], "b": ["k"]}, {"a": "k"}), score({"a": ["k"]}, {"a": "k"})
    m = merge_scores([s1, s2])
    assert (m.correct, m.answered, m.total) == (2, 2, 3)


def test_key_file_format_order_and_round_trip(tmp_path):
    path = tmp_path / "sub" / "answers.key.txt"
    write_key_file(path, {"b": "k2", "a": "k1", "c": None, "d": ["k4", "k5"]}, ["a", "b", "c", "d", "e"])
    assert path.read_text() == "a k1\nb k2\nd k4 k5\n"  # id order kept; no line for unanswered c, e
    assert read_gold_keys(path, check_keys=False) == {"a": ["k1"], "b": ["k2"], "d": ["k4", "k5"]}
    assert [p.name for p in path.parent.iterdir()] == ["answers.key.txt"]  # no temp files left

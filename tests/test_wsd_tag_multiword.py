"""``wsd tag`` joins WordNet's multi-word nouns and verbs ("took off" -> take_off, "New York" -> new_york) into one
tagged unit spanning their words, tags the auxiliaries and adverbs the WSD test sets tag ("was" -> be), leaves real
function words untagged, and ``wsd raw-eval`` aligns a multi-word instance to its unit. A tiny WordNet and biLM."""
from __future__ import annotations

import numpy as np
import pytest

import elmo_tasks.data  # noqa: F401 (first: elmo_tasks.wsd.data.reader cannot be imported first)
from elmo_tasks.wsd.data.morphy import Morphy
from elmo_tasks.wsd.multiword import MultiwordIndex
from elmo_tasks.wsd.pos_head import token_vectors

# isort: split
from wsd_tag_fixture import build_sense_file, by_token, write_toy_wordnet
from wsd_tag_fixture import tagger  # noqa: F401 (a pytest fixture: SenseTagger of the senses fixture)
from wsd_toy import ToyInstance as I
from wsd_toy import write_dataset

# (pos, offset, lexfile, lemmas, gloss)
SYNSETS = [("v", "00000100", "38", ["take_off"], "depart from the ground"),
           ("v", "00000110", "40", ["take"], "get into one's hands"),
           ("n", "00000120", "15", ["New_York", "New_York_City"], "the largest city in New York State"),
           ("n", "00000130", "15", ["york"], "a city in northern England"),
           ("v", "00000140", "42", ["be"], "have the quality of being"),
           ("n", "00000150", "06", ["plane", "airplane"], "an aircraft that has a fixed wing"),
           ("n", "00000160", "15", ["city"], "a large and densely populated urban area"),
           ("r", "00000170", "02", ["of_course"], "as might be expected"),
           ("n", "00000180", "15", ["course"], "a route")]
KEYS = [("take_off%2:38:00::", "00000100", 1), ("take%2:40:00::", "00000110", 1),
        ("new_york%1:15:00::", "00000120", 1), ("new_york_city%1:15:00::", "00000120", 1),
        ("york%1:15:00::", "00000130", 1), ("be%2:42:00::", "00000140", 1), ("plane%1:06:00::", "00000150", 1),
        ("airplane%1:06:00::", "00000150", 1), ("city%1:15:00::", "00000160", 1), ("of_course%4:02:00::", "00000170", 1),
        ("course%1:15:00::", "00000180", 1)]
EXCEPTIONS = {"verb": ["took take", "taken take", "was be", "were be"], "noun": [], "adj": [], "adv": []}


def write_wordnet(folder):
    return write_toy_wordnet(folder, SYNSETS, KEYS, EXCEPTIONS)


def training_sentences():
    take_off = lambda s: I(s, "take_off", "VERB", ["take_off%2:38:00::"])  # noqa: E731
    ny = lambda: I("New York", "new_york", "NOUN", ["new_york%1:15:00::"])  # noqa: E731
    be = lambda s: I(s, "be", "VERB", ["be%2:42:00::"])  # noqa: E731
    return [["the", I("plane", "plane", "NOUN", ["plane%1:06:00::"]), take_off("took off"), "for", ny()],
            [ny(), be("is"), "a", I("city", "city", "NOUN", ["city%1:15:00::"])],
            ["we", I("took", "take", "VERB", ["take%2:40:00::"]), "the", I("plane", "plane", "NOUN",
                                                                          ["plane%1:06:00::"])],
            ["it", be("was"), "in", I("York", "york", "NOUN", ["york%1:15:00::"]), "of", "course"]] * 3


@pytest.fixture(scope="module")
def senses(tmp_path_factory):
    return build_sense_file(tmp_path_factory.mktemp("tagmulti"), write_wordnet, training_sentences())


# ---------------------------------------------------------------- the matcher's rule

def test_the_longest_run_spelling_a_multiword_lemma_is_one_unit(tmp_path):
    wn = write_wordnet(tmp_path / "wn")
    lemmas = {("take_off", "VERB"), ("take", "VERB"), ("new_york", "NOUN"), ("new_york_city", "NOUN"),
              ("power_line", "NOUN"), ("line", "NOUN")}
    index = MultiwordIndex(lemmas, Morphy(wn, lemmas))
    assert index.units("we took off".split()) == [(0, 1, []), (1, 3, [("take_off", "VERB")])]
    assert index.units("in New York City".split())[1] == (1, 4, [("new_york_city", "NOUN")])  # the longest
    assert index.units("power lines down".split())[0] == (0, 2, [("power_line", "NOUN")])  # the last word's morphy
    assert index.units("off took".split()) == [(0, 1, []), (1, 2, [])]
    assert index.units("we took off".split(), [False, True, False]) == [(0, 1, []), (1, 2, []), (2, 3, [])]


# ---------------------------------------------------------------- SenseTagger.tag

def test_took_off_is_one_unit_take_off_spanning_both_words(tagger):
    text = "Then we took off."
    (sent,) = tagger.tag(text)
    unit = by_token(sent)["took off"]
    assert (unit.start, unit.end) == (text.index("took"), text.index("off") + 3)
    assert text[unit.start:unit.end] == unit.token
    assert unit.key == "take_off%2:38:00::" and unit.lemma == "take_off" and unit.pos == "VERB"
    assert "took" not in by_token(sent) and "off" not in by_token(sent)
    assert [t.token for t in sent] == ["Then", "we", "took off", "."]


def test_new_york_is_one_noun_unit_whose_vector_is_the_mean_of_its_words(tagger):
    text = "the plane left New York"
    (sent,) = tagger.tag(text)
    unit = by_token(sent)["New York"]
    assert (unit.start, unit.end) == (15, 23) and unit.lemma == "new_york" and unit.key == "new_york%1:15:00::"
    layers = tagger.source.word_layers([text.split()], "t")[0]  # (L, n, D)
    v = token_vectors(layers[:, 3:5].mean(axis=1, keepdims=True), tagger.meta["layers"])[0]  # (D,)
    rows = [tagger.index[k] for k in ("new_york%1:15:00::",)]
    expect = tagger.context[rows] @ v + tagger.meta["w"].get("NOUN", 0.0) * (tagger.gloss[rows] @ v)
    assert unit.score == pytest.approx(float(expect[0]), abs=1e-5)


def test_an_auxiliary_is_tagged_and_real_function_words_are_not(tagger):
    (sent,) = tagger.tag("it was the city of York")
    words = by_token(sent)
    assert words["was"].key == "be%2:42:00::" and words["was"].lemma == "be"
    assert words["the"].key is None and words["the"].reason == "function word"
    assert words["of"].key is None and words["of"].reason == "function word"
    assert words["it"].reason == "function word" and words["York"].key == "york%1:15:00::"


def test_a_multiword_lemma_semcor_never_tags_is_left_to_its_words_and_a_mark_keeps_a_word_alone(tagger):
    (sent,) = tagger.tag("of course")  # (of_course has no SemCor instance in the fixture's sense file)
    assert [t.token for t in sent] == ["of", "course"]
    (sent,) = tagger.tag("we took/VERB off")
    assert [t.token for t in sent] == ["we", "took", "off"] and by_token(sent)["took"].key == "take%2:40:00::"


def test_the_jsonl_and_tsv_formats_carry_the_units_span(tagger):
    from elmo_tasks.wsd.tag_output import render

    tagged = tagger.tag("we took off")
    rec = next(r for r in __import__("json").loads(render(tagged, "jsonl")) if r["key"])
    assert (rec["token"], rec["start"], rec["end"], rec["lemma"]) == ("took off", 3, 11, "take_off")
    rows = [r.split("\t") for r in render(tagged, "tsv").splitlines()]
    assert rows[1][1:5] == ["3", "11", "took off", "take_off"]


# ---------------------------------------------------------------- wsd raw-eval

def test_raw_eval_aligns_a_multiword_instance_to_its_unit(senses, tagger):
    from elmo_tasks.wsd.data.reader import load_dataset
    from elmo_tasks.wsd.raw_eval import evaluate_set

    test = [["the", I("plane", "plane", "NOUN", ["plane%1:06:00::"]),
             I("took off", "take_off", "VERB", ["take_off%2:38:00::"]), "for", "New", "York", "."],
            ["it", I("was", "be", "VERB", ["be%2:42:00::"]), "a", I("city", "city", "NOUN", ["city%1:15:00::"])]]
    write_dataset(senses / "test", "test", test)
    r = evaluate_set(tagger, load_dataset(senses / "test"))
    assert (r["instances"], r["multiword"], r["aligned"]) == (4, 1, 4)
    raw = r["scores"]["raw"]
    assert (raw["correct"], raw["answered"], raw["total"]) == (4, 4, 4)
    assert np.isclose(raw["coverage"], 100.0)


def test_a_sometimes_content_word_read_as_closed_class_by_the_head_is_left_untagged(tagger):
    assert tagger._lookup("was", None, {"VERB": 0.8, "ADP": 0.2})[0] == ["be%2:42:00::"]
    assert tagger._lookup("was", None, {"VERB": 0.2, "ADP": 0.8})[:2] == ([], "function word")
    assert tagger._lookup("was", None, None)[0] == ["be%2:42:00::"]  # no head: tagged


def test_a_multiword_adverb_semcor_tags_is_one_unit(tagger, monkeypatch):
    """Multi-word lemmas of every part of speech are joined once SemCor tags them (the rule chosen on SemCor's
    held-out documents), adverbs such as "of course" too."""
    i = tagger.index["of_course%4:02:00::"]
    counts, has, context = tagger.counts.copy(), tagger.has.copy(), tagger.context.copy()
    counts[i], has[i], context[i] = 1, True, tagger.context[tagger.index["city%1:15:00::"]]  # (as if SemCor tagged it)
    for name, value in (("counts", counts), ("has", has), ("context", context)):
        monkeypatch.setattr(tagger, name, value)
    monkeypatch.setattr(tagger, "multiword", MultiwordIndex(tagger._multiword_lemmas(), tagger.morphy))
    (sent,) = tagger.tag("of course")
    assert [t.token for t in sent] == ["of course"] and sent[0].key == "of_course%4:02:00::"

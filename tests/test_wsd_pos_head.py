"""The part-of-speech head of a sense file: ``wsd senses`` trains it on SemCor's own part-of-speech annotation (held-out
documents measure it) and stores it without pickles; ``wsd tag`` uses it for an unmarked word with senses in several
parts of speech ("we bank on it": a verb), a mark still wins, and a file without a head falls back to the count.
A tiny WordNet (bank of the river, bank that takes deposits, the verb bank) and a tiny random biLM; in the tiny
SemCor, "bank" after "we"/"they" is a verb, after "the"/"a" a noun, and nouns are the more frequent."""
from __future__ import annotations

import hashlib
import json
import pickle
import shutil

import h5py
import numpy as np
import pytest
import torch
import yaml

import elmo_tasks.data  # noqa: F401 (first: elmo_tasks.wsd.data.reader cannot be imported first)
from elmo_features.util.errors import StaleCacheError
from elmo_tasks.cli import main

# isort: split
from test_tasks_helpers import make_bilm
from test_wsd_tag_text import write_wordnet
from wsd_toy import ToyInstance as I
from wsd_toy import write_dataset

VERB, RIVER, MONEY = "bank%2:40:00::", "bank%1:17:01::", "bank%1:14:00::"


def tiny_semcor():
    """Sentences with every token's universal part of speech: bank a verb after a pronoun, a noun after a
    determiner (nouns 3 to 2)."""
    verb = lambda: I("bank", "bank", "VERB", [VERB])  # noqa: E731
    river = lambda: I("bank", "bank", "NOUN", [RIVER])  # noqa: E731
    money = lambda: I("bank", "bank", "NOUN", [MONEY])  # noqa: E731
    fish = lambda: I("fished", "fish", "VERB", ["fish%2:38:00::"])  # noqa: E731
    return [[("we", "PRON"), verb(), ("on", "ADP"), ("it", "PRON")],
            [("the", "DET"), river(), ("of", "ADP"), ("the", "DET"), I("river", "river", "NOUN", ["river%1:17:00::"])],
            [("they", "PRON"), verb(), ("on", "ADP"), ("it", "PRON"), (".", ".")],
            [("the", "DET"), money(), ("takes", "VERB"), I("money", "money", "NOUN", ["money%1:21:00::"])],
            [("a", "DET"), river(), ("of", "ADP"), ("rock", "NOUN"), ("they", "PRON"), fish()],
            [("we", "PRON"), ("never", "ADV"), verb(), ("on", "ADP"), ("it", "PRON")],
            [("the", "DET"), money(), ("takes", "VERB"), ("money", "NOUN"), (".", ".")]] * 4


def build(root, name="senses.h5"):
    assert main(["wsd", "senses", "--config", str(root / "c.yaml"), "--source", "elmo", "--out", str(root / name),
                 "--cache-dir", "none", "--progress", "off"]) == 0
    return root / name


@pytest.fixture(scope="module")
def senses(tmp_path_factory):
    root = tmp_path_factory.mktemp("poshead")
    write_wordnet(root / "wn")
    opts, weights = make_bilm(root / "bilm")
    write_dataset(root / "train", "train", tiny_semcor(), doc_size=2)  # 14 documents: every 2nd is held out
    cfg = {"name": "tiny", "wordnet": str(root / "wn"), "train": str(root / "train"), "test": [str(root / "train")],
           "sources": {"elmo": {"name": "elmo", "options_file": str(opts), "weights_file": str(weights)}},
           "head": None, "head_dev_every": 2, "dev_split": "documents", "knn": ["senses_glosses"]}
    (root / "c.yaml").write_text(yaml.safe_dump(cfg))
    build(root)
    return root


@pytest.fixture(scope="module")
def tagger(senses):
    from elmo_tasks.wsd.tagging import SenseTagger

    return SenseTagger(str(senses / "senses.h5"))


def word(tagger, text, w="bank"):
    (sent,) = tagger.tag(text)
    return next(t for t in sent if t.token == w)


def test_the_reader_keeps_every_tokens_part_of_speech(tmp_path):
    from elmo_tasks.wsd.data.reader import read_data_xml

    write_dataset(tmp_path, "x", [[("The", "DET"), I("Grand Jury", "jury", "NOUN", ["jury%1:14:00::"]),
                                   I("said", "say", "VERB", ["say%2:32:00::"]), (".", ".")]])
    (s,) = read_data_xml(tmp_path / "x.data.xml")
    assert list(zip(s.tokens, s.pos)) == [("The", "DET"), ("Grand", "NOUN"), ("Jury", "NOUN"), ("said", "VERB"),
                                          (".", ".")]


def test_the_build_stores_the_head_with_its_held_out_document_accuracy(senses, capsys):
    with h5py.File(senses / "senses.h5", "r") as f:
        meta = json.loads(f.attrs["meta"])
        group = f["pos_head"]
        assert all(isinstance(group[n], h5py.Dataset) and group[n].dtype.kind == "f" for n in group)
        assert json.loads(group.attrs["config"])["labels"] == meta["pos_head"]["labels"]
    head = meta["pos_head"]
    assert head["labels"] == ["NOUN", "VERB", "ADV", "PRON", "DET", "ADP", "."]
    assert head["config"]["layers"] == [pytest.approx(1 / 3)] * 3  # the mean of the tiny biLM's three layers
    assert head["held_out"]["by"] == "documents" and head["held_out"]["documents"] == 7
    assert head["held_out"]["sentences"] == 14 and head["train"]["sentences"] == 14
    assert head["held_out"]["tokens"] > 0 and 0.0 <= head["accuracy"] <= 1.0
    assert head["accuracy"] >= 0.9  # the tags follow the words and their neighbours in this tiny corpus


def test_wsd_senses_prints_the_heads_accuracy(senses, capsys):
    capsys.readouterr()
    path = build(senses, "again.h5")
    out = capsys.readouterr().out
    acc = json.loads(h5py.File(path, "r").attrs["meta"])["pos_head"]["accuracy"]
    assert f"part-of-speech head: {100 * acc:.1f}% of " in out and "7 held-out SemCor documents" in out


def test_two_builds_give_the_same_head(senses):
    path = senses / "again.h5"
    if not path.exists():
        build(senses, "again.h5")
    with h5py.File(senses / "senses.h5", "r") as a, h5py.File(path, "r") as b:
        assert sorted(a["pos_head"]) == sorted(b["pos_head"])
        for n in a["pos_head"]:
            assert np.array_equal(a["pos_head"][n][()], b["pos_head"][n][()]), n
        assert a["pos_head"].attrs["sha256"] == b["pos_head"].attrs["sha256"]


def test_we_bank_on_it_gets_a_verb_sense_and_the_bank_a_noun_sense(tagger):
    verb = word(tagger, "we bank on it")
    assert (verb.key, verb.pos, verb.pos_from) == (VERB, "VERB", "head")
    noun = word(tagger, "the bank of the river")
    assert noun.key in (RIVER, MONEY) and (noun.pos, noun.pos_from) == ("NOUN", "head")
    assert word(tagger, "they fished", "fished").pos_from == "wordnet"  # senses in one part of speech: nothing to choose


def test_a_mark_still_wins_over_the_head(tagger):
    marked = word(tagger, "we bank/NOUN on it")
    assert (marked.pos, marked.pos_from) == ("NOUN", "mark") and marked.key in (RIVER, MONEY)


def test_jsonl_says_where_the_part_of_speech_came_from(senses, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("we bank on it\n")
    out = tmp_path / "out.jsonl"
    assert main(["wsd", "tag", str(tmp_path / "in.txt"), "--senses", str(senses / "senses.h5"), "--out", str(out)]) == 0
    records = json.loads(out.read_text())
    bank = next(r for r in records if r["token"] == "bank")
    assert (bank["key"], bank["pos_from"]) == (VERB, "head")
    assert next(r for r in records if r["token"] == "we")["pos_from"] is None  # untagged


def _drop_head(f: h5py.File) -> None:
    """The open sense file ``f`` as a build without a head writes it: no head group, none in its (signed) meta."""
    del f["pos_head"]
    meta = json.loads(f.attrs["meta"])
    meta["pos_head"] = None
    f.attrs["meta"] = json.dumps(meta)
    f.attrs["meta_sha256"] = hashlib.sha256(f.attrs["meta"].encode("utf-8")).hexdigest()


def test_a_file_without_a_head_falls_back_to_the_count(senses, tmp_path):
    from elmo_tasks.wsd.tagging import SenseTagger

    path = tmp_path / "nohead.h5"
    shutil.copy(senses / "senses.h5", path)
    with h5py.File(path, "a") as f:
        _drop_head(f)  # (a sense file made before the head, or from a source without it)
    tagger = SenseTagger(str(path))
    assert tagger.pos_head is None
    bank = word(tagger, "we bank on it")
    assert (bank.pos, bank.pos_from) == ("NOUN", "count")  # SemCor tags bank as a noun more often


def test_the_head_loads_without_pickle(senses, monkeypatch):
    from elmo_tasks.wsd.pos_head import read_pos_head

    def refuse(*a, **k):
        raise AssertionError("a pickle was read")

    for mod, name in ((pickle, "load"), (pickle, "loads"), (torch, "load")):
        monkeypatch.setattr(mod, name, refuse)
    head = read_pos_head(senses / "senses.h5", 16, 3)
    assert head is not None and head.labels[:2] == ["NOUN", "VERB"]
    probs = head.probabilities(np.eye(16)[:3])
    assert len(probs) == 3 and abs(sum(probs[0].values()) - 1) < 1e-5


def test_an_edited_or_misfit_head_is_refused(senses, tmp_path):
    from elmo_tasks.wsd.pos_head import read_pos_head

    path = tmp_path / "edited.h5"
    shutil.copy(senses / "senses.h5", path)
    with pytest.raises(StaleCacheError, match="dimension 16, its feature source gives 8"):
        read_pos_head(path, 8, 3)
    with pytest.raises(StaleCacheError, match="mixes layers .*, not 2 weights, one per layer"):
        read_pos_head(path, 16, 2)
    with h5py.File(path, "a") as f:
        name = next(iter(f["pos_head"]))
        f["pos_head"][name][...] = f["pos_head"][name][()] + 1
    with pytest.raises(StaleCacheError, match="part-of-speech head does not match the checksum"):
        read_pos_head(path, 16, 3)


def test_a_file_built_without_semcor_takes_wordnets_tag_counts(senses, tmp_path):
    """A sense file with no head and no SemCor counts (a --lemmas build from glosses alone): an unmarked word takes
    the part of speech WordNet's own tag counts (index.sense's tag_cnt) favour, not every part of speech at once."""
    from elmo_tasks.wsd.tagging import SenseTagger

    path = tmp_path / "glosses_only.h5"
    shutil.copy(senses / "senses.h5", path)
    with h5py.File(path, "a") as f:
        _drop_head(f)
    tagger = SenseTagger(str(path))
    tagger.counts = tagger.counts * 0  # (what a build from glosses alone records: no SemCor instance)
    counts = tagger.graph.wn.tag_count  # (the tiny WordNet's index.sense counts nothing: say the verb is counted most)
    counts.update({k: 1 for k in counts} | {VERB: 25})
    assert tagger.candidates("bank", None) == [VERB]
    bank = word(tagger, "the bank of the river")
    assert (bank.key, bank.pos, bank.pos_from) == (VERB, "VERB", "count")

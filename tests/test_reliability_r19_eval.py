"""Raw-text evaluation and options: test sets given twice or under one name, a rerun's stale answer files, the
missing-framework hint, the help on multi-word instances, cross-validation of a span-F1 task, a component's valid
keys, CRF padding tags, and an option given under two spellings."""
from __future__ import annotations

import json
import shutil

import pytest
import torch

import elmo_tasks.data  # noqa: F401 (first: elmo_tasks.wsd.data.reader cannot be imported first)
from elmo_features.util.errors import ConfigError
from elmo_tasks.cli import main
from elmo_tasks.experiment.summary import cv_markdown
from elmo_tasks.heads.crf import ConditionalRandomField

from test_wsd_tag_text import write_wordnet
from wsd_tag_fixture import bank_sentences, build_sense_file
from wsd_toy import ToyInstance as I
from wsd_toy import write_dataset


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = build_sense_file(tmp_path_factory.mktemp("r19"), write_wordnet, bank_sentences())
    sents = [["I", I("deposited", "deposit", "VERB", ["deposit%2:40:00::"]), "money", "at", "the",
              I("bank", "bank", "NOUN", ["bank%1:14:00::"]), "."]]
    write_dataset(root / "test", "test", sents)
    write_dataset(root / "other" / "test", "test", sents)  # another folder, a data set of the same name
    write_dataset(root / "dev", "dev", sents)
    return root


def raw_eval(built, *tests, out):
    return main(["wsd", "raw-eval", "--senses", str(built / "senses.h5"), "--test", *map(str, tests),
                 "--out", str(out), "--progress", "off"])


def test_two_test_sets_of_one_name_are_refused_naming_both_folders(built, capsys):
    out = built / "c12"
    assert raw_eval(built, built / "test", built / "other" / "test", out=out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(built / "test") in err and str(built / "other" / "test") in err
    assert not (out / "keys").exists()


def test_one_test_folder_twice_is_refused(built, capsys):
    link = built / "again"
    link.symlink_to(built / "test")
    for twice in ([built / "test", built / "test"], [built / "test", link], [built / "test", built / "dev" / ".." / "test"]):
        assert raw_eval(built, *twice, out=built / "c04") == 2
        err = capsys.readouterr().err
        assert "once" in err and "Traceback" not in err
    assert not (built / "c04" / "raw_eval.json").exists()


def test_a_rerun_removes_the_answer_files_of_the_earlier_run_only(built, capsys):
    out = built / "c03"
    assert raw_eval(built, built / "test", out=out) == 0
    (out / "keys" / "raw" / "mine.txt").write_text("a user's note")  # not an answer file this command wrote
    assert raw_eval(built, built / "dev", out=out) == 0, capsys.readouterr().err
    assert sorted(p.name for p in (out / "keys" / "raw").iterdir()) == ["dev.key.txt", "mine.txt"]
    assert not list((out / "keys").glob("*/test.key.txt"))
    assert json.loads((out / "raw_eval.json").read_text())["keys"] == [f"keys/{m}/dev.key.txt" for m in
                                                                        ("gold", "gold_first_sense", "raw",
                                                                         "raw_first_sense")]


def test_the_missing_framework_hint_of_raw_eval_names_its_own_option(built, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ELMO_TASKS_DATA", raising=False)
    assert main(["wsd", "raw-eval", "--senses", str(built / "senses.h5"), "--out", "re", "--progress", "off"]) == 2
    err = capsys.readouterr().err
    assert "--test DIR" in err and "--train" not in err


def test_raw_eval_help_says_multi_word_instances_can_be_aligned(capsys):
    with pytest.raises(SystemExit):
        main(["wsd", "raw-eval", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "never are" not in text and "joined its words into one WordNet unit" in text


def test_cross_validation_of_a_task_without_per_sentence_scores_says_so():
    text = "\n".join(cv_markdown({"folds": 3, "fold_seed": 0, "sentences": 200, "out_of_fold_accuracy": {},
                                  "paired": []}))
    assert "out-of-fold accuracy (per seed)" not in text and "predicted once per seed" not in text
    assert "not a per-sentence score" in text
    full = "\n".join(cv_markdown({"folds": 3, "fold_seed": 0, "sentences": 2, "out_of_fold_accuracy":
                                  {"glove": {"1": 0.5}}, "paired": []}))
    assert "| glove | 50.00 (seed 1) |" in full


def test_a_misspelt_component_key_lists_name_and_suggests_it():
    from elmo_tasks.components import component_registry, resolve_component

    with pytest.raises(ConfigError) as e:
        resolve_component(component_registry("head"), {"name": "crf_tagger", "nme": "x"}, "head")
    msg = str(e.value)
    assert "did you mean name?" in msg and "valid keys: name, " in msg


def test_crf_ignores_padding_tags_such_as_minus_100():
    torch.manual_seed(0)
    crf = ConditionalRandomField(3)
    em, mask = torch.randn(2, 3, 3), torch.tensor([[1, 1, 0], [1, 1, 1]])
    base = crf.neg_log_likelihood(em, torch.tensor([[0, 1, 0], [0, 2, 1]]), mask)
    for pad in (-100, -1, 2):
        assert torch.equal(crf.neg_log_likelihood(em, torch.tensor([[0, 1, pad], [0, 2, 1]]), mask), base)


@pytest.mark.parametrize("argv", [["data", "list", "--data-dir", "a", "--download-dir", "b"],
                                  ["data", "list", "--download-dir", "b", "--data-dir", "a"],
                                  ["models", "list", "--download-cache", "a", "--download-dir", "b"]])
def test_two_spellings_of_one_option_with_two_values_are_refused(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:  # (argparse's usage error)
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "two spellings" in err and "-dir b" in err and " a" in err and "Traceback" not in err


def test_two_spellings_with_one_value_are_accepted(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["data", "list", "--data-dir", "d", "--download-dir", "d"]) == 0
    assert "(data folder: d;" in capsys.readouterr().out

"""Hostile cases (round seven, WSD): a test set with no WordNet candidate at all (E04), a test folder that is a byte
copy of the training folder (E13), a sense file path that is missing, a folder or empty (F14)."""
from __future__ import annotations

import json
import shutil

import pytest

from elmo_features.util.errors import MissingPathError, PathError
from elmo_tasks.cli import main
from elmo_tasks.wsd.tagging import SenseTagger
from test_tasks_helpers import one_line_error
from test_wsd_cli import toy  # noqa: F401  (the module fixture: a toy WordNet, data sets, biLM and vectors)
from wsd_toy import ToyInstance as I
from wsd_toy import write_dataset


def _wsd(toy, out, *tests):
    return main(["wsd", "--config", str(toy / "cfg.yaml"), "--train", str(toy / "train"), "--test", *map(str, tests),
                 "--features", "none", "--out", str(out), "--no-plot", "--progress", "off"])


def test_wsd_refuses_a_test_set_without_any_wordnet_candidate(toy, tmp_path, capsys):  # noqa: F811
    write_dataset(tmp_path / "zz", "zztest", [["the", I("bank", "zzbank", "NOUN", ["bank%1:14:00::"])],
                                              [I("plants", "zzplant", "NOUN", ["plant%1:03:00::"])]])
    assert _wsd(toy, tmp_path / "w", toy / "test", tmp_path / "zz") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    assert err[-1].startswith(f"error: {tmp_path / 'zz' / 'zztest.data.xml'}: test set zztest: none of its 2 "
                              "instances has a WordNet candidate for its lemma+pos"), err
    assert err[-1].endswith("(first: d000.s000.t000 zzbank#NOUN): is it for another WordNet, or are lemmas/POS "
                            "missing?"), err
    assert not (tmp_path / "w" / "scores.json").exists()


def test_wsd_counts_test_instances_without_a_wordnet_candidate(toy, tmp_path, capsys):  # noqa: F811
    assert _wsd(toy, tmp_path / "w", toy / "test") == 0
    err = capsys.readouterr().err
    assert ("warning: test set toytest: 1 of its 6 instances have no WordNet candidate for their lemma+pos "
            "(first: d000.s005.t000 zebra#NOUN)") in err
    tests = json.loads((tmp_path / "w" / "scores.json").read_text())["tests"]
    assert tests[0]["instances_without_candidates"] == 1


def test_wsd_warns_when_a_test_folder_is_a_copy_of_the_training_folder(toy, tmp_path, capsys):  # noqa: F811
    copy = tmp_path / "copyT"
    copy.mkdir()
    for f in (toy / "train").iterdir():
        shutil.copy(f, copy / f.name.replace("toytrain", "toycopy"))
    assert _wsd(toy, tmp_path / "w", toy / "test", copy) == 0
    err = capsys.readouterr().err
    assert (f"warning: test set toycopy: {copy / 'toycopy.data.xml'} has the same content as the training set's "
            f"{toy / 'train' / 'toytrain.data.xml'}: its scores measure fit to the training data") in err


@pytest.mark.parametrize("arg, error, needle", [
    ("nosuch.h5", MissingPathError, "SenseTagger: path: nosuch.h5 not found"),
    (".", PathError, "SenseTagger: path: . is a folder; give the senses .h5 file"),
    ("", PathError, "SenseTagger: path: '' is empty (an unset variable?)"),
])
def test_sense_tagger_names_a_missing_path_a_folder_or_an_empty_one(tmp_path, monkeypatch, arg, error, needle):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error) as e:
        SenseTagger(arg)
    assert needle in str(e.value) and "make it again" not in str(e.value)


def test_sense_tagger_path_of_another_type_names_the_argument():
    with pytest.raises(TypeError, match="SenseTagger: path must be a str or a path, got int: 5"):
        SenseTagger(5)


@pytest.mark.parametrize("arg, needle", [("nosuch.h5", "--senses: nosuch.h5 not found"),
                                         (".", "--senses: . is a folder; give the senses .h5 file")])
def test_wsd_tag_names_a_missing_senses_file_or_a_folder(tmp_path, monkeypatch, capsys, arg, needle):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("the bank\n")
    assert main(["wsd", "tag", "in.txt", "--senses", arg]) == 2
    one_line_error(capsys, needle)

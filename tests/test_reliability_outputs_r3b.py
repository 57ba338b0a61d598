"""Hostile input, round three (b), outputs: an existing file of another kind (a run's model.pt) replaced by embed or
wsd senses, two writers of one output file, a WSD table replaced by a rerun with other settings, symlinked outputs,
empty path options, empty standard input, an unused --bilm, and what an interrupted predict / eval-bilm / data get
says. Each refusal is one error line (exit 2) before any work, and the file that would have been lost is intact."""
from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

import elmo_tasks.data  # noqa: F401 (first: test_wsd_cli imports elmo_tasks.wsd.data.reader, which cannot be imported first)
from elmo_features.util.locking import OutputLock, lock_path_for
from elmo_features.util.provenance import write_text_atomic
from elmo_tasks.cli import main

# isort: split
from test_reliability_outputs_r3 import _wsd, senses, trained_run  # noqa: F401 (fixtures)
from test_tasks_helpers import one_line_error
from test_tasks_helpers import make_bilm
from test_wsd_cli import toy  # noqa: F401 (a pytest fixture: the tiny WSD task)


def _fake_run_folder(folder: Path) -> Path:
    """A folder with the files `elmo-tasks run` writes (their content does not matter to the output checks)."""
    folder.mkdir(parents=True)
    for name, text in (("config.yaml", "name: x\n"), ("vocab.json", "{}"), ("metrics.json", "{}")):
        (folder / name).write_text(text)
    (folder / "model.pt").write_bytes(b"PK\x03\x04 a checkpoint\0\1\2")
    return folder / "model.pt"


def _embed(tmp_path, out, *extra):
    opts, weights = (tmp_path / "m" / "options.json", tmp_path / "m" / "weights.hdf5")
    if not weights.exists():
        make_bilm(tmp_path / "m")
    (tmp_path / "in.txt").write_text("the cat sat\n")
    return main(["embed", str(tmp_path / "in.txt"), str(out), "--options", str(opts), "--weights", str(weights),
                 *extra])


# ---------------------------------------------------------------- a file of another kind (cases 8, 9)

def test_embed_never_replaces_a_file_of_another_kind(tmp_path, capsys):
    model = _fake_run_folder(tmp_path / "r1")
    before = model.read_bytes()
    assert _embed(tmp_path, model) == 2
    one_line_error(capsys, "embed output", str(model), "file of the run folder")
    assert model.read_bytes() == before
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    assert _embed(tmp_path, notes) == 2
    one_line_error(capsys, str(notes), "is not an HDF5 file written by embed")
    assert notes.read_text() == "my notes\n"
    assert _embed(tmp_path, tmp_path / "e.hdf5") == 0 and _embed(tmp_path, tmp_path / "e.hdf5") == 0  # its own: fine


def test_wsd_senses_and_predict_never_replace_a_file_of_another_kind(senses, trained_run, tmp_path, capsys):
    model = _fake_run_folder(tmp_path / "r1")
    before = model.read_bytes()
    capsys.readouterr()
    assert main(["wsd", "senses", "--config", str(senses / "c.yaml"), "--source", "elmo", "--out", str(model),
                 "--cache-dir", "none", "--progress", "off"]) == 2
    one_line_error(capsys, "--out", str(model), "file of the run folder")
    other = tmp_path / "weights.h5"
    other.write_bytes(b"\x89HDF\r\n\x1a\n not a sense file")
    assert main(["wsd", "senses", "--config", str(senses / "c.yaml"), "--source", "elmo", "--out", str(other),
                 "--cache-dir", "none", "--progress", "off"]) == 2
    one_line_error(capsys, str(other), "is not a sense file")
    assert main(["predict", str(trained_run / "run1"), str(trained_run / "in.txt"), "--out", str(model),
                 "--cache-dir", "none"]) == 2
    one_line_error(capsys, "--out", str(model), "file of the run folder")
    assert main(["predict", str(trained_run / "run1"), str(trained_run / "in.txt"), "--out", str(other),
                 "--cache-dir", "none"]) == 2
    one_line_error(capsys, str(other), "is not a text file")
    assert model.read_bytes() == before and other.read_bytes().endswith(b"not a sense file")


# ---------------------------------------------------------------- two writers of one output (cases 15, 16)

@pytest.mark.parametrize("command", ["predict", "tag", "senses"])
def test_a_second_writer_of_an_output_file_is_refused(senses, trained_run, tmp_path, capsys, command):
    out = tmp_path / ("out.h5" if command == "senses" else "out.txt")
    argv = {"predict": ["predict", str(trained_run / "run1"), str(trained_run / "in.txt"), "--cache-dir", "none",
                        "--force"],
            "tag": ["wsd", "tag", str(senses / "in.txt"), "--senses", str(senses / "senses.h5"), "--force"],
            "senses": ["wsd", "senses", "--config", str(senses / "c.yaml"), "--source", "elmo", "--cache-dir", "none",
                       "--progress", "off"]}[command] + ["--out", str(out)]
    if command != "senses":
        out.write_text("an earlier output\n")
    capsys.readouterr()
    with OutputLock(lock_path_for(out), "test").acquire():  # the first writer, still at work
        assert main(argv) == 2
    one_line_error(capsys, f"--out {out}", "is being written by another process")
    assert (out.read_text() == "an earlier output\n") if command != "senses" else not out.exists()
    assert main(argv) == 0  # once the first writer is done


# ---------------------------------------------------------------- wsd rerun with other settings (case 17)

def test_wsd_never_replaces_a_table_of_other_settings(toy, tmp_path, capsys, monkeypatch):  # noqa: F811
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "o"

    def wsd(name, *extra):
        return main(_wsd(toy, out, "--set", "head=null", "--runs-dir", str(tmp_path / name), *extra))

    assert wsd("h1", "--features", "glove", "--test", str(toy / "test")) == 0
    table = (out / "scores.json").read_bytes()
    capsys.readouterr()
    assert wsd("h2", "--features", "none", "--test", str(toy / "test")) == 2
    err = capsys.readouterr().err.strip().splitlines()  # (after the note "only the baselines are scored")
    assert err[-1].startswith(f"error: --out {out}") and "drop or change (glove)" in err[-1], err
    assert wsd("h3", "--features", "glove", "--test", str(toy / "test"), str(toy / "nogold")) == 2
    one_line_error(capsys, f"--out {out}", "other settings (tests differ)")
    assert wsd("h4", "--features", "glove", "--test", str(toy / "test"), "--set", "probes=false") == 2
    one_line_error(capsys, "other settings (settings differ)")
    assert (out / "scores.json").read_bytes() == table
    assert wsd("h5", "--features", "glove", "--test", str(toy / "test")) == 0  # the same settings may rerun


# ---------------------------------------------------------------- symlinked outputs (cases 114, 115)

def test_the_atomic_writer_writes_a_symlinks_target_and_keeps_the_link(tmp_path):
    (tmp_path / "data").mkdir()
    target, link = tmp_path / "data" / "p.txt", tmp_path / "link.txt"
    target.write_text("old\n")
    link.symlink_to(target)
    write_text_atomic(link, "new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    dangling = tmp_path / "dangling.txt"
    dangling.symlink_to(tmp_path / "data" / "made.txt")
    write_text_atomic(dangling, "made\n")
    assert dangling.is_symlink() and (tmp_path / "data" / "made.txt").read_text() == "made\n"
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["made.txt", "p.txt"]  # no temporary file left


def test_embed_into_a_symlink_writes_its_target(tmp_path):
    (tmp_path / "data").mkdir()
    target, link = tmp_path / "data" / "e.hdf5", tmp_path / "link.hdf5"
    link.symlink_to(target)  # dangling first: the target is made
    assert _embed(tmp_path, link) == 0
    assert link.is_symlink() and target.is_file()
    first = os.stat(target).st_ino
    assert _embed(tmp_path, link, "--top") == 0  # then replaced, still through the link
    assert link.is_symlink() and os.stat(target).st_ino != first
    assert not list(tmp_path.glob("link.hdf5.*")) and not list((tmp_path / "data").glob("*.partial"))


# ---------------------------------------------------------------- empty options, empty stdin, unused --bilm

@pytest.mark.parametrize("argv,needle", [
    (["run", "c.yaml", "--out", ""], "--out: empty path"),
    (["predict", "run1", "in.txt", "--out", ""], "--out: empty path"),
    (["wsd", "--out", ""], "--out: empty path"),
    (["wsd", "tag", "in.txt", "--senses", "s.h5", "--out", ""], "--out: empty path"),
    (["embed", "in.txt", "o.hdf5", "--transformer", ""], "--transformer: empty"),
    (["embed", "in.txt", "o.hdf5", "--model", ""], "--model: empty"),
])
def test_an_empty_option_is_refused_not_taken_as_not_given(tmp_path, capsys, monkeypatch, argv, needle):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("the cat\n")
    assert main(argv) == 2
    one_line_error(capsys, needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_wsd_tag_refuses_empty_standard_input(senses, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"\n  \n")))  # as a real stdin: with .buffer
    capsys.readouterr()
    assert main(["wsd", "tag", "-", "--senses", str(senses / "senses.h5")]) == 2
    one_line_error(capsys, "stdin")


def test_wsd_refuses_a_bilm_no_selected_source_uses(toy, tmp_path, capsys, monkeypatch):  # noqa: F811
    monkeypatch.chdir(tmp_path)
    assert main(_wsd(toy, tmp_path / "o", "--features", "glove", "--bilm", "/nonexistent")) == 2
    one_line_error(capsys, "--bilm applies to elmo sources", "(glove)")
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- interrupts (cases 99, 100, 102)

def _stop(*_a, **_k):
    raise KeyboardInterrupt


@pytest.mark.parametrize("command", ["predict", "eval-bilm", "data get"])
def test_an_interrupt_says_what_was_kept_and_how_to_rerun(trained_run, tmp_path, capsys, monkeypatch, command):
    if command == "predict":
        monkeypatch.setattr("elmo_tasks.experiment.run.predict_examples", _stop)
        argv = ["predict", str(trained_run / "run1"), str(trained_run / "in.txt"), "--out", str(tmp_path / "p.txt"),
                "--cache-dir", "none"]
        needles = [f"{tmp_path / 'p.txt'} was not written", "to run again: elmo-tasks predict"]
    elif command == "eval-bilm":
        monkeypatch.setattr("elmo_features.training.cli.load_language_model", _stop)
        for name in ("t.txt", "o.json", "w.hdf5", "v.txt"):
            (tmp_path / name).write_text("x\n")
        argv = ["eval-bilm", str(tmp_path / "t.txt"), "--options", str(tmp_path / "o.json"), "--weights",
                str(tmp_path / "w.hdf5"), "--vocab", str(tmp_path / "v.txt")]
        needles = ["nothing was written", "to run again: elmo-tasks eval-bilm"]
    else:
        monkeypatch.setattr("elmo_tasks.data.cli.fetch", _stop)
        argv = ["data", "get", "conll2003", "--data-dir", str(tmp_path / "d")]
        needles = ["no data set finished", "to fetch the rest: elmo-tasks data get conll2003 --data-dir"]
    capsys.readouterr()
    assert main(argv) == 130
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("interrupted; ") and all(n in err for n in needles), err
    assert json.dumps(err)  # one line

"""Hostile input, round five (tasks): predict --reader on a set its metrics are undefined on, a reader and head of
different kinds, a plugin source that raises while checking, run_experiment into a file, predict from standard input,
a damaged SOURCE.md, an empty static path, the rerun command of an interrupted wsd tag, an lr reduction early stopping
always pre-empts, and a run's config.yaml edited after training."""
from __future__ import annotations

import io
import sys

import pytest
import yaml

from test_tasks_helpers import one_line_error, static_config_file
from elmo_features.util.errors import PathError
from elmo_tasks.cli import main

FAST = ["--cache-dir", "none", "--progress", "off"]


def _config(tmp_path, kind: str = "ner", **training) -> tuple[dict, str]:
    return static_config_file(tmp_path, kind, training=training)


@pytest.fixture
def ner_run(tmp_path, capsys):
    env, cfg = _config(tmp_path)
    assert main(["run", cfg, "--out", str(tmp_path / "R"), *FAST]) == 0
    capsys.readouterr()
    return tmp_path / "R"


# ---------------------------------------------------------------- E02, J06, B01: predict

def test_e02_predict_reader_refuses_an_ner_file_without_entities(ner_run, tmp_path, capsys):
    all_o = tmp_path / "allO.txt"
    all_o.write_text("the DT B-NP O\ncat NN I-NP O\n\nit PRP B-NP O\nran VBD B-VP O\n")
    assert main(["predict", str(ner_run), str(all_o), "--reader", *FAST]) == 2
    one_line_error(capsys, f"{all_o} (predict --reader) has no gold entities", "span F1 is undefined")


def test_j06_predict_reads_standard_input(ner_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"John lives in Paris\nthe cat\n")))
    assert main(["predict", str(ner_run), "-", *FAST]) == 0
    out = capsys.readouterr().out
    assert out.split("\n\n")[0].split()[::2] == ["John", "lives", "in", "Paris"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"John\n\nthe cat\n")))
    assert main(["predict", str(ner_run), "-", *FAST]) == 2
    one_line_error(capsys, "stdin:2", "blank line")
    assert main(["predict", str(ner_run), "-", "--reader", *FAST]) == 2
    one_line_error(capsys, "'-' (standard input) is read as plain text only")


def test_b01_predict_refuses_a_run_config_edited_after_training(ner_run, tmp_path, capsys):
    text = (ner_run / "config.yaml").read_text()
    (tmp_path / "in.txt").write_text("John lives in Paris\n")
    (ner_run / "config.yaml").write_text(text.replace("scheme: BIOES", "scheme: BIO", 1))
    assert main(["predict", str(ner_run), str(tmp_path / "in.txt"), *FAST]) == 2
    one_line_error(capsys, f"{ner_run / 'config.yaml'} and {ner_run / 'model.pt'} disagree on data.reader / "
                   "data.reader_options", "config.yaml edited after training")
    # a moved frozen input (its path only) and the training loop are not what the model means: still loads
    cfg = yaml.safe_load(text)
    cfg["training"]["eval_batch_size"] = 7
    (ner_run / "config.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["predict", str(ner_run), str(tmp_path / "in.txt"), *FAST]) == 0


# ---------------------------------------------------------------- E05, I04, D01: config checks

@pytest.mark.parametrize("kind,head,needles", [
    ("sentiment", "crf_tagger", ["data.reader tsv gives LabeledSentence", "head.name crf_tagger takes TaggedSentence"]),
    ("ner", "sentence_classifier", ["data.reader conll2003 gives TaggedSentence", "head.name sentence_classifier"]),
])
def test_e05_a_reader_and_head_of_different_kinds_are_refused_before_the_run(tmp_path, capsys, kind, head, needles):
    _, cfg = _config(tmp_path, kind)
    assert main(["run", cfg, "--out", str(tmp_path / "R"), "--set", f"head={{name: {head}}}", *FAST]) == 2
    one_line_error(capsys, *needles)
    assert not (tmp_path / "R").exists()


@pytest.mark.parametrize("path", ['""', '" "'])
def test_i04_an_empty_static_path_is_the_empty_spec_error(tmp_path, capsys, path):
    _, cfg = _config(tmp_path)
    assert main(["run", cfg, "--out", str(tmp_path / "R"), "--set", f"features={{name: static, path: {path}}}",
                 *FAST]) == 2
    one_line_error(capsys, "features.path spec", "is empty (an unset variable?)")


def test_d01_an_lr_reduction_early_stopping_always_preempts_is_one_warning(tmp_path, capsys):
    from elmo_tasks.experiment.config import load_config
    from elmo_tasks.experiment.preflight import check_run_inputs

    _, cfg = _config(tmp_path, patience=2, lr_reduce_factor=0.5, lr_reduce_patience=3)
    check_run_inputs(load_config(cfg), cfg)
    err = capsys.readouterr().err.strip()
    assert err.startswith("warning: ") and "\n" not in err and "lr_reduce_patience 3 > patience 2" in err
    _, cfg = _config(tmp_path, patience=2, lr_reduce_factor=0.5, lr_reduce_patience=2)
    check_run_inputs(load_config(cfg), cfg)
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- I09: a plugin that raises while checking

def test_i09_a_plugin_source_whose_check_inputs_raises_is_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "badsrc_r5.py").write_text(
        "from elmo_tasks.registry import FEATURES\nfrom elmo_tasks.features.static import StaticFeatures\n"
        "@FEATURES.register('badstatic_r5')\nclass BadStatic(StaticFeatures):\n"
        "    @classmethod\n    def check_inputs(cls, *a, **k):\n        raise RuntimeError('plugin bug: cannot check')\n")
    import elmo_tasks.plugins as plugins
    from elmo_tasks.registry import FEATURES

    env, cfg = _config(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_INCLUDED", list(plugins._INCLUDED))  # (no later test's workers load it)
    try:
        assert main(["run", cfg, "--out", str(tmp_path / "R"), "--include", "badsrc_r5", "--set",
                     f"features={{name: badstatic_r5, path: {env['glove']}}}", *FAST]) == 2
    finally:  # the registry is the process's: later tests list its names
        FEATURES._entries.pop("badstatic_r5", None)
        sys.modules.pop("badsrc_r5", None)
    one_line_error(capsys, "plugin module badsrc_r5: feature source badstatic_r5 failed while checking its inputs",
                   "RuntimeError: plugin bug: cannot check")


# ---------------------------------------------------------------- F08: the Python API

def test_f08_run_experiment_into_a_file_names_out_dir(tmp_path):
    from elmo_tasks.experiment.config import load_config
    from elmo_tasks.experiment.run import run_experiment

    _, cfg = _config(tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    with pytest.raises(PathError, match="out_dir .*notes.txt is a file, not a folder"):
        run_experiment(load_config(cfg), notes)
    with pytest.raises(TypeError, match="out_dir: expected the run folder's path"):
        run_experiment(load_config(cfg), None)
    assert notes.read_text() == "my notes\n"


# ---------------------------------------------------------------- K09: data list / get with a damaged SOURCE.md

def test_k09_a_source_md_that_is_not_utf8_is_damaged(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "D" / "conll2003"
    folder.mkdir(parents=True)
    (folder / "train.txt").write_text("x\n")
    (folder / "SOURCE.md").write_bytes(b"\xff\xfe garbage \x00")
    monkeypatch.setenv("ELMO_TASKS_DATA", str(tmp_path / "D"))
    assert main(["data", "list"]) == 0
    assert "damaged: its files cannot be told from yours: move the folder away and fetch again (SOURCE.md is not " \
        "UTF-8 text" in capsys.readouterr().out  # (--force cannot tell what the fetch wrote: it is refused too)
    assert main(["data", "get", "conll2003", "--data-dir", str(tmp_path / "D")]) == 2
    one_line_error(capsys, "conll2003 in", "is damaged (SOURCE.md is not UTF-8 text", "move the folder away")
    assert main(["data", "get", "conll2003", "--force", "--data-dir", str(tmp_path / "D")]) == 2
    one_line_error(capsys, "conll2003: SOURCE.md is not UTF-8 text: byte 0 is invalid, so `data get conll2003` "
                           "cannot tell what it fetched from your own files; move the folder away")
    assert (folder / "train.txt").read_text() == "x\n"


# ---------------------------------------------------------------- H02: the rerun command of wsd tag

def test_h02_an_interrupted_wsd_tag_prints_the_command(tmp_path, capsys, monkeypatch):
    import elmo_tasks.wsd.sense_file as sense_file
    import elmo_tasks.wsd.tagging as tagging

    senses = tmp_path / "s.h5"
    senses.write_bytes(b"")
    (tmp_path / "in.txt").write_text("the bank\n")
    monkeypatch.setattr(sense_file, "read_sense_meta", lambda path: {})

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(tagging, "SenseTagger", interrupted)
    out = tmp_path / "o.jsonl"
    assert main(["wsd", "tag", str(tmp_path / "in.txt"), "--senses", str(senses), "--out", str(out)]) == 130
    err = capsys.readouterr().err
    rerun = err.split("to run again: ", 1)[1].split()
    assert rerun[:4] == ["elmo-tasks", "wsd", "tag", str(tmp_path / "in.txt")], err
    assert " ".join(rerun[4:]) in (f"--out {out} --senses {senses}", f"--senses {senses} --out {out}"), err


def test_g15_wsd_tag_reads_standard_input_under_the_text_rules(monkeypatch, tmp_path):
    import io

    from elmo_features.embedding.embed_input import read_sentence_lines
    from elmo_features.util.errors import TextInputError
    from elmo_features.util.text_input import read_sentences

    def stdin(data: bytes):
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))

    data = "I sat on the bank\u2028of the river\nthe bank raised rates\n".encode("utf-8")
    (tmp_path / "in.txt").write_bytes(data)
    stdin(data)  # a line separator inside a line: read as the same file would be, not split into two sentences
    assert read_sentence_lines("-") == read_sentences(tmp_path / "in.txt", blank_lines="error")
    assert len(read_sentence_lines(str(tmp_path / "in.txt"))) == 2
    stdin(b"the bank\n\nthe river\n")
    with pytest.raises(TextInputError, match="stdin:2: "):  # a blank line would shift outputs against inputs
        read_sentence_lines("-")

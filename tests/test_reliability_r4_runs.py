"""Hostile input, round four (runs, compare, predict, configs): dev/test sets that share no label with training, one
source under two names, Python API arguments the CLI would refuse, a plugin that exits at import, YAML alias bombs
and non-mapping configs, rerunning into an interrupted run's folder, two runs in one second, streams as outputs,
a dangling --runs-dir and a newline in a path."""
from __future__ import annotations

import os
import threading
import time
from datetime import datetime

import pytest
import yaml

from test_tasks_helpers import classification_config, make_env, one_line_error, static_config_file
from test_reliability_api_r3 import compare_cfg  # noqa: F401  (the fixture: a one-source comparison)
from elmo_features.util.config_files import read_config_file
from elmo_features.util.errors import ConfigError, MissingPathError, PathError, UsageError
from elmo_tasks.cli import main
from elmo_tasks.experiment.config import resolve

FAST = ["--cache-dir", "none", "--progress", "off"]


def _config(tmp_path, kind: str = "sentiment", **top) -> tuple[dict, str]:
    return static_config_file(tmp_path, kind, **top)


# ---------------------------------------------------------------- E01, E02: scored sets that share no label

def test_e01_a_test_set_whose_labels_never_occur_in_training_is_refused(tmp_path, capsys):
    _, cfg = _config(tmp_path)
    test = tmp_path / "test.tsv"
    test.write_text("neu\tit is a film\nneu\ta film\nmixed\tgreat but boring\n")
    out = tmp_path / "r"
    assert main(["run", cfg, "--out", str(out), "--set", f"data.test={test}", *FAST]) == 2
    one_line_error(capsys, f"{test} (data.test): none of its labels (mixed, neu) occurs in the training data",
                   "wrong by construction")
    assert not (out / "metrics.json").exists()


def test_e02_an_ner_test_set_whose_entity_types_never_occur_in_training_is_refused(tmp_path, capsys):
    env, cfg = _config(tmp_path, "ner")
    test = tmp_path / "test_new.txt"
    test.write_text(env["conll_test"].read_text().replace("-PER", "-EVENT").replace("-LOC", "-EVENT")
                    .replace("-ORG", "-EVENT"))
    assert main(["run", cfg, "--out", str(tmp_path / "r"), "--set", f"data.test={test}", *FAST]) == 2
    one_line_error(capsys, "(data.test): none of its entity types (EVENT) occurs in the training data (LOC, PER)")


# ---------------------------------------------------------------- E04: one source under two names

def test_e04_compare_refuses_one_source_under_two_names(tmp_path, capsys):
    env, cfg = _config(tmp_path)
    section = f"{{name: static, path: {env['glove']}}}"
    results = tmp_path / "R"
    assert main(["compare", cfg, "--results-dir", str(results), "--runs-dir", str(tmp_path / "RD"),
                 "--set", f"compare.sources={{a: {section}, b: {section}}}", *FAST]) == 2
    one_line_error(capsys, "compare.sources: a and b are the same feature source")
    assert not results.exists() and not (tmp_path / "RD").exists()
    # one of them selected: fine (checked only)
    from elmo_tasks.experiment.compare_checks import check_comparison_args

    raw = classification_config(env)
    raw["compare"] = {"sources": {"a": {"name": "static", "path": str(env["glove"])},
                                  "b": {"name": "static", "path": str(env["glove"])}}}
    check_comparison_args(resolve(raw), ["a"], None, None)


# ---------------------------------------------------------------- F06, F07, F08: the Python API

def test_f06_run_experiment_refuses_a_dict_config_and_a_string_of_examples(tmp_path):
    from elmo_tasks.experiment.run import run_experiment

    env = make_env(tmp_path)
    raw = classification_config(env, features={"name": "static", "path": str(env["glove"])})
    with pytest.raises(TypeError, match="cfg: expected a RunConfig .*got dict"):
        run_experiment(raw, tmp_path / "o1", progress=False)
    cfg = resolve(raw)
    with pytest.raises(TypeError, match=r"examples\['train'\]: expected a list, got str"):
        run_experiment(cfg, tmp_path / "o2", progress=False, examples={"train": "great film"})
    with pytest.raises(TypeError, match="examples: unknown split 'tran'"):
        run_experiment(cfg, tmp_path / "o3", progress=False, examples={"tran": []})
    with pytest.raises(TypeError, match=r"examples\[.train.\]\[0\]: expected an example of the data reader"):
        run_experiment(cfg, tmp_path / "o4", progress=False, examples={"train": ["great film"]})
    assert not any((tmp_path / f"o{i}").exists() for i in range(1, 5))  # refused before the run folder is made


def test_f07_predict_examples_refuses_an_empty_sentence(tmp_path):
    from elmo_tasks.experiment.run import predict_examples

    class Head:
        def blank_example(self, tokens):
            return type("Ex", (), {"tokens": tokens})()

    model = type("Model", (), {"head": Head()})()
    for examples, where in (([["the", "cat"], []], "examples[1]"), ([[]], "examples[0]"), ([["a", ""]], "examples[0]")):
        with pytest.raises(UsageError, match=rf"{where.replace('[', '.').replace(']', '.')}: an empty sentence"):
            predict_examples(None, model, examples)


@pytest.mark.parametrize("kw, error, message", [
    ({"resume": "nonexistent"}, MissingPathError, "resume: nonexistent not found"),
    ({"jobs": 0}, UsageError, "jobs must be >= 1, got 0"),
    ({"jobs": -2}, UsageError, "jobs must be >= 1, got -2"),
    ({"jobs": True}, TypeError, "jobs must be an integer"),
    ({"threads": 0}, UsageError, "threads must be >= 1"),
])
def test_f08_run_comparison_checks_resume_and_jobs_as_the_cli_does(compare_cfg, tmp_path, kw, error, message):
    from elmo_tasks.experiment.compare import run_comparison

    with pytest.raises(error, match=message):
        run_comparison(compare_cfg, tmp_path / "R", runs_dir=tmp_path / "RD", progress=False, **kw)
    assert not (tmp_path / "RD").exists() and not (tmp_path / "R").exists()


def test_f08_run_comparison_refuses_a_resume_folder_that_is_not_a_comparison(compare_cfg, tmp_path):
    from elmo_tasks.experiment.compare import run_comparison

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(PathError, match="resume .*mine: not a comparison folder of 'tiny_ner'"):
        run_comparison(compare_cfg, tmp_path / "R", runs_dir=tmp_path / "RD", progress=False, resume=mine)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


# ---------------------------------------------------------------- I12: a plugin that exits at import

def test_i12_an_include_module_that_calls_sys_exit_is_an_error(tmp_path, capsys, monkeypatch):
    _, cfg = _config(tmp_path)
    (tmp_path / "quitter_r4.py").write_text("import sys\nsys.exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["run", cfg, "--out", str(tmp_path / "r"), "--include", "quitter_r4", *FAST]) == 2
    one_line_error(capsys, "--include quitter_r4: importing it called sys.exit(0)")
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------- I02, I09: configs that are no config

def test_i02_a_yaml_alias_bomb_is_refused_at_once(tmp_path, capsys):
    _, cfg = _config(tmp_path)
    levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcde", "bcdef"):  # 9**6 values expanded (larger bombs took minutes and gigabytes)
        levels.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(levels) + "\n" + open(cfg).read() + "bomb: *f\n")
    t0 = time.perf_counter()
    assert main(["run", str(bomb), "--out", str(tmp_path / "r"), *FAST]) == 2
    one_line_error(capsys, f"{bomb}: the config holds more than 200000 values once its YAML aliases")
    assert time.perf_counter() - t0 < 5
    (tmp_path / "loop.yaml").write_text("a: &a [1, *a]\n")
    with pytest.raises(ConfigError, match="a YAML alias refers to a node that contains it"):
        read_config_file(tmp_path / "loop.yaml")
    (tmp_path / "small.yaml").write_text("a: &a [1, 2]\nb: [*a, *a]\n")  # ordinary aliases are fine
    assert read_config_file(tmp_path / "small.yaml") == {"a": [1, 2], "b": [[1, 2], [1, 2]]}


@pytest.mark.parametrize("text, kind", [("- a\n", "list"), ("just a string\n", "string")])
def test_i09_every_command_refuses_a_config_whose_top_level_is_no_mapping(tmp_path, capsys, text, kind):
    path = tmp_path / "list.yaml"
    path.write_text(text)
    for command in (["wsd", "--config", str(path), "--out", str(tmp_path / "w")],
                    ["run", str(path), "--out", str(tmp_path / "r")],
                    ["train-bilm", "--config", str(path)]):
        assert main(command) == 2, command
        one_line_error(capsys, f"{path}: expected a mapping of keys to values at the top level", f"got a {kind}")


# ---------------------------------------------------------------- H05, H09: rerunning into an interrupted run's folder

@pytest.mark.parametrize("leftovers", [
    (".unfinished", "config.yaml", "vocab.json", "model.pt"),  # SIGTERM / Ctrl-C (H09): the printed command
    (".unfinished", "config.yaml", "vocab.json", "model.pt", "run.lock", ".model.pt.x1y2.tmp"),  # SIGKILL (H05)
])
def test_h05_h09_run_into_the_folder_of_an_interrupted_run_trains_it_again(tmp_path, capsys, leftovers):
    env, cfg = _config(tmp_path)
    out = tmp_path / "R"
    out.mkdir()
    for name in leftovers:
        (out / name).write_text("old")
    assert main(["predict", str(out), str(env["tsv_test"])]) == 2
    one_line_error(capsys, "the run never finished", f"`elmo-tasks run CONFIG --out {out}` and the config it ran with "
                   "(it clears the unfinished folder)")
    assert main(["run", cfg, "--out", str(out), *FAST]) == 0
    assert "removing an earlier unfinished run's" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "metrics.json", "model.pt", "predictions.json",
                                                      "vocab.json"]
    # a finished run is never replaced, and a folder holding anything else is never cleared
    assert main(["run", cfg, "--out", str(out), *FAST]) == 2
    one_line_error(capsys, f"--out {out}: the folder is not empty")
    other = tmp_path / "other"
    other.mkdir()
    for name in (".unfinished", "model.pt", "notes.txt"):
        (other / name).write_text("mine")
    assert main(["run", cfg, "--out", str(other), *FAST]) == 2
    one_line_error(capsys, "the folder is not empty (notes.txt")
    assert sorted(p.name for p in other.iterdir()) == [".unfinished", "model.pt", "notes.txt"]


# ---------------------------------------------------------------- A01: two runs in one second

def test_a01_two_runs_in_one_second_get_a_default_folder_each(tmp_path, capsys, monkeypatch):
    import elmo_tasks.experiment.preflight as preflight

    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2030, 1, 2, 3, 4, 5)

    monkeypatch.setattr(preflight, "datetime", Frozen)
    _, cfg = _config(tmp_path)
    runs = tmp_path / "runs"
    assert main(["run", cfg, "--runs-dir", str(runs), *FAST]) == 0
    assert main(["run", cfg, "--runs-dir", str(runs), *FAST]) == 0
    folders = sorted(p.name for p in (runs / "tiny_sentiment").iterdir())
    assert len(folders) == 2 and folders[0].startswith("20300102-030405-") and folders[1] == folders[0] + "-2"
    assert all((runs / "tiny_sentiment" / f / "metrics.json").exists() for f in folders)


# ---------------------------------------------------------------- J05: a stream as predict --out

def test_j05_predict_writes_a_pipe_in_place(tmp_path, capsys):
    env, cfg = _config(tmp_path)
    run = tmp_path / "r1"
    assert main(["run", cfg, "--out", str(run), *FAST]) == 0
    fifo = tmp_path / "p.fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, encoding="utf-8").read()), daemon=True)
    reader.start()
    capsys.readouterr()
    assert main(["predict", str(run), str(env["tsv_test"]), "--out", str(fifo)]) == 0
    reader.join(timeout=10)
    assert got and len(got[0].splitlines()) == 3
    assert fifo.is_fifo() and not (tmp_path / "p.fifo.lock").exists()  # the pipe is kept, no lock file beside it


# ---------------------------------------------------------------- J11: a dangling --runs-dir

def test_j11_a_dangling_runs_dir_symlink_is_named(tmp_path, capsys):
    _, cfg = _config(tmp_path)
    link = tmp_path / "RL"
    link.symlink_to(tmp_path / "nonexistent" / "place")
    assert main(["run", cfg, "--runs-dir", str(link), *FAST]) == 2
    one_line_error(capsys, f"--runs-dir: {link} is a symlink to {tmp_path / 'nonexistent' / 'place'}, which does "
                           "not exist")
    assert main(["compare", cfg, "--runs-dir", str(link), "--results-dir", str(tmp_path / "R"), *FAST,
                 "--set", f"compare.sources={{g: {{name: static, path: {tmp_path / 'glove.txt'}}}}}"]) == 2
    one_line_error(capsys, "is a symlink to")
    assert not (tmp_path / "R").exists()


# ---------------------------------------------------------------- J04: a newline in a path

def test_j04_a_newline_in_a_path_stays_on_the_one_error_line(tmp_path, capsys):
    assert main(["run", str(tmp_path / "sent\n.yaml"), "--out", str(tmp_path / "r")]) == 2
    one_line_error(capsys, "sent\\n.yaml: config file not found")
    from elmo_tasks.cli import error_message

    assert error_message(OSError(2, "No such file or directory", "a\nb\x1b[31m")) == \
        "a\\nb\\x1b[31m: No such file or directory"

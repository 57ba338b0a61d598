"""Hostile but realistic input, second round (docs/reliability.md): input that can be read only once, an output
that is the input, and the other classes; each test failed on the code before its fix."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import h5py
import pytest

from elmo_features.util.errors import OutputExistsError
import torch

from test_tasks_helpers import make_bilm
from elmo_tasks.cli import main

REPO = Path(__file__).resolve().parents[1]
TEXT = "the cat sat\nhello world\nJohn lives in Paris\n"


@pytest.fixture(scope="module")
def bilm(tmp_path_factory):
    torch.set_num_threads(1)
    opts, weights = make_bilm(tmp_path_factory.mktemp("bilm"))
    return ["--options", str(opts), "--weights", str(weights)]


def _sentences(path: Path) -> int:
    with h5py.File(path, "r") as f:
        return sum(1 for k in f if k.isdigit())


def _cli(args: list[str], stdin: str | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "elmo_tasks.cli", *args], input=stdin, capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


@pytest.mark.parametrize("how", ["dash", "dev_stdin_pipe", "fifo"])
def test_embed_reads_once_readable_input_once(bilm, tmp_path, how):
    out = tmp_path / "out.hdf5"
    if how == "fifo":
        fifo = tmp_path / "in.fifo"
        os.mkfifo(fifo)
        proc = subprocess.Popen([sys.executable, "-m", "elmo_tasks.cli", "embed", str(fifo), str(out), *bilm],
                                cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=subprocess.PIPE, text=True)
        with open(fifo, "w") as f:  # blocks until embed opens it, as a pipe does
            f.write(TEXT)
        _, err = proc.communicate(timeout=300)
        rc = proc.returncode
    else:
        r = _cli(["embed", "-" if how == "dash" else "/dev/stdin", str(out), *bilm], stdin=TEXT)
        rc, err = r.returncode, r.stderr
    assert rc == 0, err
    assert _sentences(out) == 3 and "wrote 3 sentences" in err
    assert not list(tmp_path.glob("*.input")) and not list(tmp_path.glob(".*.input"))  # the spooled copy is gone


def test_embed_refuses_an_output_that_is_its_input(bilm, tmp_path, capsys):
    inp = tmp_path / "x.txt"
    inp.write_text(TEXT)
    link = tmp_path / "link.hdf5"
    link.symlink_to(inp)
    hard = tmp_path / "hard.hdf5"
    os.link(inp, hard)
    for output in (inp, link, hard, tmp_path / "sub" / ".." / "x.txt"):
        assert main(["embed", str(inp), str(output), *bilm]) == 2
        assert "would destroy the input" in capsys.readouterr().err
    assert inp.read_text() == TEXT


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory):
    import yaml

    from test_tasks_helpers import make_env, tagging_config

    tmp = tmp_path_factory.mktemp("cfg")
    env = make_env(tmp)
    cfg = tagging_config(env, max_epochs=1)
    cfg["compare"] = {"seeds": [1], "sources": {"glove": {"name": "static", "path": str(env["glove"])}}}
    path = tmp / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.parametrize("argv,message", [
    (["run", "{cfg}", "--set", "training.lr=[1,"], "not valid YAML"),
    (["compare", "{cfg}", "--set", "training.lr=[1,"], "not valid YAML"),
    (["wsd", "--train", "x", "--test", "y", "--set", "a=[1,"], "not valid YAML"),
    (["run", "{cfg}", "--set", "training.seed=4294967296"], "training.seed: must be in [0, 4294967295], got 4294967296"),
    (["compare", "{cfg}", "--seeds", "1,1"], "seed 1 is given twice"),
    (["compare", "{cfg}", "--seeds", "-1"], "--seeds[0]: must be in [0, 4294967295], got -1"),
    (["compare", "{cfg}", "--folds", "1"], "--folds: give 3 or more"),
    (["compare", "{cfg}", "--sources", ""], "--sources: empty"),
    (["compare", "{cfg}", "--seeds", " "], "--seeds: empty"),
    (["compare", "{cfg}", "--folds", "50"], "more folds than labelled sentences"),
    (["run", "{cfg}", "--set", "data.max_train=-1"], "max_train: must be >= 1"),
    (["run", "{cfg}", "--set", "data.max_train=0"], "max_train: must be >= 1"),
])
def test_values_are_checked_before_work_with_one_line(tiny_config, tmp_path, capsys, argv, message):
    argv = [a.replace("{cfg}", str(tiny_config)) for a in argv]
    extra = ["--runs-dir", str(tmp_path / "runs")] if argv[0] == "compare" else []
    extra += ["--out", str(tmp_path / "run")] if argv[0] == "run" else []
    assert main(argv + extra) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()  # nothing written: the checks come before any work
    assert not list((tmp_path / "runs").glob("*/*"))


def test_run_folders_never_mix_two_runs(tiny_config, tmp_path, capsys):
    old = tmp_path / "old_run"
    old.mkdir()
    (old / "metrics.json").write_text("{}")
    assert main(["run", str(tiny_config), "--out", str(old)]) == 2
    assert "not empty" in capsys.readouterr().err and (old / "metrics.json").read_text() == "{}"
    # --resume takes only a comparison folder of this config
    for folder in (tmp_path / "results_of_mine", tmp_path / "runs" / "tiny_ner" / "compare-x"):
        folder.mkdir(parents=True)
        (folder / "notes.txt").write_text("mine")
        assert main(["compare", str(tiny_config), "--resume", str(folder), "--runs-dir", str(tmp_path / "runs")]) == 2
        assert "not a comparison folder" in capsys.readouterr().err and (folder / "notes.txt").exists()
    # a comparison re-running an interrupted cell starts it clean, and says so
    from elmo_tasks.experiment.run import clear_unfinished_run

    cell = tmp_path / "cell"
    cell.mkdir()
    for name in ("config.yaml", "model.pt", "predictions.json"):  # no metrics.json (written last): unfinished
        (cell / name).write_text("old")
    (cell / ".unfinished").touch()  # the mark a run leaves until its metrics.json is written
    clear_unfinished_run(cell)
    assert [p.name for p in cell.iterdir()] == [".unfinished"] and "removing an earlier unfinished run's" in capsys.readouterr().err
    (cell / "metrics.json").write_text("{}")  # a finished run is never deleted as "unfinished"
    with pytest.raises(OutputExistsError, match="holds a finished run"):
        clear_unfinished_run(cell)
    assert (cell / "metrics.json").exists()


def test_plain_embed_after_an_interrupted_torchrun_embed_says_what_to_do(bilm, tmp_path, capsys):
    import json

    inp = tmp_path / "in.txt"
    inp.write_text(TEXT)
    out = tmp_path / "out.hdf5"
    shards = tmp_path / "out.hdf5.shards"
    shards.mkdir()
    (shards / "manifest.json").write_text(json.dumps({"world_size": 2}))
    (shards / "shard-00000-of-00002.hdf5").write_bytes(b"finished shard")
    assert main(["embed", str(inp), str(out), *bilm]) == 2
    err = capsys.readouterr().err
    assert "interrupted torchrun embed" in err and "--nproc-per-node 2" in err and "--restart" in err
    assert (shards / "shard-00000-of-00002.hdf5").exists() and not out.exists()  # nothing lost, nothing done
    assert main(["embed", str(inp), str(out), *bilm, "--restart"]) == 0
    assert "discarding an interrupted torchrun embed" in capsys.readouterr().err
    assert not shards.exists() and _sentences(out) == 3


def test_predict_says_how_relative_paths_of_the_run_resolve(tmp_path, capsys, monkeypatch):
    import yaml

    from test_tasks_helpers import make_env, tagging_config

    env = make_env(tmp_path)
    monkeypatch.chdir(tmp_path)
    cfg = tagging_config(env, max_epochs=1, features={"name": "static", "path": "glove.txt"})  # relative
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["run", "c.yaml", "--out", "run", "--progress", "off"]) == 0
    capsys.readouterr()
    assert main(["predict", "run", str(env["conll_test"]), "--reader", "--progress", "off"]) == 0
    assert "relative paths (glove.txt), resolved against the current folder" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path / "run")
    assert main(["predict", str(tmp_path / "run"), str(env["conll_test"]), "--reader"]) == 2
    err = capsys.readouterr().err
    assert "names glove.txt, relative paths resolved against the current folder" in err and "Traceback" not in err


def test_a_tsv_row_with_an_extra_tab_is_named_at_its_own_line(tmp_path):
    from elmo_tasks.data.classification import read_tsv
    from elmo_tasks.data.types import DataFormatError

    for text, line in (("pos\tgood film\tx\nneg\tbad\nneg\tdull\n", 1), ("pos\tgood\nneg\tbad\tx\nneg\tdull\n", 2),
                       ("pos\tgood film\tx\nneg\tbad\n", 1)):
        path = tmp_path / "d.tsv"
        path.write_text(text)
        with pytest.raises(DataFormatError, match=rf"d.tsv:{line}: expected 2 fields"):
            read_tsv(path)


def test_a_key_given_twice_is_an_error_not_the_last_one_silently(tmp_path, capsys):
    (tmp_path / "run.yaml").write_text("name: a\ntraining:\n  lr: 0.1\n  lr: 0.2\n")
    assert main(["run", str(tmp_path / "run.yaml")]) == 2
    assert "the key 'lr' is given twice (first on line 3)" in capsys.readouterr().err
    (tmp_path / "bilm.yaml").write_text("lr: 1\nlr: 2\n")
    assert main(["train-bilm", "--config", str(tmp_path / "bilm.yaml")]) == 2
    assert "the key 'lr' is given twice" in capsys.readouterr().err
    (tmp_path / "o.json").write_text('{"lstm": {"dim": 1}, "lstm": {}}')
    (tmp_path / "in.txt").write_text("a b\n")
    assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "o.hdf5"), "--options", str(tmp_path / "o.json"),
                 "--weights", str(tmp_path / "in.txt")]) == 2
    assert "the key 'lstm' is given twice" in capsys.readouterr().err
    # anchors and merge keys are not duplicates
    from elmo_features.util.config_files import load_yaml

    assert load_yaml("a: &x {k: 1}\nb: {<<: *x, k: 2}\n") == {"a": {"k": 1}, "b": {"k": 2}}


def test_static_vectors_report_words_listed_twice(tmp_path):
    from elmo_tasks.components import resolve_component
    from elmo_tasks.features.base import FeatureContext, build_features
    from elmo_tasks.registry import FEATURES

    (tmp_path / "v.txt").write_text("the 0.1 0.1\ncat 0.2 0.2\nthe 0.5 0.5\n")
    src = build_features(resolve_component(FEATURES, {"name": "static", "path": str(tmp_path / "v.txt")}, "f"),
                         FeatureContext())
    vecs = src.precompute([["the"]], "test")
    assert vecs[0].tolist() == [[pytest.approx(0.1), pytest.approx(0.1)]]  # the first entry is used
    assert src.report()["duplicate_words"] == 1


def test_the_same_flag_means_the_same_in_every_command(capsys):
    """--progress is auto|on|off everywhere; --cache-dir is the frozen-feature cache wherever it exists, downloads go
    to --download-cache and data sets to --data-dir."""
    from elmo_tasks.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    nested = {f"{name} {k}": v for name, p in sub.items() for a in p._actions
              if getattr(a, "choices", None) and isinstance(a.choices, dict) for k, v in a.choices.items()}
    commands = {**{n: p for n, p in sub.items() if n not in ("data", "models")}, **nested}
    for name, p in commands.items():
        flags = {o: a for a in p._actions for o in a.option_strings}
        if "--progress" in flags:
            assert tuple(flags["--progress"].choices) == ("auto", "on", "off"), name
        if "--cache-dir" in flags:
            assert "feature" in (flags["--cache-dir"].help or ""), name
    for name in ("embed", "run", "compare", "predict", "wsd", "train-bilm"):
        assert "--progress" in {o for a in commands[name]._actions for o in a.option_strings}, name
    for name in ("embed", "models get", "models list"):
        assert "--download-cache" in {o for a in commands[name]._actions for o in a.option_strings}, name
    for name in ("data get", "data list"):
        assert "--data-dir" in {o for a in commands[name]._actions for o in a.option_strings}, name

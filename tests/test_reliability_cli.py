"""Hostile input to every command: one ``error:`` line, exit code 2, no traceback (docs/reliability.md)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import h5py
import pytest
import torch
import yaml

from elmo_features import Embedder, FeatureCache, load_bilm
from elmo_features.util.errors import ElmoTasksError, LockError
from elmo_features.util.locking import OutputLock, lock_path_for
from elmo_tasks.cli import main
from test_tasks_helpers import elmo_section, make_env, tagging_config

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Tiny biLM, data files, a training config, run configs and a fake run folder."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("hostile")
    env = make_env(root)
    env["root"] = root
    env["text"] = root / "in.txt"
    env["text"].write_text("John visited Berlin\nMary met Smith\n", encoding="utf-8")
    env["a_dir"] = root / "a_dir"
    env["a_dir"].mkdir()
    env["a_file"] = root / "a_file"
    env["a_file"].write_text("x")
    # train-bilm config whose lstm_dim is a string
    env["bad_train_cfg"] = root / "bad_train.yaml"
    env["bad_train_cfg"].write_text(yaml.safe_dump({"train_files": [str(env["text"])], "lstm_dim": "512",
                                                    "out_dir": str(root / "bilm_out")}))
    # run config naming a data file that does not exist
    cfg = tagging_config(env)
    cfg["data"]["test"] = str(root / "data" / "conll2003" / "missing.txt")
    env["run_cfg"] = root / "run.yaml"
    env["run_cfg"].write_text(yaml.safe_dump(cfg))
    env["good_cfg"] = root / "good.yaml"
    env["good_cfg"].write_text(yaml.safe_dump(tagging_config(env)))
    env["vocab"] = root / "vocab.txt"
    env["vocab"].write_text("<S>\n</S>\n<UNK>\nJohn\n", encoding="utf-8")
    # compare config whose second source names a missing vectors folder
    cfg = tagging_config(env)
    cfg["compare"] = {"sources": {"mix": elmo_section(env), "glove": {"name": "static", "path": str(root / "nope")}},
                      "seeds": [1]}
    env["compare_cfg"] = root / "compare.yaml"
    env["compare_cfg"].write_text(yaml.safe_dump(cfg))
    # a run folder whose model.pt is truncated
    run = root / "run_folder"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump(tagging_config(env)))
    (run / "vocab.json").write_text(json.dumps({"labels": ["O"]}))
    (run / "metrics.json").write_text("{}")
    (run / "model.pt").write_bytes(b"PK\x03\x04 truncated")
    env["run_folder"] = run
    # a truncated weights file
    env["trunc_weights"] = root / "trunc.hdf5"
    env["trunc_weights"].write_bytes(env["weights"].read_bytes()[:2000])
    # wsd config whose GloVe source is missing (must fail before any training)
    (root / "train").mkdir()
    (root / "test").mkdir()
    env["wsd_cfg"] = root / "wsd.yaml"
    env["wsd_cfg"].write_text(yaml.safe_dump({
        "wordnet": str(root / "a_file"), "features": ["glove"],
        "sources": {"glove": {"name": "static", "path": str(root / "glove-missing")}}}))
    return env


def _cases(w):
    r = w["root"]
    return {
        "embed output is a folder": (["embed", w["text"], w["a_dir"], "--options", w["options"], "--weights",
                                      w["weights"]], "is a folder"),
        "embed parent is a file": (["embed", w["text"], w["a_file"] / "out.hdf5", "--options", w["options"],
                                    "--weights", w["weights"]], "is a file, not a folder"),
        "embed input missing": (["embed", r / "missing.txt", r / "o.hdf5"], "missing.txt not found"),
        "embed truncated weights": (["embed", w["text"], r / "o.hdf5", "--options", w["options"], "--weights",
                                     w["trunc_weights"]], "unreadable HDF5 file"),
        "embed batch size 0": (["embed", w["text"], r / "o.hdf5", "--batch-size", "0"], None),  # argparse
        "train-bilm string for a number": (["train-bilm", "--config", w["bad_train_cfg"]],
                                           "lstm_dim: expected an integer, got '512'"),
        "train-bilm bad --set": (["train-bilm", "--config", w["bad_train_cfg"], "--set", "lstm_dim"],
                                 "expected key.sub=value"),
        "train-bilm config missing": (["train-bilm", "--config", r / "nope.yaml"], "nope.yaml: config file not found, and no packaged config has that name"),
        "eval-bilm truncated weights": (["eval-bilm", w["text"], "--options", w["options"], "--weights",
                                         w["trunc_weights"], "--vocab", w["vocab"]], "unreadable HDF5 file"),
        "eval-bilm bad vocabulary": (["eval-bilm", w["text"], "--options", w["options"], "--weights",
                                      w["weights"], "--vocab", w["text"]], "vocabulary must start with"),
        "run missing data file": (["run", w["run_cfg"], "--out", r / "r1"],
                                  "data.test: " + str(r / "data" / "conll2003" / "missing.txt") + " not found; "
                                  "run `elmo-tasks data get conll2003`"),
        "run out is a file": (["run", w["good_cfg"], "--out", w["a_file"]],
                              f"--out: {w['a_file']} is a file, not a folder"),
        "run unknown config key": (["run", w["bad_train_cfg"], "--out", r / "r2"], "unknown top-level key(s)"),
        "compare missing vectors": (["compare", w["compare_cfg"], "--results-dir", r / "res"],
                                    "compare.sources.glove.path: " + str(r / "nope") + " not found"),
        "compare bad seeds": (["compare", w["compare_cfg"], "--seeds", "1,x"], "--seeds: expected comma-separated"),
        "predict truncated model.pt": (["predict", w["run_folder"], w["text"]], "not a readable checkpoint"),
        "predict not a run folder": (["predict", w["a_dir"], w["text"]], "has no config.yaml, vocab.json, model.pt"),
        "wsd missing glove": (["wsd", "--config", w["wsd_cfg"], "--train", r / "train", "--test", r / "test",
                               "--out", r / "wsd"], "sources.glove.path: " + str(r / "glove-missing") + " not found"),
        "wsd missing test folder": (["wsd", "--config", w["wsd_cfg"], "--train", r / "train", "--test", r / "nope",
                                     "--out", r / "wsd"], "--test: " + str(r / "nope") + " not found"),
        "data get unknown name": (["data", "get", "conll", "--dest", r / "d"], "unknown data set(s) 'conll'"),
        "data get dest is a file": (["data", "get", "conll2003", "--dest", w["a_file"]], "is a file, not a folder"),
    }


CASES = ["embed output is a folder", "embed parent is a file", "embed input missing", "embed truncated weights",
         "embed batch size 0", "train-bilm string for a number", "train-bilm bad --set", "train-bilm config missing",
         "eval-bilm truncated weights", "eval-bilm bad vocabulary", "run missing data file", "run out is a file",
         "run unknown config key", "compare missing vectors",
         "compare bad seeds", "predict truncated model.pt", "predict not a run folder", "wsd missing glove",
         "wsd missing test folder", "data get unknown name", "data get dest is a file"]


@pytest.mark.parametrize("case", CASES)
def test_user_error_is_one_line_exit_2(world, case, capsys):
    argv, expected = _cases(world)[case]
    argv = [str(a) for a in argv]
    if expected is None:  # argparse's own error: also exit code 2 and one line (the usage only with --help)
        with pytest.raises(SystemExit) as e:
            main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
        assert "expected an integer >= 1, got 0" in err
        return
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: "), err
    assert sum(line.startswith("error: ") for line in lines) == 1 and "Traceback" not in err
    assert expected in lines[-1], lines[-1]


def test_cases_cover_every_command(world):
    commands = {_cases(world)[c][0][0] for c in CASES}
    assert commands == {"embed", "train-bilm", "eval-bilm", "run", "compare", "predict", "wsd", "data"}


def test_debug_flag_and_env_show_the_traceback(world, monkeypatch):
    argv = ["embed", str(world["root"] / "missing.txt"), str(world["root"] / "o.hdf5")]
    with pytest.raises(ElmoTasksError, match="missing.txt not found"):
        main(argv + ["--debug"])
    monkeypatch.setenv("ELMO_TASKS_DEBUG", "1")
    with pytest.raises(ElmoTasksError):
        main(argv)


def test_subprocess_exit_code_and_single_line(world):
    """The real entry point: embed to a folder fails at once, before loading any model."""
    proc = subprocess.run([sys.executable, "-m", "elmo_tasks.cli", "embed", str(world["text"]), str(world["a_dir"])],
                          cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: embed output: {world['a_dir']} is a folder; give a file "
                                                f"name (e.g. {world['a_dir'] / 'out.hdf5'})"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_unwritable_parent_is_refused_before_work(world, tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert main(["embed", str(world["text"]), str(ro / "sub" / "o.hdf5"), "--options", str(world["options"]),
                     "--weights", str(world["weights"])]) == 2
    finally:
        ro.chmod(0o700)
    assert f"cannot write to {ro} (permission denied)" in capsys.readouterr().err


def test_second_embed_writer_is_refused_and_first_file_stays_readable(world, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HDF5_USE_FILE_LOCKING", "FALSE")  # as on cluster file systems
    out = tmp_path / "out.hdf5"
    argv = ["embed", str(world["text"]), str(out), "--options", str(world["options"]), "--weights",
            str(world["weights"])]
    assert main(argv) == 0
    before = out.read_bytes()
    with OutputLock(lock_path_for(out), "test"):  # another writer holds the output
        assert main(argv + ["--restart"]) == 2
        err = capsys.readouterr().err
        assert f"is being written by another process (PID {os.getpid()} on host" in err
        assert "wait until it has finished, or write somewhere else" in err
    assert out.read_bytes() == before and not (tmp_path / "out.hdf5.partial").exists()
    with h5py.File(out, "r") as f:
        assert f["0"].shape[1] == 3
    assert main(argv) == 0 and not lock_path_for(out).exists()  # the lock is gone once released


def test_lock_is_released_when_the_holder_dies(tmp_path):
    target = tmp_path / "out.hdf5"
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]); from elmo_features.util.locking import OutputLock;"
            "lock = OutputLock(sys.argv[2], 'x').acquire(); print('locked', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(REPO), str(lock_path_for(target))],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(LockError, match=f"PID {proc.pid} on host"):
            OutputLock(lock_path_for(target), "out").acquire()
    finally:
        proc.kill()
        proc.wait()
    OutputLock(lock_path_for(target), "out").acquire().release()  # the kernel released the dead holder's lock


def test_feature_cache_waits_for_another_writer_then_computes(world, tmp_path):
    embedder = Embedder(load_bilm(world["options"], world["weights"]), progress=False)
    sentences = [["a", "b"], ["c"]]
    cache = FeatureCache(tmp_path / "cache")
    path = cache.path_for(embedder, sentences)
    result = {}
    with OutputLock(lock_path_for(path), "test"):
        t = threading.Thread(target=lambda: result.setdefault("path", cache.ensure(embedder, sentences)))
        t.start()
        time.sleep(0.5)
        assert t.is_alive() and not path.exists()  # waiting, not writing
    t.join(timeout=30)
    assert result["path"] == path and cache.computed == 1
    with h5py.File(path, "r") as f:
        assert int(f.attrs["n_sentences"]) == 2

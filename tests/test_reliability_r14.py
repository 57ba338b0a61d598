"""Hostile cases, list eighteen's leftovers and list nineteen: where a cache folder came from and what kind of
folder it is, files that are archives or arrays given as text, pipes given to the WSD command, vectors that carry no
information, a WSD training set with one sense, and the Python API's checks of words, overrides and cache folders."""
from __future__ import annotations

import bz2
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from tasks.cli import main

from test_reliability_outputs_r3 import bank_wsd_config
from test_tasks_helpers import one_line_error, static_config_file

FAST = ["--cache-dir", "none", "--progress", "off"]


def _cli(args: list[str], cwd: Path, **env: str):
    """``python -m tasks.cli ARGS`` in ``cwd`` with ``env`` added: (exit code, stderr)."""
    import subprocess
    import sys

    run_env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), **env}
    p = subprocess.run([sys.executable, "-m", "tasks.cli", *args], cwd=cwd, env=run_env, capture_output=True,
                       text=True, timeout=300)
    return p.returncode, p.stderr.strip()


def test_a_cache_folder_from_the_environment_is_named_as_such_with_its_kind(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    wn = tmp_path / "wn"
    wn.mkdir()
    (wn / "index.sense").write_text("")
    code, err = _cli(["run", cfg, "--out", "R", "--progress", "off"], tmp_path, ELMO_TASKS_FEATURE_CACHE=str(wn))
    assert code == 2 and err.count("\n") == 0, err
    assert err.startswith(f"error: $ELMO_TASKS_FEATURE_CACHE {wn}: holds index.sense, so it is a WordNet folder"), err
    assert main(["run", cfg, "--out", "R3", "--cache-dir", str(wn), "--progress", "off"]) == 2
    one_line_error(capsys, f"--cache-dir {wn}: holds index.sense, so it is a WordNet folder")


def test_archives_and_arrays_given_as_text_are_named_without_the_vectors_hints(tmp_path, capsys, monkeypatch):
    import lzma

    from elmo_features.util.text_input import binary_kind
    from tasks.data.static_vectors import load_static_vectors

    text = b"the 0.1 0.2\ncat 0.3 0.4\n"
    assert "7z archive" in binary_kind(b"7z\xbc\xaf\x27\x1c\x00\x04")
    assert "lzma" in binary_kind(lzma.compress(text, format=lzma.FORMAT_ALONE))
    assert "bzip2" in binary_kind(bz2.compress(b""))  # an empty stream: no first block
    np.save(tmp_path / "a.npy", np.ones((2, 2), dtype=np.float32))
    (tmp_path / "w2v.txt").write_bytes(b"2 2\nthe \x00\x00\x80\xbf\xff\xff\x7f\x7f\n")
    with pytest.raises(Exception, match="after a 'count dim' header; a word2vec binary file needs format="):
        load_static_vectors(tmp_path / "w2v.txt")
    (tmp_path / "l1.txt").write_bytes("caf\xe9 0.1 0.2\n".encode("latin-1"))
    with pytest.raises(Exception) as e:
        load_static_vectors(tmp_path / "l1.txt")
    assert "word2vec" not in str(e.value) and "UTF-8" in str(e.value)
    with pytest.raises(Exception, match="NumPy .npy array, not text; give it with format npy"):
        load_static_vectors(tmp_path / "a.npy", format="text")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "a.npy", "--out", "R"]) == 2
    assert "format npy" not in one_line_error(capsys, "a.npy: the file is a NumPy .npy array, not text")


def test_embed_stops_at_a_binary_signature_without_reading_on(tmp_path):
    from elmo_features.embedding.embed_input import EmbedInput
    from elmo_features.util.text_input import BinaryFileError

    np.save(tmp_path / "a.npy", np.ones((4, 4), dtype=np.float32))
    with pytest.raises(BinaryFileError) as e:
        EmbedInput(tmp_path / "a.npy")
    assert str(e.value).count(";") == 0 and "NumPy .npy array, not text" in str(e.value)


def test_a_wsd_config_read_through_a_descriptor_is_said_not_to_rerun(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(bank_wsd_config(tmp_path) | {"features": []}))
    with open(tmp_path / "w.yaml") as f:
        assert main(["wsd", "--config", f"/proc/self/fd/{f.fileno()}", "--out", "W", "--no-plot", *FAST]) == 0
    assert "is a pipe: the command recorded with the results cannot be run again" in capsys.readouterr().err


def test_vectors_that_are_all_the_same_are_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    lines = Path(env["glove"]).read_text().splitlines()
    same = [ln.split()[0] + " " + " ".join(["0.5"] * (len(ln.split()) - 1)) for ln in lines]
    (tmp_path / "same.txt").write_text("\n".join(same) + "\n")
    assert main(["run", cfg, "--out", "R", "--set", f"features.path={tmp_path / 'same.txt'}", *FAST]) == 2
    one_line_error(capsys, "every word has the same vector")


def test_a_wsd_training_set_of_one_sense_is_refused_before_any_embedding(tmp_path, capsys, monkeypatch):
    from wsd_toy import ToyInstance as I
    from wsd_toy import write_dataset

    monkeypatch.chdir(tmp_path)
    cfg = bank_wsd_config(tmp_path) | {"features": ["elmo"], "knn": ["layers"], "head": {"name": "wsd_linear"}}
    river = lambda: I("bank", "bank", "NOUN", ["bank%1:17:01::"])
    write_dataset(tmp_path / "one", "one", [["the", river(), "of", "the", "river"]] * 4)
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["wsd", "--config", "w.yaml", "--train", "one", "--out", "W", "--no-plot", *FAST]) == 2
    err = capsys.readouterr()
    assert "1-NN" not in err.out and "Traceback" not in err.err, err
    assert err.err.strip().splitlines()[-1].startswith("error: ") and "has the gold key bank%1:17:01::" in err.err
    assert "label column" not in err.err


def test_the_python_api_checks_words_overrides_and_cache_folders(tmp_path, monkeypatch):
    from elmo_features import FeatureCache
    from elmo_features.util.errors import PathError
    from tasks.data.static_vectors import StaticVectors
    from tasks.experiment.config import load_config

    for words in (["a", 1], ["a", None], ["a", ""], ["a", "  "]):
        with pytest.raises(ValueError, match=r"words\[1\] must be a non-empty str"):
            StaticVectors(words, np.ones((2, 2)), lowercase=False)
    env, cfg = static_config_file(tmp_path)
    for bad in ("name=x", [("name", "x")], [1]):
        with pytest.raises(TypeError, match="overrides must be a list of 'key.sub=value' strings"):
            load_config(cfg, bad)
    assert load_config(cfg, None).name == load_config(cfg).name
    monkeypatch.chdir(tmp_path)
    os.symlink("nowhere/x", "dang")
    for bad, says in (("~nosuchuser_xyz/x", "no such user's home folder"), ("dang", "is a symlink to nowhere/x"),
                      (Path(""), "Path\\('.'\\)"), ("/proc/1/x", "FeatureCache")):
        with pytest.raises(PathError, match=says):
            FeatureCache(bad)
    assert FeatureCache(".").cache_dir == Path(".")

"""A frozen input that changes after a run: every frozen input is fingerprinted (static vectors too), ``predict``
names the input that changed, ``compare --resume`` refuses to mix runs made on both, and when the trained head
no longer fits the new input the error names that input, not the run folder."""
from __future__ import annotations

import json

import numpy as np
import yaml

from test_tasks_helpers import make_env, make_glove, tagging_config
from elmo_tasks.cli import main
from elmo_tasks.data.static_vectors import StaticVectors


def _glove_config(env, tmp_path):
    cfg = tagging_config(env, features={"name": "static", "path": str(env["glove"])}, max_epochs=1)
    cfg["compare"] = {"sources": {"glove": {"name": "static", "path": str(env["glove"])}}, "seeds": [1]}
    path = tmp_path / "glove.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_static_vectors_have_a_content_fingerprint():
    a = StaticVectors(["a", "b"], np.ones((2, 3)), lowercase=True)
    assert a.fingerprint == StaticVectors(["a", "b"], np.ones((2, 3), np.float64), True).fingerprint
    assert a.fingerprint != StaticVectors(["a", "b"], np.ones((2, 3)) * 2, True).fingerprint  # other vectors
    assert a.fingerprint != StaticVectors(["a", "c"], np.ones((2, 3)), True).fingerprint  # other words
    assert a.fingerprint != StaticVectors(["a", "b"], np.ones((2, 3)), False).fingerprint  # another lookup policy


def test_static_vectors_replaced_in_place(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    env = make_env(tmp_path)
    config = _glove_config(env, tmp_path)
    common = ["compare", str(config), "--results-dir", "res", "--runs-dir", "runs", "--progress", "off",
              "--cache-dir", "none"]
    assert main(common) == 0
    summary = json.loads((tmp_path / "res" / "summary.json").read_text())
    (fp,) = summary["sources"][0]["vectors_fingerprints"]  # recorded in the summary
    assert f"vectors `{fp[:12]}`" in (tmp_path / "res" / "summary.md").read_text()
    (grid,) = (tmp_path / "runs" / "tiny_ner").glob("compare-*")
    make_glove(env["glove"], seed=1)  # the same file name, other vectors
    capsys.readouterr()
    assert main([*common, "--resume", str(grid)]) == 2  # runs on both files never mix in one row
    err = capsys.readouterr().err
    assert "finished with another frozen model" in err and fp[:12] in err
    (tmp_path / "in.txt").write_text("John lives in Paris\n")
    assert main(["predict", str(grid / "glove-seed1"), "in.txt", "--cache-dir", "none"]) == 0
    err = capsys.readouterr().err
    assert f"changed since it was trained: vectors {env['glove']} (fingerprint {fp[:12]} then" in err


def test_an_input_the_head_no_longer_fits_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    env = make_env(tmp_path)
    config = _glove_config(env, tmp_path)
    assert main(["run", str(config), "--out", "run", "--progress", "off", "--cache-dir", "none"]) == 0
    make_glove(env["glove"], dim=4)  # other vectors of another size: the trained head cannot take them
    (tmp_path / "in.txt").write_text("John lives in Paris\n")
    capsys.readouterr()
    assert main(["predict", "run", "in.txt", "--cache-dir", "none"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"vectors {env['glove']}" in err and "no longer fits" in err
    assert "do not belong together" not in err  # the run folder is not blamed

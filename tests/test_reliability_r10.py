"""Hostile list nine: wsd with a head of another kind (C14, X01), a lock file that is a link to a user's file (L01),
feature-cache entries with a missing, misshapen or edited array (M01, M02), a concat listing one source twice (D04),
ScalarMix of no layers (F01), TransformerEmbedder given a folder (F05), JSON records of the wrong shape (X07, Y01,
Y07) and a sense file with a misshapen dataset (Y05)."""
from __future__ import annotations

import glob
import json
import os

import h5py
import numpy as np
import pytest
import yaml

from elmo_features.util.errors import PathError
from elmo_tasks.cli import main

from test_reliability_outputs_r3 import senses  # noqa: F401  (a module fixture: a tiny sense file)
from test_tasks_helpers import make_bilm, one_line_error, static_config_file

FAST = ["--cache-dir", "none", "--progress", "off"]


# ---------------------------------------------------------------- C14 / X01: wsd with a head for other examples

@pytest.mark.parametrize("head", ["crf_tagger", "token_tagger", "sentence_classifier"])
def test_c14_wsd_refuses_a_head_for_other_examples_before_any_work(capsys, head):
    assert main(["wsd", "--config", "wsd_semcor", "--set", f"head.name={head}", "--out", "never"]) == 2
    one_line_error(capsys, f"head.name {head} takes", "but wsd trains on WsdSentence examples", "use wsd_linear")
    assert not os.path.exists("never")


# ---------------------------------------------------------------- L01: a lock file that is a link

@pytest.mark.parametrize("link", ["symlink", "hard link"])
@pytest.mark.parametrize("suffix, kind", [(".lock", "a lock file"),  # list nine
                                          (".partial", "a partial embed output")])  # list ten
def test_l01_a_file_written_in_place_that_is_a_link_to_a_users_file_is_refused_untouched(tmp_path, capsys, link,
                                                                                         suffix, kind):
    opts, weights = make_bilm(tmp_path / "bilm")
    (tmp_path / "in.txt").write_text("a sentence .\n")
    notes = tmp_path / "notes.txt"
    notes.write_text("my precious notes\n")
    target = tmp_path / f"e.h5{suffix}"
    os.symlink(notes, target) if link == "symlink" else os.link(notes, target)
    assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "e.h5"), "--options", str(opts), "--weights",
                 str(weights), "--progress", "off"]) == 2
    one_line_error(capsys, str(target), f"not {kind}", "remove it")
    assert notes.read_text() == "my precious notes\n" and not (tmp_path / "e.h5").exists()


def test_l01_output_lock_refuses_links_and_works_after_their_removal(tmp_path):
    from elmo_features.util.locking import OutputLock

    target = tmp_path / "t.txt"
    target.write_text("x\n")
    os.symlink(target, tmp_path / "a.lock")
    with pytest.raises(PathError, match="is a symlink"):
        OutputLock(tmp_path / "a.lock", "a").acquire()
    (tmp_path / "a.lock").unlink()
    with OutputLock(tmp_path / "a.lock", "a"):
        assert (tmp_path / "a.lock").read_text().split()[0] == str(os.getpid())
    assert target.read_text() == "x\n"


# ---------------------------------------------------------------- M01 / M02: damaged feature-cache entries

def _damage(entry, how: str) -> None:
    with h5py.File(entry, "r+") as f:
        if how == "missing":
            del f["2"]
        elif how == "fewer_tokens":
            a = f["2"][...]
            del f["2"]
            f["2"] = a[:, :-1]
        elif how == "other_dim":
            a = f["2"][...]
            del f["2"]
            f["2"] = a[..., :3]
        else:  # edited values, the file still readable
            f["2"][...] = 0.0


@pytest.mark.parametrize("how", ["missing", "fewer_tokens", "other_dim", "zeros"])
def test_m01_m02_a_damaged_cache_entry_is_recomputed_not_used(tmp_path, capsys, how):
    import torch

    from elmo_features import Embedder, load_bilm
    from elmo_features.embedding.feature_cache import FeatureCache, LazyFeatures
    from elmo_features.util.errors import DamagedCacheError

    torch.set_num_threads(1)
    opts, weights = make_bilm(tmp_path / "bilm")
    emb = Embedder(load_bilm(opts, weights))
    sentences = [["a", "b"], ["c"], ["d", "e", "f"], ["g"]]
    cache = FeatureCache(tmp_path / "c")
    first = cache.embed(emb, sentences)
    entry = next((tmp_path / "c").glob("*.hdf5"))
    _damage(entry, how)
    with LazyFeatures(entry) as lf, pytest.raises(DamagedCacheError, match=f"{entry} is damaged \\(sentence 2: "):
        lf[2]
    capsys.readouterr()
    again = cache.embed(emb, sentences)
    assert f"feature cache file {entry} is damaged (sentence 2: " in capsys.readouterr().err
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    with LazyFeatures(entry) as lf:  # rewritten whole
        assert np.array_equal(lf[2], first[2])


# ---------------------------------------------------------------- D04: a concat listing one source twice

def test_d04_a_concat_of_one_source_twice_is_refused(tmp_path, capsys):
    env, cfg = static_config_file(tmp_path)
    glove = env["glove"]
    features = f"features={{name: concat, sources: [{{name: static, path: {glove}}}, " \
               f"{{name: static, path: {glove}, lowercase: null}}]}}"
    assert main(["run", cfg, "--set", features, "--out", str(tmp_path / "R"), *FAST]) == 2
    one_line_error(capsys, "features.sources[1] is sources[0] again", "the same features twice")
    assert not (tmp_path / "R").exists()


# ---------------------------------------------------------------- F01 / F05: the Python API

def test_f01_scalar_mix_of_no_layers_names_the_count():
    from elmo_features import ScalarMix

    with pytest.raises(ValueError, match="ScalarMix got 0 layers, but was built for 2"):
        ScalarMix(2)([])


def test_f05_transformer_embedder_takes_a_folder_and_refuses_other_types(tmp_path):
    from elmo_features.encoders import TransformerEmbedder, load_encoder
    from encoder_helpers import make_bert

    folder = make_bert(tmp_path / "enc")
    by_folder = TransformerEmbedder(str(folder)).embed_sentences([["a", "b"]])
    by_encoder = TransformerEmbedder(load_encoder(str(folder))).embed_sentences([["a", "b"]])
    assert np.array_equal(by_folder[0], by_encoder[0])
    with pytest.raises(TypeError, match="encoder must be a LoadedEncoder .* got int: 5"):
        TransformerEmbedder(5)


# ---------------------------------------------------------------- X07 / Y01 / Y07: JSON records of the wrong shape

@pytest.fixture
def finished_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", "R", *FAST]) == 0
    (tmp_path / "in.txt").write_text("John lives in Paris\n")
    return tmp_path / "R"


@pytest.mark.parametrize("metrics, why", [("[]", "a JSON list, not an object"),
                                          ('{"features": "abc"}', "features is not a mapping"),
                                          ('{"features": {"sources": 5}}', "features.sources is not a list")])
def test_x07_predict_names_a_metrics_json_of_the_wrong_shape(finished_run, capsys, metrics, why):
    (finished_run / "metrics.json").write_text(metrics)
    capsys.readouterr()
    assert main(["predict", "R", "in.txt", "--out", "p.txt"]) == 2
    one_line_error(capsys, "R/metrics.json: damaged (", why, "rerun the run")
    assert not os.path.exists("p.txt")


def test_y01_compare_resume_names_a_finished_runs_metrics_of_the_wrong_shape(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path, compare={"sources": {"g": {"name": "static", "path": "x"}}})
    args = ["compare", cfg, "--set", f"compare.sources={{g: {{name: static, path: {env['glove']}}}}}", "--runs-dir",
            "RR", "--results-dir", "RES", *FAST]
    assert main(args + ["--seeds", "1"]) == 0
    grid = glob.glob("RR/*/compare-*")[0]
    (tmp_path / grid / "g-seed1" / "metrics.json").write_text('"x"')
    capsys.readouterr()
    assert main(args + ["--seeds", "1,2", "--resume", grid]) == 2
    one_line_error(capsys, "a finished run of the comparison is damaged", "a JSON str, not an object",
                   "delete that folder")


@pytest.mark.parametrize("grid", [5, {"seeds": [1]}, {"seeds": {"g": 1}}])
def test_y07_a_summary_json_with_a_damaged_grid_is_named(tmp_path, capsys, monkeypatch, grid):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path, compare={"sources": {"g": {"name": "static", "path": "x"}}})
    args = ["compare", cfg, "--set", f"compare.sources={{g: {{name: static, path: {env['glove']}}}}}", "--seeds", "1",
            "--runs-dir", "RR", "--results-dir", "RES", *FAST]
    assert main(args) == 0
    summary = json.loads((tmp_path / "RES" / "summary.json").read_text())
    (tmp_path / "RES" / "summary.json").write_text(json.dumps({**summary, "grid": grid}))
    capsys.readouterr()
    assert main(args) == 2
    one_line_error(capsys, "--results-dir RES: its summary.json is damaged (grid", "move it away")


# ---------------------------------------------------------------- Y05: a sense file with a misshapen dataset

@pytest.mark.parametrize("dataset, cut", [("context", 3), ("gloss", 3), ("step", None)])
def test_y05_a_sense_file_with_a_misshapen_dataset_is_named(senses, tmp_path, capsys, dataset, cut):  # noqa: F811
    damaged = tmp_path / "s.h5"
    damaged.write_bytes((senses / "senses.h5").read_bytes())
    with h5py.File(damaged, "r+") as f:
        a = f[dataset][...]
        del f[dataset]
        f[dataset] = a[:, :cut] if cut else a[:-1]
    capsys.readouterr()
    assert main(["wsd", "tag", str(senses / "in.txt"), "--senses", str(damaged), "--out", str(tmp_path / "t.jsonl")]) \
        == 2
    one_line_error(capsys, f"{damaged}: dataset", "has shape" if dataset == "step" else "context and gloss have shapes",
                   "the file is damaged: make it again")
    assert not (tmp_path / "t.jsonl").exists()


def test_y05_a_sense_file_whose_vectors_are_all_cut_names_the_dimension(senses, tmp_path, capsys):  # noqa: F811
    damaged = tmp_path / "s.h5"
    damaged.write_bytes((senses / "senses.h5").read_bytes())
    with h5py.File(damaged, "r+") as f:
        for name in ("context", "gloss"):
            a = f[name][...]
            del f[name]
            f[name] = a[:, :3]
    capsys.readouterr()
    assert main(["wsd", "tag", str(senses / "in.txt"), "--senses", str(damaged), "--out", str(tmp_path / "t.jsonl")]) \
        == 2
    one_line_error(capsys, "its vectors have dimension 3, but its feature source gives", "make it again")


def test_concat_with_distinct_sources_still_runs(tmp_path):
    """(The D04 check compares whole sections: two sources that differ in any setting are fine.)"""
    env, cfg = static_config_file(tmp_path)
    features = (f"features={{name: concat, sources: [{{name: static, path: {env['glove']}}}, "
                f"{{name: static, path: {env['glove']}, lowercase: false}}]}}")
    assert main(["run", cfg, "--set", features, "--out", str(tmp_path / "R"), *FAST]) == 0
    assert yaml.safe_load((tmp_path / "R" / "config.yaml").read_text())["features"]["name"] == "concat"


# ---------------------------------------------------------------- a caught interrupt ends the process with its code

@pytest.mark.parametrize("forget", [False, True])
def test_an_interrupt_caught_after_leaving_c_run_code_keeps_the_commands_exit_code(tmp_path, forget):
    """CPython marks a KeyboardInterrupt that left code run through ``PyRun_*`` (a C extension's import-time code) as
    unhandled even when caught later, and a ``python -m`` process then dies by SIGINT at exit (seen in 2 of 20
    train-bilm runs stopped early by SIGTERM: exit -2 instead of 143); ``stop.ignore_signals`` clears the mark."""
    import subprocess
    import sys
    from pathlib import Path

    fix = "from elmo_features.util import stop; stop.ignore_signals()" if forget else "pass"
    (tmp_path / "flagmod.py").write_text("import ctypes, sys\nctypes.pythonapi.PyRun_SimpleString(b'raise "
                                         f"KeyboardInterrupt')\n{fix}\nsys.exit(143)\n")
    r = subprocess.run([sys.executable, "-m", "flagmod"], capture_output=True, timeout=60, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": f"{tmp_path}:{Path(__file__).resolve().parents[1]}"})
    assert r.returncode == (143 if forget else -2)

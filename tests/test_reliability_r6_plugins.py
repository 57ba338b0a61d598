"""Hostile input, round six (plugins, caches, WSD senses): a plugin module edited between ``compare`` and
``compare --resume`` (C02), a feature-cache entry overwritten with NaN and a NaN batch blamed on the learning rate
(K01), and ``wsd senses`` on a training folder whose gold keys are all of another WordNet (W06)."""
from __future__ import annotations

import glob
import json
import sys

import h5py
import numpy as np
import pytest
import yaml

from test_tasks_helpers import elmo_section, make_bilm, one_line_error, static_config_file
from test_wsd_senses import write_wordnet
from elmo_tasks.cli import main

FAST = ["--cache-dir", "none", "--progress", "off"]


# ---------------------------------------------------------------- C02: plugin code edited before --resume

PLUGIN_R6 = ("from elmo_tasks.registry import FEATURES\nfrom elmo_tasks.features.static import StaticFeatures\n"
             "@FEATURES.register('static_r6')\nclass StaticR6(StaticFeatures):\n    pass\n")


@pytest.fixture
def plugin_r6(tmp_path, monkeypatch):
    """plugin_r6.py in tmp_path (the current folder), registering the feature source static_r6."""
    from elmo_tasks import plugins
    from elmo_tasks.registry import FEATURES

    (tmp_path / "plugin_r6.py").write_text(PLUGIN_R6)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_INCLUDED", list(plugins._INCLUDED))  # (no later test's workers load it)
    yield tmp_path / "plugin_r6.py"
    FEATURES._entries.pop("static_r6", None)  # the registry is the process's: later tests list its names
    sys.modules.pop("plugin_r6", None)


def _compare(cfg: str, tmp_path, seeds: str, *extra: str) -> list[str]:
    return ["compare", cfg, "--include", "plugin_r6", "--sources", "a", "--seeds", seeds, "--results-dir",
            str(tmp_path / "RES"), "--runs-dir", str(tmp_path / "RR"), *extra, *FAST]


def test_c02_resume_refuses_a_run_made_with_another_version_of_a_plugin_module(plugin_r6, tmp_path, capsys):
    env, cfg = static_config_file(tmp_path, compare={"sources": {"a": {"name": "static_r6", "path": "x"}}})
    sources = f"compare.sources={{a: {{name: static_r6, path: {env['glove']}}}}}"
    assert main(_compare(cfg, tmp_path, "1", "--set", sources)) == 0
    grid = glob.glob(str(tmp_path / "RR" / "*" / "compare-*"))[0]
    metrics = json.loads((tmp_path / grid / "a-seed1" / "metrics.json").read_text())
    assert set(metrics["plugin_modules"]) == {"plugin_r6"}  # the digest is recorded with the run
    capsys.readouterr()
    # unchanged plugin: the finished run is reused
    assert main(_compare(cfg, tmp_path, "1", "--set", sources, "--resume", grid)) == 0
    assert "reusing the finished run" in capsys.readouterr().out
    plugin_r6.write_text(PLUGIN_R6.replace("    pass\n", "    def forward(self, *a, **k):\n"
                                                         "        return super().forward(*a, **k) * 1000.0\n"))
    summary = (tmp_path / "RES" / "summary.json").read_text()
    assert main(_compare(cfg, tmp_path, "1,2", "--set", sources, "--resume", grid)) == 2
    one_line_error(capsys, f"--resume {grid}: run a-seed1 was made with another version of plugin module plugin_r6 "
                           "(sha256 ", "start a new comparison")
    assert not (tmp_path / grid / "a-seed2").exists() and (tmp_path / "RES" / "summary.json").read_text() == summary


def test_c02_a_finished_run_without_a_plugin_record_is_still_reused(tmp_path, capsys):
    """Runs made before digests were recorded (or without plugins) have no plugin_modules: resumed as before."""
    env, cfg = static_config_file(tmp_path, compare={"sources": {"g": {"name": "static", "path": "x"}}})
    args = ["compare", cfg, "--seeds", "1", "--results-dir", str(tmp_path / "RES"), "--runs-dir", str(tmp_path / "RR"),
            "--set", f"compare.sources={{g: {{name: static, path: {env['glove']}}}}}", *FAST]
    assert main(args) == 0
    grid = glob.glob(str(tmp_path / "RR" / "*" / "compare-*"))[0]
    assert "plugin_modules" not in json.loads((tmp_path / grid / "g-seed1" / "metrics.json").read_text())
    capsys.readouterr()
    assert main(args + ["--resume", grid]) == 0
    assert "reusing the finished run" in capsys.readouterr().out


# ---------------------------------------------------------------- K01: NaN in a feature-cache entry

def test_k01_a_feature_cache_entry_holding_nan_is_recomputed(tmp_path, capsys):
    env, cfg = static_config_file(tmp_path)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({**yaml.safe_load((tmp_path / "c.yaml").read_text()),
                                                     "features": elmo_section(env)}))
    cache = tmp_path / "C"
    run = ["run", cfg, "--cache-dir", str(cache), "--progress", "off", "--out"]
    assert main(run + [str(tmp_path / "R1")]) == 0
    entries = sorted(cache.glob("*.hdf5"))
    assert entries
    for p in entries:  # bit rot: every float overwritten with NaN
        with h5py.File(p, "r+") as f:
            for name in f:
                if name.isdigit():  # (the arrays; beside them the lengths and checksums)
                    f[name][...] = np.nan
    capsys.readouterr()
    assert main(run + [str(tmp_path / "R2")]) == 0
    err = capsys.readouterr().err
    assert f"feature cache file {entries[0]} is damaged (sentence 0: its values do not match the checksum" in err
    assert "; recomputing" in err
    m1, m2 = (json.loads((tmp_path / r / "metrics.json").read_text()) for r in ("R1", "R2"))
    assert m1["test"] == m2["test"] and m1["dev"] == m2["dev"]
    with h5py.File(entries[0], "r") as f:  # the entry was rewritten with finite values
        assert all(np.isfinite(f[name][...]).all() for name in f)


def test_k01_lazy_features_refuse_a_nan_entry(tmp_path):
    from elmo_features.embedding.feature_cache import LazyFeatures
    from elmo_features.util.errors import DamagedCacheError

    p = tmp_path / "e.hdf5"
    with h5py.File(p, "w") as f:
        f.attrs.update({"n_sentences": 1, "num_output_layers": 1, "output_dim": 2})
        f.create_dataset("0", data=np.array([[[1.0, np.inf]]], dtype=np.float32))
    with LazyFeatures(p) as lf, pytest.raises(DamagedCacheError, match=r"is damaged \(sentence 0: NaN/Inf values\)"):
        lf[0]


def test_k01_a_nan_loss_from_nan_features_does_not_blame_the_learning_rate(tmp_path):
    from elmo_features.util.errors import DivergedError
    from elmo_tasks.experiment.config import load_config
    from elmo_tasks.experiment.run import read_examples, run_experiment
    from elmo_tasks.features.base import FeatureContext, build_features
    from elmo_tasks.registry import HEADS

    _, cfg_path = static_config_file(tmp_path)
    cfg = load_config(cfg_path)
    train = read_examples(cfg, "train", HEADS.get(cfg.head["name"]))[0]
    items = build_features(cfg.features, FeatureContext()).precompute([ex.tokens for ex in train], "train")
    items = [np.full_like(np.asarray(a), np.nan) for a in items]
    with pytest.raises(DivergedError) as e:
        run_experiment(cfg, tmp_path / "R", examples={"train": train}, features={"train": items}, progress=False)
    assert "input features hold NaN/Inf values" in str(e.value) and "lr" not in str(e.value)


# ---------------------------------------------------------------- W06: wsd senses, keys of another WordNet

def _senses_task(tmp_path, keys: list[str]) -> None:
    """A tiny WordNet, biLM and training folder (one "bank" instance per key), and c.yaml naming them."""
    write_wordnet(tmp_path / "wn")
    opts, weights = make_bilm(tmp_path / "bilm")
    d = tmp_path / "TR"
    d.mkdir()
    xml = ['<?xml version="1.0" encoding="UTF-8"?>', "<corpus>", '<text id="d000">']
    for i, _ in enumerate(keys):
        xml += [f'<sentence id="d000.s{i:03d}">', '<wf lemma="the" pos="X">the</wf>',
                f'<instance id="d000.s{i:03d}.t000" lemma="bank" pos="NOUN">bank</instance>', "</sentence>"]
    (d / "train.data.xml").write_text("\n".join(xml + ["</text>", "</corpus>"]) + "\n")
    (d / "train.gold.key.txt").write_text("".join(f"d000.s{i:03d}.t000 {k}\n" for i, k in enumerate(keys)))
    cfg = {"name": "tiny", "wordnet": str(tmp_path / "wn"), "train": str(d), "test": [str(d)],
           "sources": {"elmo": {"name": "elmo", "options_file": str(opts), "weights_file": str(weights)}},
           "knn": ["senses_glosses"], "head": None, "head_dev_every": 2}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))


SENSES = ["wsd", "senses", "--config", "c.yaml", "--source", "elmo", "--train", "TR", "--out", "s.h5", *FAST]


def test_w06_wsd_senses_refuses_a_training_folder_of_another_wordnet(tmp_path, monkeypatch, capsys):
    _senses_task(tmp_path, ["bank%1:17:99::", "bank%1:14:99::", "bank%1:17:99::"])
    monkeypatch.chdir(tmp_path)
    assert main(SENSES) == 2
    one_line_error(capsys, "TR/train.gold.key.txt: none of its 3 keys is a sense key of WordNet",
                   "(first: line 1 bank%1:17:99::): is it for another WordNet version?")
    assert not (tmp_path / "s.h5").exists()


def test_w06_wsd_senses_warns_about_some_unknown_training_keys(tmp_path, monkeypatch, capsys):
    _senses_task(tmp_path, ["bank%1:17:01::", "bank%1:14:99::", "bank%1:14:00::", "bank%1:17:01::"])
    monkeypatch.chdir(tmp_path)
    assert main(SENSES) == 0
    err = capsys.readouterr().err
    assert "warning: training set train: 1 gold key(s) are not WordNet 3.0 sense keys (first: " in err
    assert "TR/train.gold.key.txt:2: bank%1:14:99::" in err and (tmp_path / "s.h5").is_file()

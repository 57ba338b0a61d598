"""Hostile cases (round 3, models): an encoder whose config.json contradicts its architecture, empty biLM/encoder
specs, static vectors that carry no information, a WSD source with no method, WordNet files that are not UTF-8."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from elmo_features.encoders import load_encoder
from elmo_features.encoders.loading import EncoderError
from elmo_features.util.errors import ConfigError, TextInputError
from encoder_helpers import make_bert
from elmo_tasks.cli import main
from elmo_tasks.components import resolve_component
from elmo_tasks.data.types import DataFormatError
from elmo_tasks.features.base import FeatureContext, build_features
from elmo_tasks.registry import FEATURES
from elmo_tasks.wsd.config import load_wsd_config
from elmo_tasks.wsd.data.morphy import Morphy
from elmo_tasks.wsd.data.wordnet import WordNet
from test_tasks_helpers import make_env, tagging_config
from test_wsd_senses import write_wordnet

WORDS = ["the", "cat", "sat", "on", "mat"]


def _static(path):
    return build_features(resolve_component(FEATURES, {"name": "static", "path": str(path)}, "features"),
                          FeatureContext(progress=False))


def _vectors(path, words, zero=False):
    rng = np.random.default_rng(0)
    path.write_text("".join(w + " " + " ".join("0.0" if zero else f"{x:.4f}" for x in rng.normal(size=4)) + "\n"
                            for w in words), encoding="utf-8")
    return path


def test_encoder_model_type_other_than_architectures_refused(tmp_path):
    folder = make_bert(tmp_path / "enc")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "roberta"}))
    with pytest.raises(EncoderError, match="config.json: model_type roberta but architectures BertModel"):
        load_encoder(str(folder))


@pytest.mark.parametrize("spec", ["", "  "])
def test_empty_encoder_spec_named(spec):
    with pytest.raises(EncoderError, match="encoder spec .* is empty"):
        load_encoder(spec)


def test_wsd_empty_bilm_named(capsys):
    with pytest.raises(ConfigError, match="bilm: biLM spec '' is empty"):
        load_wsd_config(None, bilm="")
    assert main(["wsd", "--bilm", "", "--out", "w", "--no-plot"]) == 2
    err = capsys.readouterr().err.strip()
    assert "empty" in err and len(err.splitlines()) == 1 and "has no options.json" not in err


def test_static_vectors_all_zero_refused(tmp_path):
    with pytest.raises(DataFormatError, match="every vector is zero"):
        _static(_vectors(tmp_path / "zero.txt", WORDS, zero=True))


def test_static_vectors_training_oov_refused_or_warned(tmp_path, capsys):
    source = _static(_vectors(tmp_path / "other.txt", ["zz1", "zz2"]))
    source.precompute([["the", "cat"]], "test")  # a test split may be all OOV: not refused, but said
    assert "100% of the test tokens (2 of 2) are not in the vocabulary (every feature is zero" in capsys.readouterr().err
    with pytest.raises(DataFormatError, match="OOV rate 100%"):
        source.precompute([["the", "cat"], ["sat"]], "train")
    source = _static(_vectors(tmp_path / "few.txt", ["the"]))
    source.precompute([["the", "cat", "sat"]], "train")
    err = capsys.readouterr().err
    assert "warning:" in err and "67% of the training tokens (2 of 3)" in err and len(err.splitlines()) == 1


def test_run_with_training_oov_100_exits_2_before_training(tmp_path, capsys):
    env = make_env(tmp_path)
    cfg = tagging_config(env, features={"name": "static", "path": str(_vectors(tmp_path / "v.txt", ["zz1"]))})
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["run", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert "OOV rate 100%" in err and len(err.splitlines()) == 1 and not (tmp_path / "run" / "model.pt").exists()


def test_wsd_source_without_method_refused():
    sources = "sources={glove: {name: static, path: v.txt}}"
    with pytest.raises(ConfigError, match="glove has no method: knn is empty and head is null"):
        load_wsd_config(None, [sources, "knn=[]", "head=null"], features=["glove"])
    assert load_wsd_config(None, [sources, "knn=[]"], features=["glove"]).head is not None


def test_wordnet_file_not_utf8_named(tmp_path):
    folder = write_wordnet(tmp_path / "wn")
    data = (folder / "data.noun").read_bytes()
    at = data.index(b"| ") + 2
    (folder / "data.noun").write_bytes(data[:at] + b"caf\xe9 " + data[at:])
    with pytest.raises(TextInputError, match=r"data.noun:2: not valid UTF-8 \(byte 0xe9 at byte column \d+\)"):
        WordNet(folder)
    (folder / "noun.exc").write_bytes(b"geese goose\nm\xe9n man\n")
    with pytest.raises(TextInputError, match=r"noun.exc:2: not valid UTF-8"):
        Morphy(folder, set())

"""Config checking: unknown keys/names list the valid ones, types, overrides, registries, shipped configs."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from elmo_features.util.config_files import apply_set
from elmo_features.util.errors import ConfigError
from elmo_tasks.experiment.config import load_config, resolve
from elmo_tasks.heads.crf_tagger import CrfTagger
from elmo_tasks.registry import FEATURES, HEADS, Registry, RegistryError

REPO = Path(__file__).resolve().parents[1]


def base() -> dict:
    return {
        "name": "t",
        "data": {"reader": "conll2003", "train": "train.txt", "reader_options": {"scheme": "BIOES"}},
        "features": {"name": "static", "path": "vectors.txt"},
        "head": {"name": "crf_tagger", "hidden_dim": 8},
        "training": {"lr": "1e-3"},
    }


def test_defaults_are_filled_and_resolution_is_idempotent():
    cfg = resolve(base())
    assert cfg.training.lr == pytest.approx(1e-3)  # YAML reads 1e-3 as a string; coerced to float
    assert cfg.head == {"name": "crf_tagger", "hidden_dim": 8, "num_layers": 1, "dropout": 0.5, "scheme": "auto",
                        "constrained_decoding": True, "output_mix": None, "chars": None, "casing_dim": 0,
                        "word_dropout": 0.0, "variational_dropout": False}
    again = resolve(copy.deepcopy(cfg.to_dict()))
    assert again.to_dict() == cfg.to_dict()


@pytest.mark.parametrize("mutate,message", [
    (lambda c: c.update(extra=1), "unknown top-level key(s) 'extra'; valid keys: name, data"),
    (lambda c: c["head"].update(hidden=3), "unknown key 'hidden'; valid keys: name, hidden_dim, num_layers"),
    (lambda c: c["head"].update(name="nope"), "unknown head 'nope'; valid head names: crf_tagger"),
    (lambda c: c["features"].update(name="bert"), "unknown feature source 'bert'; valid feature source names: concat"),
    (lambda c: c["training"].update(epochs=3), "valid keys: seed, max_epochs"),
    (lambda c: c["training"].update(batch_size="big"), "training.batch_size: expected an integer"),
    (lambda c: c["training"].update(batch_size=0), "batch_size: must be >= 1"),
    (lambda c: c["head"].update(scheme="BILOU"), "must be one of 'auto', 'BIO', 'IOB1', 'BIOES'"),
    (lambda c: c["data"].update(reader="xml"), "unknown data reader 'xml'; valid: conll2003"),
    (lambda c: c["data"]["reader_options"].update(tagcol="ner"),
     "data.reader_options: unknown key 'tagcol'; valid keys: tag_column, scheme"),
    (lambda c: c["data"]["reader_options"].update(columns="word ner"), "data.reader_options.columns: expected a list"),
    (lambda c: c.pop("head"), "missing required section 'head'"),
    (lambda c: c["features"].pop("path"), "missing required key 'path'"),
    (lambda c: c.update(features={"name": "elmo", "layer": 1, "mix": {"name": "scalar"}}), "either layer"),
    (lambda c: c.update(features={"name": "elmo", "mix": {"name": "softmax"}}), "unknown fusion 'softmax'; valid fusion"),
    (lambda c: c.update(features={"name": "elmo", "mix": {"name": "scalar", "l2": 1}}), "valid keys: name, layer_norm"),
    (lambda c: c.update(features={"name": "concat", "sources": [{"name": "static", "path": "v"}]}), "at least two"),
    (lambda c: c.update(features={"name": "concat", "sources": [{"name": "static", "path": "v"}, {"name": "x"}]}),
     "features.sources[1].name: unknown feature source 'x'"),
    (lambda c: c.update(compare={"sources": {}}), "compare.sources: list at least one"),
    (lambda c: c.update(compare={"sources": {"a": {"name": "static"}}}), "compare.sources.a (static): missing"),
])
def test_errors_name_the_problem_and_the_valid_choices(mutate, message):
    c = base()
    mutate(c)
    with pytest.raises(ConfigError) as e:
        resolve(c)
    assert message in str(e.value)


def test_overrides_parse_yaml_and_create_nested_keys():
    c = base()
    apply_set(c, "training.seed=7")
    apply_set(c, "head.scheme=BIO")
    apply_set(c, "features.lowercase=true")
    apply_set(c, "data.max_train=null")
    cfg = resolve(c)
    assert cfg.training.seed == 7 and cfg.head["scheme"] == "BIO" and cfg.features["lowercase"] is True
    with pytest.raises(ConfigError, match="expected key.sub=value"):
        apply_set(c, "training.seed")
    with pytest.raises(ConfigError, match="head.scheme is not a section"):
        apply_set(c, "head.scheme.x=1")


def test_load_config_reports_file_problems(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(base()))
    assert load_config(good, ["training.max_epochs=2"]).training.max_epochs == 2


def test_registry_lookup_lists_valid_names_and_components_register_where_defined():
    assert {"crf_tagger", "sentence_classifier", "token_tagger", "wsd_linear"} <= set(HEADS.names())
    assert {"elmo", "static", "concat"} <= set(FEATURES.names())
    assert HEADS.get("crf_tagger") is CrfTagger  # registered by the decorator in its own file
    with pytest.raises(RegistryError, match="unknown head 'x'; valid head names: .*crf_tagger"):
        HEADS.get("x")
    reg = Registry("widget")

    @reg.register("w")
    class Widget:
        pass

    assert reg.get("w") is Widget and "w" in reg and list(reg) == ["w"]
    with pytest.raises(ValueError, match="widget 'w' is already registered"):
        reg.add("w", object())


@pytest.mark.parametrize("name", ["ner_conll2003.yaml", "sentiment_polarity.yaml", "tiny_ner_conll2003.yaml",
                                  "ner_conll2003_strong.yaml", "sentiment_polarity_strong.yaml"])
def test_shipped_configs_are_valid(name):
    cfg = load_config(REPO / "configs" / name)
    assert cfg.compare is not None and cfg.compare.sources
    if name != "tiny_ner_conll2003.yaml":
        assert cfg.compare.seeds == [1, 2, 3]
        assert set(cfg.compare.sources) == {"glove", "elmo_layer0", "elmo_layer1", "elmo_layer2", "elmo_mix",
                                            "glove+elmo_mix", "elmo_charonly_mix", "glove+elmo_charonly_mix",
                                            "minilm_mix", "glove+minilm_mix", *(f"minilm_layer{i}" for i in range(7)),
                                            "mpnet_mix", "glove+mpnet_mix",
                                            *(f"mpnet_layer{i}" for i in range(13))}
        assert cfg.compare.sources["elmo_charonly_mix"]["bilm"] == "default_charonly"
        layers = [("minilm-l6", k) for k in range(7)] + [("mpnet-base", k) for k in range(13)]
        for model, k in layers:  # the Transformers' per-layer rows: one seed each, hidden state k
            source = f"{model.split('-')[0]}_layer{k}"
            layer = cfg.compare.sources[source]
            assert (layer["name"], layer["model"], layer["layer"]) == ("transformer", model, k)
            assert cfg.compare.seeds_of(source) == [1]
        assert cfg.compare.sources["glove+minilm_mix"]["sources"][1] == cfg.compare.sources["minilm_mix"]


def test_set_changes_only_the_named_path_even_through_yaml_aliases(tmp_path):
    text = yaml.safe_dump(base()).replace("features:\n", "features: &f\n") + "compare:\n  sources:\n    a: *f\n"
    conf = tmp_path / "alias.yaml"
    conf.write_text(text)
    cfg = load_config(conf, ["compare.sources.a.path=other.txt"])
    assert cfg.features["path"] == "vectors.txt" and cfg.compare.sources["a"]["path"] == "other.txt"

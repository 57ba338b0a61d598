"""Hostile input, round three: training that diverges and values torch rejects, data or settings that measure
nothing, the Python API checking its inputs as the CLI does, and old-Mac line ends. Each case is one error line
(or a loud warning) before anything wrong is written."""
from __future__ import annotations

import json
import math
import shutil

import pytest
import yaml

from test_reliability_training import SMALL, _text
from test_tasks_helpers import make_env, tagging_config, one_line_error
from elmo_tasks.cli import main
from elmo_tasks.experiment.training import TaskModel


# ---------------------------------------------------------------- training that diverges

@pytest.mark.parametrize("setting, message", [
    ("training.lr=1e308", "training.lr: must be in (0, 10], got 1e+308"),
    ("training.weight_decay=-1", "training.weight_decay: must be in [0, 1], got -1"),
])
def test_optimizer_values_torch_rejects_or_that_diverge_are_config_errors(tmp_path, capsys, setting, message):
    env = make_env(tmp_path)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(tagging_config(env)))
    assert main(["run", str(tmp_path / "c.yaml"), "--set", setting, "--out", str(tmp_path / "run")]) == 2
    one_line_error(capsys, message)
    assert not (tmp_path / "run").exists()  # checked before any work


def test_a_diverging_head_stops_with_no_finished_run(tmp_path, capsys, monkeypatch):
    env = make_env(tmp_path)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(tagging_config(env)))
    original = TaskModel.loss
    calls = []

    def blows_up(self, split, idx):  # the loss turns NaN at the third step, as a too large lr makes it
        calls.append(1)
        loss = original(self, split, idx)
        return loss * math.nan if len(calls) >= 3 else loss

    monkeypatch.setattr(TaskModel, "loss", blows_up)
    assert main(["run", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "run"), "--cache-dir", "none"]) == 2
    one_line_error(capsys, "training diverged: the loss is nan", "not finished")
    assert not (tmp_path / "run" / "metrics.json").exists()  # a compare would not take this run as finished


def test_a_diverging_bilm_stops_without_a_checkpoint_of_it(tmp_path, capsys, monkeypatch):
    from elmo_features.training.trainer import Trainer

    corpus = _text(tmp_path / "a.txt", "the cat sat on a mat".split())
    config = tmp_path / "bilm.yaml"
    config.write_text(yaml.safe_dump({**SMALL, "train_files": [str(corpus)], "out_dir": str(tmp_path / "run")}))
    assert main(["train-bilm", "--config", str(config), "--set", "lr=1e308", "--progress", "off"]) == 2
    one_line_error(capsys, "lr: must be in (0, 10]")
    original = Trainer.train_step
    monkeypatch.setattr(Trainer, "train_step", lambda self, idx: (math.inf, original(self, idx)[1]))
    assert main(["train-bilm", "--config", str(config), "--progress", "off"]) == 2
    one_line_error(capsys, "training diverged at step 1: the loss is inf")
    assert not (tmp_path / "run" / "checkpoint.pt").exists() and not (tmp_path / "run" / "export").exists()


# ---------------------------------------------------------------- old-Mac line ends

def test_lone_carriage_returns_are_refused_by_every_text_reader(tmp_path, capsys):
    from elmo_tasks.data import read_data

    text = tmp_path / "mac.txt"
    text.write_bytes(b"the cat sat\rthe dog ran\r")
    assert main(["embed", str(text), str(tmp_path / "o.hdf5")]) == 2
    one_line_error(capsys, "mac.txt:1: a carriage return", "old-Mac line ends")
    assert not (tmp_path / "o.hdf5").exists()
    tsv = tmp_path / "mac.tsv"
    tsv.write_bytes(b"pos\ta fine film\rneg\ta dull film\r")
    with pytest.raises(ValueError, match="mac.tsv:1: a carriage return"):
        read_data("tsv", tsv)
    conll = tmp_path / "mac.conll"
    conll.write_bytes(b"John NNP B-NP B-PER\rsat VBD B-VP O\r")
    with pytest.raises(ValueError, match="mac.conll:1: a carriage return"):
        read_data("conll2003", conll)
    crlf = tmp_path / "dos.txt"  # Windows line ends stay fine
    crlf.write_bytes(b"the cat sat\r\nthe dog ran\r\n")
    assert main(["embed", str(crlf), str(tmp_path / "dos.hdf5"), "--progress", "off"]) == 0


# ---------------------------------------------------------------- data or settings that measure nothing

def test_training_data_with_one_label_is_refused(tmp_path, capsys):
    env = make_env(tmp_path)
    one = tmp_path / "one.tsv"
    one.write_text("pos\ta fine film\npos\ta great cast\npos\tgood\n")
    (tmp_path / "other.tsv").write_text("pos\ta film\nneg\ta bad cast\n")
    cfg = tagging_config(env)
    cfg.update(data={"reader": "tsv", "train": str(one), "dev": str(tmp_path / "other.tsv"),
                     "test": str(tmp_path / "other.tsv")},
               head={"name": "sentence_classifier", "hidden_dim": 4})
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["run", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "run"), "--cache-dir", "none"]) == 2
    one_line_error(capsys, "one.tsv: every training example has the label 'pos'", "measures nothing")
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_a_transformer_layer_listed_twice_is_refused(tmp_path):
    from elmo_features.util.errors import ConfigError
    from elmo_tasks.components import resolve_component
    from elmo_tasks.registry import FEATURES

    with pytest.raises(ConfigError, match=r"layers: \[2\] listed twice"):
        resolve_component(FEATURES, {"name": "transformer", "model": "minilm-l6", "layers": [2, 4, 2]}, "features")


# ---------------------------------------------------------------- the Python API checks its inputs as the CLI does

def test_transformer_embedder_refuses_layers_that_are_not_integers(tmp_path):
    from encoder_helpers import make_bert
    from elmo_features.encoders import EncoderError, TransformerEmbedder, load_encoder

    encoder = load_encoder(str(make_bert(tmp_path / "bert")))
    for layers in ([2.7], [True, False], ["1"]):
        with pytest.raises(EncoderError, match="not integer hidden-state indices"):
            TransformerEmbedder(encoder, layers=layers)
    with pytest.raises(EncoderError, match="names a hidden state twice"):
        TransformerEmbedder(encoder, layers=[1, -encoder.num_hidden_states + 1])
    import numpy as np

    assert TransformerEmbedder(encoder, layers=[np.int64(1)]).layers == [1]  # NumPy integers are integers


def test_hub_tokens_signature_refuses_string_rows_and_takes_numpy_lengths():
    import numpy as np
    from elmo_features.hub import ElmoHub
    from elmo_features.util.errors import UsageError

    hub = ElmoHub("default")
    with pytest.raises(UsageError, match=r"tokens\[0\] is str 'the cat sat', not a list of tokens"):
        hub({"tokens": ["the cat sat", "dogs run"], "sequence_len": [3, 2]}, signature="tokens")
    with pytest.raises(UsageError, match=r"sequence_len\[0\] = 2.5 is not an integer"):
        hub({"tokens": [["the", "cat"]], "sequence_len": [2.5]}, signature="tokens")
    a = hub({"tokens": [["the", "cat", ""]], "sequence_len": [np.int64(2)]}, signature="tokens", as_dict=True)
    b = hub({"tokens": np.array([["the", "cat", ""]]), "sequence_len": np.array([2])}, signature="tokens",
            as_dict=True)
    assert a["elmo"].shape == b["elmo"].shape and (a["elmo"] == b["elmo"]).all()


def test_embed_refuses_a_flag_that_does_not_apply(tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("the cat sat\n")
    assert main(["embed", str(text), str(tmp_path / "o.hdf5"), "--subword-pooling", "first"]) == 2
    one_line_error(capsys, "--subword-pooling applies to --transformer only")


# ---------------------------------------------------------------- two writers of one output folder

def _compare_config(tmp_path, name="tiny_ner"):
    env = make_env(tmp_path)
    cfg = tagging_config(env, features={"name": "static", "path": str(env["glove"])}, max_epochs=1)
    cfg.update(name=name, compare={"sources": {"glove": {"name": "static", "path": str(env["glove"])}}, "seeds": [1]})
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return ["compare", str(path), "--runs-dir", str(tmp_path / "runs"), "--progress", "off", "--cache-dir", "none"]


def test_two_comparisons_never_share_a_results_folder(tmp_path, capsys):
    from elmo_features.util.locking import OutputLock
    from elmo_tasks.experiment.preflight import RESULTS_LOCK

    res = tmp_path / "res"
    common = [*_compare_config(tmp_path), "--results-dir", str(res)]
    with OutputLock(res / RESULTS_LOCK, "a comparison at work"):  # another comparison writes there right now
        assert main(common) == 2
        one_line_error(capsys, f"the results folder {res} is being written by another process")
    assert not (res / "summary.json").exists()
    assert main(common) == 0 and main(common) == 0  # rewriting its own config's results is how they are refreshed
    other = [*_compare_config(tmp_path / "b", name="other_ner"), "--results-dir", str(res)]
    capsys.readouterr()
    assert main(other) == 2  # another config's comparison would replace this one's summary
    one_line_error(capsys, "holds the results of another config ('tiny_ner', this one is 'other_ner')")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my own file")
    assert main([*_compare_config(tmp_path), "--results-dir", str(mine)]) == 2
    one_line_error(capsys, "the folder is not empty and holds no summary.json of this command")
    assert (mine / "notes.txt").read_text() == "my own file"


def test_a_wsd_rerun_never_mixes_key_files_or_deletes_a_finished_head(tmp_path, capsys, monkeypatch):
    from plugin_fixture import write_wsd

    write_wsd(tmp_path)  # a tiny WSD task (train/test/wordnet); its config names a plugin source: use GloVe here
    make_env(tmp_path)
    cfg = yaml.safe_load((tmp_path / "wsd.yaml").read_text())
    (tmp_path / "w.txt").write_text("w0 0.1 0.2\nw1 0.3 0.1\nw2 0.5 0.5\nbank 1 0\nrun 0 1\n")
    cfg.update(sources={"a": {"name": "static", "path": str(tmp_path / "w.txt")},
                        "b": {"name": "static", "path": str(tmp_path / "w.txt")}}, features=["a", "b"],
               head={"name": "wsd_linear"}, probes=False, head_dev_every=0, training={"max_epochs": 1})
    (tmp_path / "wsd.yaml").write_text(yaml.safe_dump(cfg))
    base = ["wsd", "--config", str(tmp_path / "wsd.yaml"), "--out", str(tmp_path / "o"), "--no-plot", "--progress",
            "off", "--cache-dir", "none"]
    monkeypatch.chdir(tmp_path)  # the default heads folder runs/wsd/heads/o/STAMP goes here
    assert main([*base, "--runs-dir", str(tmp_path / "heads")]) == 0
    assert {p.name for p in (tmp_path / "o" / "keys").iterdir()} >= {"a-knn-layer0", "b-knn-layer0"}
    head = tmp_path / "heads" / "a-wsd_linear" / "metrics.json"
    before = head.read_bytes()
    capsys.readouterr()
    assert main([*base, "--runs-dir", str(tmp_path / "heads")]) == 2  # a finished head is never deleted
    one_line_error(capsys, "holds finished runs (a-wsd_linear, b-wsd_linear)")
    assert head.read_bytes() == before
    assert main([*base, "--features", "a"]) == 2  # fewer sources would drop rows of the table: refused
    one_line_error(capsys, "would drop or change (b)")
    assert main(base) == 0  # the same settings, heads in a new time-stamped folder
    assert {p.name for p in (tmp_path / "o" / "keys").iterdir()} == {"wn_first_sense", "mfs", "a-knn-layer0",
                                                                     "a-wsd_linear", "b-knn-layer0",
                                                                     "b-wsd_linear"}  # no stale key folders
    assert head.read_bytes() == before
    rows = json.loads((tmp_path / "o" / "scores.json").read_text())["rows"]
    assert {r["id"] for r in rows} == {"wn_first_sense", "mfs", "a-knn-layer0", "a-wsd_linear", "b-knn-layer0",
                                       "b-wsd_linear"}


def test_eval_bilm_refuses_a_vocabulary_in_another_order_and_train_bilm_one_word(tmp_path, capsys):
    corpus = _text(tmp_path / "a.txt", "the cat sat on a mat".split())
    config = tmp_path / "bilm.yaml"
    out = tmp_path / "run"
    config.write_text(yaml.safe_dump({**SMALL, "train_files": [str(corpus)], "out_dir": str(out),
                                      "heldout_file": str(corpus)}))  # an evaluation point exports the model
    assert main(["train-bilm", "--config", str(config), "--progress", "off"]) == 0
    export = out / "export"
    args = ["eval-bilm", "--options", str(export / "options.json"), "--weights", str(export / "weights.hdf5"),
            str(corpus)]
    assert main([*args, "--vocab", str(export / "vocab.txt")]) == 0
    words = (export / "vocab.txt").read_text().split("\n")
    swapped = tmp_path / "vocab.txt"  # the right size, two words swapped
    swapped.write_text("\n".join(words[:3] + [words[4], words[3]] + words[5:]))
    capsys.readouterr()
    assert main([*args, "--vocab", str(swapped)]) == 2
    one_line_error(capsys, "not the vocabulary the softmax", "the perplexity would be wrong")
    one = _text(tmp_path / "one.txt", ["word"])
    config.write_text(yaml.safe_dump({**SMALL, "train_files": [str(one)], "out_dir": str(tmp_path / "r1")}))
    assert main(["train-bilm", "--config", str(config), "--progress", "off"]) == 2
    one_line_error(capsys, "the vocabulary holds 1 word(s)", "would measure nothing")


def test_eval_bilm_refuses_a_softmax_exported_with_another_bilm(tmp_path, capsys):
    corpus = _text(tmp_path / "a.txt", "the cat sat on a mat".split())
    exports = []
    for seed in (1, 2):  # two biLMs of the same shapes and vocabulary, other weights
        config = tmp_path / f"bilm{seed}.yaml"
        out = tmp_path / f"run{seed}"
        config.write_text(yaml.safe_dump({**SMALL, "train_files": [str(corpus)], "out_dir": str(out),
                                          "heldout_file": str(corpus), "seed": seed}))
        assert main(["train-bilm", "--config", str(config), "--progress", "off"]) == 0
        exports.append(out / "export")
    a, b = exports
    args = ["eval-bilm", "--options", str(a / "options.json"), "--weights", str(a / "weights.hdf5"),
            "--vocab", str(a / "vocab.txt"), str(corpus)]
    capsys.readouterr()
    own = tmp_path / "own_softmax.hdf5"
    shutil.copy(a / "weights.hdf5", own)
    assert main([*args, "--softmax", str(own)]) == 0  # its own softmax, from a copy: the digests agree
    assert main([*args, "--softmax", str(b / "weights.hdf5")]) == 2
    one_line_error(capsys, "this softmax was trained with another biLM than", "the perplexity would be wrong")

"""Hostile round three, the runtime's cases: Python API arguments (batch_to_ids, Embedder, TransformerEmbedder,
ScalarMix, ElmoHub, resolve_bilm, BiLM.forward), weight files whose options leave layers out or list a word twice,
encoder folders without a tokenizer or with ids past the embeddings, and train-bilm's out_dir, filter widths and
export without a held-out file."""
from __future__ import annotations

import json
import shutil

import h5py
import numpy as np
import pytest
import torch
import yaml

from encoder_helpers import make_bert
from test_tasks_helpers import TINY_OPTIONS, make_bilm
from elmo_features import BiLM, BiLMOptions, ConfigError, Embedder, ScalarMix, WeightFileError, batch_to_ids, \
    load_bilm, resolve_bilm, save_bilm
from elmo_features.encoders import EncoderError, TransformerEmbedder, load_encoder
from elmo_features.hub import ElmoHub
from elmo_features.model.token_vectors import TokenVectors
from elmo_features.training.config import TrainConfig
from elmo_features.training.trainer import Trainer
from elmo_tasks.cli import main

SMALL = dict(char_embedding_dim=4, filters=[[1, 4], [2, 8]], n_highway=1, lstm_dim=8, projection_dim=4,
             vocab_size=20, n_negative_samples=4, batch_tokens=200, max_train_tokens=400, eval_every_tokens=10_000,
             warmup_steps=2, threads=1)


@pytest.fixture(scope="module")
def bilm_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bilm") / "bilm"
    make_bilm(folder)
    return folder


@pytest.fixture(scope="module")
def bilm(bilm_dir):
    return load_bilm(bilm_dir / "options.json", bilm_dir / "weights.hdf5")


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return make_bert(tmp_path_factory.mktemp("bert") / "bert")


# ------------------------------------------------------------------ Python API arguments (56-66)

def test_batch_to_ids_checks_every_sentence_and_token():  # 56, 57
    with pytest.raises(TypeError, match=r"sentence 1 is a str \('cat'\)"):
        batch_to_ids([["a", "b"], "cat"])
    for tok, kind in ((3, "int: 3"), (None, "NoneType: None"), (b"ab", "bytes: b'ab'")):
        with pytest.raises(TypeError, match=f"sentence 0 has a token of type {kind}"):
            batch_to_ids([["a", tok]])
    with pytest.raises(TypeError, match="sentence 1 is NoneType"):
        batch_to_ids([["a"], None])


def test_batch_to_ids_takes_numpy_rows():  # 58
    want = batch_to_ids([["a", "b"], ["cat"]])
    assert torch.equal(batch_to_ids([np.array(["a", "b"]), np.array(["cat"])]), want)
    assert torch.equal(batch_to_ids(np.array([["a", "b"]])), want[:1])


def test_embedder_sizes_must_be_integers(bilm):  # 59
    with pytest.raises(TypeError, match="batch_size must be an integer, got str: '4'"):
        Embedder(bilm, batch_size="4")
    with pytest.raises(TypeError, match="batch_size must be an integer, got float: 1.5"):
        Embedder(bilm, batch_size=1.5)
    with pytest.raises(ValueError, match="max_tokens_per_batch must be >= 1, got 0"):
        Embedder(bilm, max_tokens_per_batch=0)


def test_scalar_mix_refuses_non_finite_values_and_wrong_types():  # 60, 61
    for initial, shown in (([float("nan")] * 3, "nan"), ([float("inf"), 0, 0], "inf"), ([1e39, 0, 0], "1e\\+39")):
        with pytest.raises(ValueError, match=f"initial\\[0\\] must be a finite number .*got {shown}"):
            ScalarMix(3, initial=initial)
    with pytest.raises(ValueError, match="l2_coef must be a finite number.*got nan"):
        ScalarMix(3, l2_coef=float("nan"))
    with pytest.raises(ValueError, match="l2_coef must be >= 0.0, got -1"):
        ScalarMix(3, l2_coef=-1.0)
    with pytest.raises(TypeError, match="num_layers must be an integer, got float: 2.5"):
        ScalarMix(2.5)
    with pytest.raises(TypeError, match="num_layers must be an integer, got str: '3'"):
        ScalarMix("3")
    with pytest.raises(TypeError, match=r"initial\[1\] must be a number, got str"):
        ScalarMix(2, initial=[0.0, "x"])
    assert ScalarMix(np.int64(2), initial=np.zeros(2)).normalized_weights().tolist() == [0.5, 0.5]


def test_elmohub_trainable_must_be_a_bool(bilm):  # 62
    with pytest.raises(TypeError, match="trainable must be True or False, got str: 'no'"):
        ElmoHub(bilm, trainable="no")
    with pytest.raises(TypeError, match="trainable must be True or False"):
        ScalarMix(3, trainable=1)


def test_empty_tokens_are_refused_everywhere_as_elmohub_does(bilm, bert):  # 63
    bad = [["a", "", "cat"]]
    for call in (lambda s: batch_to_ids(s), lambda s: Embedder(bilm).embed_sentences(s),
                 lambda s: TransformerEmbedder(load_encoder(str(bert))).embed_sentences(s)):
        with pytest.raises(ValueError, match="sentence 0 has an empty or whitespace-only token at position 1: ''"):
            call(bad)
        with pytest.raises(ValueError, match="sentence 1 has an empty or whitespace-only token at position 1: ' '"):
            call([["a"], ["a", " "]])
    with pytest.raises(ValueError, match="tokens\\[0\\] has an empty or whitespace-only token at position 1"):
        ElmoHub(bilm)({"tokens": bad, "sequence_len": [3]}, signature="tokens")


def test_resolve_bilm_refuses_an_empty_spec():  # 64
    for spec in ("", "  "):
        with pytest.raises(ValueError, match="biLM spec .* is empty"):
            resolve_bilm(spec)


def test_embedder_takes_a_model_spec_or_names_the_type(bilm, bilm_dir):  # 65
    want = Embedder(bilm).embed_sentence(["the", "cat"])
    np.testing.assert_array_equal(Embedder(str(bilm_dir)).embed_sentence(["the", "cat"]), want)
    for spec in (None, 3):
        with pytest.raises(TypeError, match=f"bilm must be a BiLM .*got {type(spec).__name__}"):
            Embedder(spec)


def test_bilm_forward_checks_dtype_and_range(bilm):  # 66
    with pytest.raises(TypeError, match="char_ids must be an integer tensor .*got torch.float32"):
        bilm(torch.zeros(1, 3, 50))
    with pytest.raises(ValueError, match="char_ids must be in 0..261 .*got 999"):
        bilm(torch.full((1, 3, 50), 999, dtype=torch.long))
    with pytest.raises(ValueError, match="got -1"):
        bilm(torch.full((1, 3, 50), -1, dtype=torch.long))
    assert bilm(batch_to_ids([["a"]]).int()).layers.shape[:3] == (3, 1, 1)


# ------------------------------------------------------------------ weight files (22, 26)

def test_options_that_leave_out_highway_or_filter_layers_are_refused(bilm_dir, tmp_path):  # 22
    opts = json.loads((bilm_dir / "options.json").read_text())
    opts["char_cnn"]["n_highway"] = 0
    (tmp_path / "o.json").write_text(json.dumps(opts))
    with pytest.raises(WeightFileError, match="has dataset 'CNN_high_0', but the options say char_cnn.n_highway is 0"):
        load_bilm(tmp_path / "o.json", bilm_dir / "weights.hdf5")
    opts = json.loads((bilm_dir / "options.json").read_text())
    opts["char_cnn"]["filters"] = opts["char_cnn"]["filters"][:2]
    (tmp_path / "o.json").write_text(json.dumps(opts))
    with pytest.raises(WeightFileError, match="has dataset 'CNN/W_cnn_2', but the options say char_cnn.filters has 2"):
        load_bilm(tmp_path / "o.json", bilm_dir / "weights.hdf5")


def test_token_vector_word_listed_twice_is_refused(tmp_path):  # 26
    options = BiLMOptions.from_dict({**TINY_OPTIONS, "token_vectors": {"dim": 3, "n_words": 3}})
    model = BiLM(options)
    model.char_cnn.token_vectors = TokenVectors(["the", "cat", "to"], np.eye(3, dtype=np.float32))
    save_bilm(model, tmp_path / "options.json", tmp_path / "weights.hdf5")
    load_bilm(tmp_path / "options.json", tmp_path / "weights.hdf5")  # as written: fine
    with h5py.File(tmp_path / "weights.hdf5", "a") as f:
        words = f["token_vectors/words"][()]
        words[2] = words[0]
        del f["token_vectors/words"]
        f["token_vectors/words"] = words
    with pytest.raises(WeightFileError, match=r"'token_vectors/words' lists 'the' twice \(rows 0 and 2\)"):
        load_bilm(tmp_path / "options.json", tmp_path / "weights.hdf5")


# ------------------------------------------------------------------ encoder folders (24, 25)

def test_encoder_folder_without_tokenizer_files_is_refused(bert, tmp_path, capsys):  # 25
    folder = tmp_path / "enc"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(bert / name, folder / name)
    with pytest.raises(EncoderError, match="enc: no tokenizer files \\(tokenizer.json, vocab.txt"):
        load_encoder(str(folder))
    (tmp_path / "t.txt").write_text("the cat\n")
    assert main(["embed", str(tmp_path / "t.txt"), str(tmp_path / "o.hdf5"), "--transformer", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no tokenizer files" in err


def test_tokenizer_ids_past_the_embeddings_are_refused_at_load(bert, tmp_path):  # 24
    folder = tmp_path / "enc"
    shutil.copytree(bert, folder)
    tok = json.loads((folder / "tokenizer.json").read_text())
    tok["model"]["vocab"]["zzzq"] = 500
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    n = json.loads((folder / "config.json").read_text())["vocab_size"]
    with pytest.raises(EncoderError, match=f"tokenizer.json has ids up to 500 \\('zzzq'\\) but the model has {n} "
                                           f"embeddings \\(config.json vocab_size {n}\\)"):
        load_encoder(str(folder))


# ------------------------------------------------------------------ train-bilm (7, 42, 55)

def _corpus(tmp_path):
    words = "the cat sat on a mat dogs run fast".split()
    path = tmp_path / "a.txt"
    path.write_text("".join(" ".join(words[(i + k) % len(words)] for k in range(6)) + "\n" for i in range(40)))
    return path


def test_train_bilm_refuses_an_out_dir_of_other_files(tmp_path, capsys):  # 7
    run = tmp_path / "run1"
    run.mkdir()
    (run / "config.yaml").write_text("name: a task run\n")
    (run / "model.pt").write_bytes(b"x")
    config = tmp_path / "t.yaml"
    config.write_text(yaml.safe_dump({**SMALL, "train_files": [str(_corpus(tmp_path))], "out_dir": str(run)}))
    assert main(["train-bilm", "--config", str(config), "--progress", "off"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds other files (config.yaml, model.pt) and is not a train-bilm folder" in err
    assert (run / "config.yaml").read_text() == "name: a task run\n" and sorted(p.name for p in run.iterdir()) == [
        "config.yaml", "model.pt"]


def test_filter_wider_than_a_token_is_a_config_error():  # 42
    with pytest.raises(ConfigError, match=r"filters\[1\]: width 51 > 50 characters per token"):
        TrainConfig.from_dict({**SMALL, "filters": [[1, 4], [51, 4]]})
    opts = json.loads(json.dumps(TINY_OPTIONS))
    opts["char_cnn"]["filters"][0] = [60, 4]
    with pytest.raises(ConfigError, match=r"char_cnn.filters\[0\]: width 60 > max_characters_per_token \(50\)"):
        BiLMOptions.from_dict(opts)


def test_finished_run_without_heldout_file_exports(tmp_path):  # 55
    torch.set_num_threads(1)
    cfg = TrainConfig.from_dict({**SMALL, "train_files": [str(_corpus(tmp_path))], "out_dir": str(tmp_path / "out")})
    assert Trainer(cfg, progress=False).run()["finished"]
    export = tmp_path / "out" / "export"
    model = load_bilm(export / "options.json", export / "weights.hdf5")
    assert (export / "vocab.txt").exists() and model.num_output_layers == 3

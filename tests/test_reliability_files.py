"""Damaged files (options JSON, weights HDF5, run folders) and the shared text-input policy."""
from __future__ import annotations

import copy
import json

import h5py
import numpy as np
import pytest
import torch
import yaml

from elmo_features import BiLMOptions, ConfigError, WeightFileError, load_bilm
from elmo_features.embedding.embed_input import EmbedInput
from elmo_features.util.errors import CheckpointError, TextInputError
from elmo_features.util.text_input import iter_sentences, read_sentences
from elmo_features.training.data import read_sentences as corpus_read
from elmo_tasks.data.conll import read_conll2003
from elmo_tasks.experiment.preflight import check_run_folder
from test_tasks_helpers import CONLL_TEST, TINY_OPTIONS, make_bilm, tagging_config

# ------------------------------------------------------------------ text policy

PLAIN = b"John visited Berlin\nMary met Smith\n"


@pytest.mark.parametrize("variant", [b"\xef\xbb\xbf" + PLAIN, PLAIN.replace(b"\n", b"\r\n"), PLAIN.rstrip(b"\n")])
def test_bom_crlf_and_no_final_newline_read_like_plain_text(tmp_path, variant):
    p = tmp_path / "in.txt"
    p.write_bytes(variant)
    want = [["John", "visited", "Berlin"], ["Mary", "met", "Smith"]]
    assert read_sentences(p) == want and list(corpus_read([p])) == want
    assert [line.split() for line in EmbedInput(p).lines()] == want


@pytest.mark.parametrize("data, message", [
    (b"fine\nbad \x00 nul\n", r"in.txt:2: NUL byte at byte column 5"),
    (b"fine\nbad \xff byte\n", r"in.txt:2: not valid UTF-8 \(byte 0xff at byte column 5\)"),
    ("John\n".encode("utf-16"), r"in.txt:1: the file is UTF-16; convert it to UTF-8"),
    (b"", r"in.txt: no sentences"),
])
def test_bad_bytes_and_empty_files_are_errors_naming_file_and_line(tmp_path, data, message):
    p = tmp_path / "in.txt"
    p.write_bytes(data)
    for blank in ("error", "skip"):
        with pytest.raises(TextInputError, match=message):
            read_sentences(p, blank_lines=blank)
    with pytest.raises(TextInputError, match=message):
        list(corpus_read([p]))


def test_a_file_of_blank_lines_has_no_sentences(tmp_path):
    p = tmp_path / "in.txt"
    p.write_bytes(b"\n  \n\r\n")
    with pytest.raises(TextInputError, match=r"in.txt: no sentences"):
        list(corpus_read([p]))
    with pytest.raises(TextInputError, match=r"in.txt:1: blank line"):
        read_sentences(p, blank_lines="error")


def test_blank_lines_error_where_outputs_follow_lines_skipped_in_corpora(tmp_path):
    p = tmp_path / "in.txt"
    p.write_bytes(b"a b\n\n   \nc\n")
    with pytest.raises(TextInputError, match=r"in.txt:2: blank line"):
        read_sentences(p, blank_lines="error")  # embed, predict
    with pytest.raises(TextInputError, match=r"in.txt:2: blank line.*in.txt:3: blank line"):
        EmbedInput(p)  # every problem of the file in one line
    assert list(corpus_read([p])) == [["a", "b"], ["c"]]  # train-bilm, eval-bilm
    assert [n for n, _ in iter_sentences(p)] == [1, 4]


def test_conll_reader_shares_the_policy(tmp_path):
    p = tmp_path / "t.conll"
    p.write_bytes(b"\xef\xbb\xbf" + CONLL_TEST.replace("\n", "\r\n").encode())
    plain = tmp_path / "plain.conll"
    plain.write_text(CONLL_TEST)
    assert [s.tokens for s in read_conll2003(p)] == [s.tokens for s in read_conll2003(plain)]
    p.write_bytes(CONLL_TEST.encode().replace(b"Berlin", b"Berl\xe9n"))
    with pytest.raises(TextInputError, match=r"t.conll:3: not valid UTF-8"):
        read_conll2003(p)


# ------------------------------------------------------------------ options JSON

@pytest.mark.parametrize("edit, message", [
    (lambda d: d["lstm"].update(dim="16"), r"lstm.dim: expected an integer, got '16' \(a string\)"),
    (lambda d: d["lstm"].update(use_skip_connections="false"), r"lstm.use_skip_connections: expected true or false"),
    (lambda d: d["lstm"].update(n_layers=-2), r"lstm.n_layers: must be >= 1, got -2"),
    (lambda d: d["lstm"].update(cell_clip="3"), r"lstm.cell_clip: expected a number"),
    (lambda d: d["char_cnn"].update(filters=[[1, 4], [2]]), r"char_cnn.filters\[1\]: expected a list of 2 item\(s\)"),
    (lambda d: d["char_cnn"].update(filters=[[1, 0]]), r"char_cnn.filters\[0\]\[1\]: must be >= 1"),
    (lambda d: d["char_cnn"].pop("n_highway"), r"char_cnn: missing required key 'n_highway'"),
    (lambda d: d.pop("lstm"), r"missing required key 'lstm'"),
    (lambda d: d["char_cnn"].update(activation="gelu"), r"char_cnn.activation: must be one of 'relu', 'tanh'"),
])
def test_options_schema(tmp_path, edit, message):
    d = copy.deepcopy(TINY_OPTIONS)
    edit(d)
    p = tmp_path / "options.json"
    p.write_text(json.dumps(d))
    with pytest.raises(ConfigError, match=f"options.json: {message}"):
        BiLMOptions.from_file(p)


def test_options_file_that_is_not_json_text(tmp_path):
    p = tmp_path / "options.json"
    p.write_bytes(b"\x89HDF\r\n\x1a\n\xff")
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        BiLMOptions.from_file(p)
    p.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="expected a mapping"):
        BiLMOptions.from_file(p)


# ------------------------------------------------------------------ weights HDF5

@pytest.fixture
def bilm_files(tmp_path):
    return make_bilm(tmp_path / "bilm")


def _edit_weights(path, name, value):
    with h5py.File(path, "a") as f:
        del f[name]
        f.create_dataset(name, data=value)


@pytest.mark.parametrize("damage, message", [
    ("truncate", "unreadable HDF5 file"),
    ("nan", "dataset 'CNN_proj/b_proj' holds NaN or Inf"),
    ("inf16", "dataset 'CNN_proj/b_proj' holds NaN or Inf"),
    ("int", "dataset 'CNN_proj/b_proj' has dtype int64, expected floating point"),
    ("shape", r"dataset 'CNN_proj/b_proj' has shape \(3,\), but the options need \(8,\)"),
    ("missing", "missing dataset 'CNN_proj/b_proj'"),
])
def test_damaged_weights_are_refused(bilm_files, damage, message):
    opts, weights = bilm_files
    if damage == "truncate":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif damage == "missing":
        with h5py.File(weights, "a") as f:
            del f["CNN_proj/b_proj"]
    else:
        value = {"nan": np.full(8, np.nan, np.float32), "inf16": np.full(8, np.inf, np.float16),
                 "int": np.zeros(8, np.int64), "shape": np.zeros(3, np.float32)}[damage]
        _edit_weights(weights, "CNN_proj/b_proj", value)
    with pytest.raises(WeightFileError, match=message):
        load_bilm(opts, weights)


# ------------------------------------------------------------------ run folders for predict

@pytest.fixture
def run_folder(tmp_path, bilm_files):
    opts, weights = bilm_files
    run = tmp_path / "run"
    run.mkdir()
    cfg = tagging_config({"options": opts, "weights": weights, "conll_train": "x", "conll_test": "y"})
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    (run / "vocab.json").write_text(json.dumps({"labels": ["O", "S-PER"], "scheme": "BIOES"}))
    (run / "metrics.json").write_text("{}")
    torch.save({"format": 1, "state_dict": {"w": torch.zeros(2)}}, run / "model.pt")
    return run


def test_run_folder_checks(run_folder):
    check_run_folder(run_folder)  # readable; whether it fits the config is checked when the model is rebuilt
    (run_folder / "vocab.json").write_text("{broken")
    with pytest.raises(CheckpointError, match="vocab.json: damaged"):
        check_run_folder(run_folder)
    (run_folder / "vocab.json").write_text("[]")
    with pytest.raises(CheckpointError, match="expected a JSON object"):
        check_run_folder(run_folder)
    (run_folder / "vocab.json").write_text("{}")
    torch.save({"format": 1, "state_dict": {"w": torch.tensor([float("nan")])}}, run_folder / "model.pt")
    with pytest.raises(CheckpointError, match="hold NaN or Inf"):
        check_run_folder(run_folder)
    torch.save({"epoch": 3}, run_folder / "model.pt")
    with pytest.raises(CheckpointError, match="not a run checkpoint of this project"):
        check_run_folder(run_folder)
    torch.save({"format": 1, "state_dict": {"w": np.zeros(2)}}, run_folder / "model.pt")  # pickled numpy
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):  # weights_only refuses it
        check_run_folder(run_folder)
    (run_folder / "metrics.json").unlink()
    with pytest.raises(CheckpointError, match="the run never finished"):
        check_run_folder(run_folder)


def test_predict_with_a_foreign_model_pt(run_folder, tmp_path, capsys):
    from elmo_tasks.cli import main

    text = tmp_path / "in.txt"
    text.write_text("John met Mary\n")
    assert main(["predict", str(run_folder), str(text), "--cache-dir", "none", "--progress", "off"]) == 2
    err = capsys.readouterr().err
    assert "cannot rebuild the trained model" in err and "do not belong together" in err and "Traceback" not in err

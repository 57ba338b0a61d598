"""Hostile cases (round four, WSD and encoders): a test folder that is the training folder, a test folder without
gold keys, Raganato XML in the encoding it declares, an encoder config.json with an activation transformers lacks."""
from __future__ import annotations

import json
import shutil

import pytest

from elmo_features.encoders import load_encoder
from elmo_features.encoders.loading import EncoderError
from encoder_helpers import make_bert
from elmo_tasks.cli import main
from elmo_tasks.wsd.data.reader import read_data_xml
from test_wsd_cli import toy  # noqa: F401  (the module fixture: a toy WordNet, data sets, biLM and vectors)


def _wsd(toy, out, *tests):
    return main(["wsd", "--config", str(toy / "cfg.yaml"), "--train", str(toy / "train"), "--test", *map(str, tests),
                 "--features", "glove", "--set", "head=null", "--out", str(out), "--no-plot", "--progress", "off"])


def test_wsd_warns_when_a_test_folder_is_the_training_folder(toy, tmp_path, capsys):  # noqa: F811
    assert _wsd(toy, tmp_path / "w", toy / "test", toy / "train" / ".." / "train") == 0
    err = capsys.readouterr().err
    assert f"the test folder {toy / 'train' / '..' / 'train'} is the training folder" in err
    assert "fit to the training data" in err
    assert _wsd(toy, tmp_path / "w2", toy / "test") == 0
    assert "training folder" not in capsys.readouterr().err


def test_wsd_says_a_test_folder_without_gold_keys_is_not_scored(toy, tmp_path, capsys):  # noqa: F811
    assert _wsd(toy, tmp_path / "w", toy / "nogold") == 0
    err = capsys.readouterr().err
    assert f"note: {toy / 'nogold'} has no nogold.gold.key.txt: it is not scored" in err
    assert (tmp_path / "w" / "keys" / "glove-knn-layer0" / "nogold.key.txt").is_file()


def test_raganato_xml_is_read_in_the_encoding_it_declares(toy, tmp_path):  # noqa: F811
    src = next((toy / "test").glob("*.data.xml"))
    text = src.read_text(encoding="utf-8").replace('encoding="UTF-8"', 'encoding="ISO-8859-1"')
    assert 'encoding="ISO-8859-1"' in text
    latin = tmp_path / src.name
    latin.write_bytes(text.replace(">river<", ">rivière<", 1).encode("latin-1"))
    words = [tok for s in read_data_xml(latin) for tok in s.tokens]
    assert "rivière" in words
    bad = tmp_path / "bad.data.xml"  # declared UTF-8 (the default), a latin-1 byte: named, with what to do
    bad.write_bytes(src.read_text(encoding="utf-8").replace(">river<", ">rivière<", 1).encode("latin-1"))
    with pytest.raises(Exception, match=r"bad.data.xml:\d+: malformed XML: .*not in the encoding the file declares"):
        read_data_xml(bad)


def test_encoder_with_an_unknown_activation_names_the_config_key(tmp_path, capsys):
    folder = make_bert(tmp_path / "enc")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "hidden_act": "no_such_act"}))
    with pytest.raises(EncoderError, match=r"config.json: hidden_act 'no_such_act' is not a value transformers knows"):
        load_encoder(str(folder))
    shutil.rmtree(folder)


def test_binary_outputs_refuse_a_device_instead_of_replacing_it(tmp_path, capsys):
    import os
    import stat
    import subprocess
    import sys

    fifo = tmp_path / "pipe"  # a stand-in for /dev/null: a non-regular file a rename would replace
    os.mkfifo(fifo)
    text = tmp_path / "in.txt"
    text.write_text("the cat sat\n")
    r = subprocess.run([sys.executable, "-m", "elmo_tasks.cli", "embed", str(text), str(fifo), "--progress", "off"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "is a pipe, socket or device, not a regular file" in r.stderr, r.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still the pipe
    assert not list(tmp_path.glob("pipe.*"))  # no lock or partial file beside it

"""Hostile cases, list fourteen: a sense file's query recipe (its meta) edited, a comparison recorded before fold
cuts were, a biLM flag switched after its Embedder was built, a train-bilm run too small to move, a refused resume's
first line, a folder in the way of an export file, a UTF-16 options file, one encoder layer given as a number, a
.gz vectors file that is not gzip, and the folder a recorded command ran in."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from tasks.cli import main

from test_reliability_outputs_r3 import senses  # noqa: F401  (a module fixture: a tiny sense file)
from test_reliability_training import SMALL, _text
from test_tasks_helpers import make_bilm, one_line_error, static_config_file

FAST = ["--cache-dir", "none", "--progress", "off"]


def _edit_meta(path: Path, keep_checksum: bool = True, **changes) -> None:
    import h5py

    with h5py.File(path, "a") as f:
        meta = json.loads(f.attrs["meta"]) | changes
        f.attrs["meta"] = json.dumps(meta)
        if not keep_checksum and "meta_sha256" in f.attrs:
            del f.attrs["meta_sha256"]


def test_a_sense_file_whose_meta_was_edited_is_refused(tmp_path, capsys, senses):
    path, text = tmp_path / "s.h5", senses / "in.txt"
    path.write_bytes((senses / "senses.h5").read_bytes())
    assert main(["wsd", "tag", str(text), "--senses", str(path)]) == 0
    _edit_meta(path, layers=[0.0, 0.0, 1.0])  # another layer mix: every query embedded otherwise
    capsys.readouterr()
    assert main(["wsd", "tag", str(text), "--senses", str(path)]) == 2
    one_line_error(capsys, "its meta attribute", "does not match the checksum written with it")
    for bad in ([0.0], [0.0, float("nan"), 1.0], "all"):  # a file from before the checksum: the recipe is checked
        _edit_meta(path, keep_checksum=False, layers=bad)
        assert main(["wsd", "tag", str(text), "--senses", str(path)]) == 2
        one_line_error(capsys, "meta layers", "are not 3 finite weights, one per layer of its feature source")


def _fold_comparison(tmp_path: Path, monkeypatch) -> tuple[list[str], Path]:
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path, compare={"sources": {"g": {"name": "static", "path": "x"}}})
    args = ["compare", cfg, "--set", f"compare.sources={{g: {{name: static, path: {env['glove']}}}}}",
            "--runs-dir", "RR", *FAST, "--seeds", "1"]
    return args, tmp_path / "RR"


def test_a_comparison_recorded_before_fold_cuts_never_reuses_its_fold_runs(tmp_path, capsys, monkeypatch):
    args, rr = _fold_comparison(tmp_path, monkeypatch)
    for folds, name in (("3", "RES"), ("0", "FIX")):
        assert main(args + ["--folds", folds, "--results-dir", name]) == 0
    folded, fixed = sorted(rr.glob("*/compare-*"), key=lambda g: not list(g.glob("*/fold0")))
    for grid in (folded, fixed):
        record = grid / ".data_sha256.json"
        old = json.loads(record.read_text())
        old.pop("folds")  # as an older version wrote it
        record.write_text(json.dumps(old))
    capsys.readouterr()
    for folds in ("4", "3"):
        assert main(args + ["--folds", folds, "--resume", str(folded), "--results-dir", "RES2"]) == 2
        one_line_error(capsys, "does not say which fold cut its fold runs were made on", f"for {folds} folds")
    assert main(args + ["--folds", "3", "--resume", str(fixed), "--results-dir", "RES3"]) == 2
    one_line_error(capsys, "its runs were made on the fixed split, this command asks for 3 folds")
    assert main(args + ["--resume", str(fixed), "--results-dir", "RES4"]) == 0  # the fixed split: its own cut
    assert "reusing the finished run" in capsys.readouterr().out
    assert json.loads((fixed / ".data_sha256.json").read_text())["folds"] == {"folds": None, "fold_seed": None}


def test_a_refused_resume_says_only_why(tmp_path, capsys, monkeypatch):
    args, rr = _fold_comparison(tmp_path, monkeypatch)
    assert main(args + ["--results-dir", "RES"]) == 0
    grid = next(rr.glob("*/compare-*"))
    capsys.readouterr()
    assert main(args + ["--folds", "3", "--resume", str(grid), "--results-dir", "RES2"]) == 2
    err = capsys.readouterr().err
    assert "running the whole comparison" not in err and "its runs were made on the fixed split" in err


def test_an_embedder_refuses_a_bilm_switched_to_keep_sentence_boundaries(tmp_path):
    from elmo_features import Embedder, FeatureCache, load_bilm

    bilm = load_bilm(*map(str, make_bilm(tmp_path / "bilm")))
    embedder = Embedder(bilm)
    s = [["the", "cat", "sat"]]
    before = embedder.embed_sentences(s)[0]
    bilm.keep_sentence_boundaries = True
    for call in (lambda: embedder.embed_sentences(s), lambda: FeatureCache(tmp_path / "C").embed(embedder, s)):
        with pytest.raises(ValueError, match="keep_sentence_boundaries=False .*shifting every word by one"):
            call()
    bilm.keep_sentence_boundaries = False
    np.testing.assert_array_equal(embedder.embed_sentences(s)[0], before)


def test_train_bilm_that_learns_nothing_says_so(tmp_path, capsys):
    corpus = _text(tmp_path / "a.txt", "the cat sat on a mat".split())
    (tmp_path / "held.txt").write_text("the cat sat\n")
    base = {**SMALL, "train_files": [str(corpus)], "heldout_file": str(tmp_path / "held.txt")}
    for name, extra, warned in (("still", {"clip_norm": 1e-30}, True), ("moving", {}, False)):
        config = tmp_path / f"{name}.yaml"
        config.write_text(yaml.safe_dump({**base, **extra, "out_dir": str(tmp_path / name)}))
        capsys.readouterr()
        assert main(["train-bilm", "--config", str(config), "--progress", "off"]) == 0
        err = capsys.readouterr().err
        assert ("no parameter moved by more than 1e-12 since the last evaluation" in err) is warned, err
        if warned:
            assert err.count("nothing is being learned") == 1 and "raise clip_norm or lr" in err


def test_a_folder_in_the_way_of_an_export_file_is_named(tmp_path, capsys):
    from test_reliability_training import finished_bilm_run

    args = finished_bilm_run(tmp_path)
    options = tmp_path / "run" / "export" / "options.json"
    options.unlink()
    options.mkdir()
    (options / "mine.txt").write_text("keep\n")
    capsys.readouterr()
    assert main(args + ["--resume"]) == 2
    one_line_error(capsys, str(options), "a folder is in the way of the export's options.json")
    assert (options / "mine.txt").read_text() == "keep\n"


def test_a_utf16_options_file_is_named_as_utf16(tmp_path):
    from elmo_features import load_bilm
    from elmo_features.util.errors import ConfigError

    opts, weights = make_bilm(tmp_path / "bilm")
    u16 = tmp_path / "o16.json"
    u16.write_text(opts.read_text(), encoding="utf-16")
    with pytest.raises(ConfigError, match="the file is UTF-16; convert it to UTF-8") as e:
        load_bilm(str(u16), str(weights))
    assert "weights file" not in str(e.value)
    with pytest.raises(ConfigError, match="is this the weights file"):
        load_bilm(str(weights), str(opts))  # swapped: HDF5 as options


def test_one_encoder_layer_given_as_a_number_is_named(tmp_path):
    from elmo_features.encoders import TransformerEmbedder
    from encoder_helpers import make_bert

    folder = str(make_bert(tmp_path / "enc"))
    with pytest.raises(TypeError, match=r"layers must be 'all' or a list .*got int: 2 \(for one layer: \[2\]\)"):
        TransformerEmbedder(folder, layers=2)
    for bad in (2.0, True):
        with pytest.raises(TypeError, match=f"layers must be 'all' or a list .*got {type(bad).__name__}"):
            TransformerEmbedder(folder, layers=bad)
    assert TransformerEmbedder(folder, layers=(2,)).layers == [2]


def test_a_gz_vectors_file_that_is_not_gzip_is_named(tmp_path, capsys, monkeypatch):
    from tasks.data.static_vectors import load_static_vectors

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    fake = tmp_path / "fake.txt.gz"
    fake.write_bytes(Path(env["glove"]).read_bytes())
    assert main(["run", cfg, "--out", "R", "--set", f"features.path={fake}", *FAST]) == 2
    one_line_error(capsys, str(fake), "not a gzip file")
    cut = tmp_path / "cut.txt.gz"
    cut.write_bytes(gzip.compress(Path(env["glove"]).read_bytes())[:-20])
    with pytest.raises(Exception, match=f"{cut}: the gzip file is truncated"):
        load_static_vectors(cut)


def test_recorded_commands_say_the_folder_they_ran_in(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert main(["run", "../c.yaml", "--out", "../R", *FAST]) == 0
    m = json.loads((tmp_path / "R" / "metrics.json").read_text())
    assert m["command"].startswith("elmo-tasks run ../c.yaml --out ../R") and m["cwd"] == str(tmp_path / "sub")

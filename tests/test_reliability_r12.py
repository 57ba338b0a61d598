"""Hostile cases, round three, the short pass on the newest fixes: predict --out judged against the files a run read
(where it ran, not where predict runs), saved runs with a fixed penalised mix, the biLM fingerprint under a
sum-preserving edit, gloss caches from before checksums, damaged exports and an export path taken by a file."""
from __future__ import annotations

import os
from pathlib import Path

import yaml

from tasks.cli import main

from test_reliability_training import finished_bilm_run
from test_tasks_helpers import one_line_error, static_config_file

FAST = ["--cache-dir", "none", "--progress", "off"]


def _relative_run(tmp_path: Path, monkeypatch) -> dict:
    """A finished run R whose config names its data by paths relative to tmp_path (the folder it ran in)."""
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    raw = yaml.safe_load(Path(cfg).read_text())
    for k in ("train", "dev", "test"):
        raw["data"][k] = os.path.relpath(raw["data"][k], tmp_path)
    Path(cfg).write_text(yaml.safe_dump(raw))
    assert main(["run", cfg, "--out", "R", *FAST]) == 0
    (tmp_path / "in.txt").write_text("John lives in Paris\n")
    (tmp_path / "sub").mkdir()
    return raw["data"]


def test_predict_from_another_folder_never_writes_onto_the_runs_data_named_relatively(tmp_path, capsys, monkeypatch):
    data = _relative_run(tmp_path, monkeypatch)
    test_file = tmp_path / data["test"]
    before = test_file.read_bytes()
    monkeypatch.chdir(tmp_path / "sub")
    capsys.readouterr()
    assert main(["predict", "../R", "../in.txt", "--out", str(test_file)]) == 2
    one_line_error(capsys, "--out", "would destroy the input")
    os.symlink(test_file, tmp_path / "sub" / "lnk")
    assert main(["predict", "../R", "../in.txt", "--out", "lnk"]) == 2
    one_line_error(capsys, "would destroy the input")
    assert test_file.read_bytes() == before


def test_predict_from_another_folder_writes_a_file_that_only_shares_the_runs_relative_data_name(tmp_path, capsys,
                                                                                                 monkeypatch):
    data = _relative_run(tmp_path, monkeypatch)
    mine = tmp_path / "sub" / data["test"]
    mine.parent.mkdir(parents=True, exist_ok=True)
    mine.write_text("my own file\n")
    monkeypatch.chdir(tmp_path / "sub")
    assert main(["predict", "../R", "../in.txt", "--out", data["test"]]) == 0
    assert "Paris" in mine.read_text()
    assert (tmp_path / data["test"]).read_text() != mine.read_text()


def test_a_run_saved_with_a_penalised_fixed_mix_still_predicts_with_a_warning(tmp_path, capsys, monkeypatch):
    import tasks.features.mix as mix
    from test_tasks_helpers import elmo_section

    env, cfg = static_config_file(tmp_path)
    raw = yaml.safe_load(Path(cfg).read_text())
    raw["features"] = elmo_section(env, mix={"name": "scalar", "trainable": False, "l2_coef": 0.001})
    Path(cfg).write_text(yaml.safe_dump(raw))
    assert main(["run", cfg, "--out", str(tmp_path / "new"), *FAST]) == 2  # a new run is refused
    one_line_error(capsys, "l2_coef: 0.001 penalises the mix weights, but trainable is false")
    with monkeypatch.context() as m:  # a run made before the rule existed
        m.setattr(mix, "settings_rule", lambda message: None)
        assert main(["run", cfg, "--out", str(tmp_path / "R"), *FAST]) == 0
    (tmp_path / "in.txt").write_text("John lives in Paris\n")
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "R"), str(tmp_path / "in.txt"), "--progress", "off"]) == 0
    captured = capsys.readouterr()
    assert "Paris" in captured.out
    assert "warning:" in captured.err and "l2_coef: 0.001 penalises" in captured.err


def test_the_fingerprint_changes_when_rows_are_swapped_through_data():
    import torch

    from elmo_features import BiLM, BiLMOptions
    from elmo_features.embedding.feature_cache import bilm_fingerprint
    from test_tasks_helpers import TINY_OPTIONS

    torch.manual_seed(0)
    bilm = BiLM(BiLMOptions.from_dict(TINY_OPTIONS))
    first = bilm_fingerprint(bilm)
    w = bilm.char_cnn.char_embedding.weight
    w.data[[1, 2]] = w.data[[2, 1]]  # the same values, moved: the sum and the version counter stay
    swapped = bilm_fingerprint(bilm)
    assert swapped != first
    fresh = BiLM(BiLMOptions.from_dict(TINY_OPTIONS))
    fresh.load_state_dict(bilm.state_dict())
    assert bilm_fingerprint(fresh) == swapped  # what a freshly loaded biLM with those weights gets


def test_a_gloss_cache_from_before_checksums_is_kept_and_a_verified_one_is_not_read_again(tmp_path, capsys,
                                                                                          monkeypatch):
    import json

    import numpy as np

    from tasks.wsd import gloss_cache, senses
    from tasks.wsd.data.wordnet import WordNet
    from tasks.wsd.senses import Graph
    from test_wsd_senses import _Glosses, write_wordnet

    graph = Graph(WordNet(write_wordnet(tmp_path / "wn")))
    whole = senses.gloss_layers(graph, _Glosses(), "fp", tmp_path, progress=False)
    store = gloss_cache.GlossStore(tmp_path, "fp", senses.POOLINGS, len(graph.keys), senses.GLOSS_CHUNK)
    progress = store.folder / gloss_cache.PROGRESS
    old = json.loads(progress.read_text())
    for k in ("crc32", "verified"):
        del old[k]  # as every cache finished before checksums were recorded
    progress.write_text(json.dumps(old))
    capsys.readouterr()
    source = _Glosses()
    kept = senses.gloss_layers(graph, source, "fp", tmp_path, progress=False)
    assert source.calls == 0 and "written before checksums were recorded" in capsys.readouterr().err
    np.testing.assert_array_equal(kept["lemma"], whole["lemma"])
    assert "crc32" in json.loads(progress.read_text())
    reads = []
    monkeypatch.setattr(gloss_cache.GlossStore, "_checksums", lambda self: reads.append(1) or {})
    senses.gloss_layers(graph, _Glosses(), "fp", tmp_path, progress=False)
    assert reads == []  # unchanged since verified: not read in full again


def test_resume_rewrites_an_export_whose_vocab_or_weights_are_not_the_models(tmp_path, capsys):
    import h5py

    args = finished_bilm_run(tmp_path)
    export = tmp_path / "run" / "export"
    vocab = (export / "vocab.txt").read_bytes()
    (export / "vocab.txt").write_bytes(b"")  # emptied
    capsys.readouterr()
    assert main(args + ["--resume"]) == 0
    assert "vocab.txt is not the trained model's vocabulary; written again" in capsys.readouterr().err
    assert (export / "vocab.txt").read_bytes() == vocab
    with h5py.File(export / "weights.hdf5", "a") as f:  # a group deleted: the file still opens
        del f[next(n for n in f if n != "softmax")]
    assert main(args + ["--resume"]) == 0
    assert "weights.hdf5 does not hold the trained model's weights" in capsys.readouterr().err
    assert main(["eval-bilm", "--options", str(export / "options.json"), "--weights", str(export / "weights.hdf5"),
                 "--vocab", str(export / "vocab.txt"), str(tmp_path / "held.txt")]) == 0
    assert main(args + ["--resume"]) == 0
    assert "written again" not in capsys.readouterr().err  # whole: left as it is


def test_an_export_path_taken_by_a_file_is_one_clear_error(tmp_path, capsys):
    import shutil

    args = finished_bilm_run(tmp_path)
    export = tmp_path / "run" / "export"
    shutil.rmtree(export)
    export.write_text("my notes\n")
    capsys.readouterr()
    assert main(args + ["--resume"]) == 2
    one_line_error(capsys, "a file is in the way of the export folder")
    assert export.read_text() == "my notes\n"


def test_predict_in_a_moved_project_never_writes_onto_the_runs_data(tmp_path, capsys, monkeypatch):
    import json
    import shutil

    project = tmp_path / "proj"
    project.mkdir()
    data = _relative_run(project, monkeypatch)
    moved = tmp_path / "proj2"
    shutil.move(project, moved)
    monkeypatch.chdir(moved)
    before = {k: (moved / data[k]).read_bytes() for k in ("train", "test")}
    capsys.readouterr()
    for k in ("train", "test"):
        assert main(["predict", "R", "in.txt", "--out", data[k]]) == 2
        one_line_error(capsys, "would destroy the input")
    record = json.loads((moved / "R" / "metrics.json").read_text())
    for k in ("train", "dev", "test"):  # as a run recorded before it stored paths from the run folder
        del record["data"][k]["from_run"]
    (moved / "R" / "metrics.json").write_text(json.dumps(record))
    assert main(["predict", "R", "in.txt", "--out", data["test"]]) == 2  # the config's path, where it ran is gone
    one_line_error(capsys, "would destroy the input")
    assert {k: (moved / data[k]).read_bytes() for k in ("train", "test")} == before


def test_the_fingerprint_follows_the_stateful_flag_set_after_a_cached_embed():
    import torch

    from elmo_features import BiLM, BiLMOptions
    from elmo_features.embedding.feature_cache import bilm_fingerprint
    from test_tasks_helpers import TINY_OPTIONS

    torch.manual_seed(0)
    bilm = BiLM(BiLMOptions.from_dict(TINY_OPTIONS))
    first = bilm_fingerprint(bilm)
    bilm.stateful = True  # the memo must not answer for the stateless biLM
    stateful = bilm_fingerprint(bilm)
    assert stateful != first
    assert bilm_fingerprint(BiLM(BiLMOptions.from_dict(TINY_OPTIONS), stateful=True)) != first


def test_recorded_commands_are_the_commands_typed(tmp_path, capsys, monkeypatch):
    import json
    import shlex

    from elmo_features.util.cli_types import rebuild_command

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", "R", *FAST]) == 0
    command = json.loads((tmp_path / "R" / "metrics.json").read_text())["command"]
    assert "interrupt" not in command
    assert shlex.split(command)[1:] == ["run", cfg, "--out", "R", "--cache-dir", "none", "--progress", "off"]
    import argparse
    args = argparse.Namespace(command="x", out="o", interrupt_hint="the run was interrupted", debug=True)
    assert rebuild_command(["elmo-tasks", "x"], args, {}, skip=("command",)) == "elmo-tasks x --out o"


def test_a_stray_i_tag_in_a_bio_file_is_the_tag_named(tmp_path):
    import pytest

    from tasks.data.tag_schemes import TagSchemeError, convert_data, detect_scheme

    bio = [["B-PER", "O"], ["O", "I-PER", "O"], ["B-LOC"], ["O", "B-LOC", "I-LOC"]]
    assert detect_scheme(bio) == "BIO"  # most chunks start with B-: one stray I- does not make it IOB1
    with pytest.raises(TagSchemeError) as e:
        convert_data(bio, "auto", "BIOES")
    assert (e.value.sentence, e.value.index, e.value.scheme) == (1, 1, "BIO") and "'I-PER'" in str(e.value)
    assert detect_scheme([["I-PER", "I-PER", "B-PER", "O"], ["I-LOC"]]) == "IOB1"


def test_a_token_in_decomposed_unicode_finds_its_vector():
    import unicodedata

    import numpy as np

    from tasks.data.static_vectors import StaticVectors

    v = StaticVectors(["josé", "paris"], np.eye(2, dtype=np.float32), lowercase=False)
    nfd = unicodedata.normalize("NFD", "José")
    assert nfd != "José"
    vectors, oov = v.lookup([nfd, "Paris", "nowhere"])
    np.testing.assert_array_equal(vectors[0], [1.0, 0.0])
    assert oov == 1


def test_resume_with_another_runs_dir_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path, compare={"sources": {"g": {"name": "static", "path": "x"}}})
    args = ["compare", cfg, "--set", f"compare.sources={{g: {{name: static, path: {env['glove']}}}}}",
            "--results-dir", "RES", *FAST, "--seeds", "1"]
    assert main(args + ["--runs-dir", "RR"]) == 0
    grid = next((tmp_path / "RR").glob("*/compare-*"))
    capsys.readouterr()
    assert main(args + ["--runs-dir", "OTHER", "--resume", str(grid)]) == 2
    one_line_error(capsys, "--runs-dir OTHER: --resume continues in", "drop --runs-dir")
    assert not (tmp_path / "OTHER").exists()
    assert main(args + ["--runs-dir", "RR", "--resume", str(grid)]) == 0  # the folder that holds it: fine


def test_a_comparison_saved_with_a_penalised_fixed_mix_resumes_with_a_warning(tmp_path, capsys, monkeypatch):
    import tasks.features.mix as mix
    from test_tasks_helpers import elmo_section

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    raw = yaml.safe_load(Path(cfg).read_text())
    raw["compare"] = {"sources": {"e": elmo_section(env, mix={"name": "scalar", "trainable": False, "l2_coef": 0.001})}}
    Path(cfg).write_text(yaml.safe_dump(raw))
    args = ["compare", cfg, "--runs-dir", "RR", "--results-dir", "RES", *FAST]
    with monkeypatch.context() as m:  # a comparison made before the rule existed
        m.setattr(mix, "settings_rule", lambda message: None)
        assert main(args + ["--seeds", "1"]) == 0
    grid = next((tmp_path / "RR").glob("*/compare-*"))
    capsys.readouterr()
    assert main(args + ["--seeds", "1,2", "--resume", str(grid)]) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "l2_coef: 0.001 penalises" in err
    assert main(args + ["--seeds", "1"]) == 2  # a new comparison with it is still refused
    one_line_error(capsys, "l2_coef: 0.001 penalises the mix weights")

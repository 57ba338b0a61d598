"""Hostile list ten: a symlink given as an output (L03; a partial output that is a link, L01, shares the lock files'
test in tests/test_reliability_r10.py), predict onto the run's data (L07), a biLM edited
through ``param.data`` (F06), finished runs whose records lack scores (M04, M05), standard input closed (K02) or
standard error full (K03), damaged cache datasets and keys (M01, M02, F01), an encoder config field of the wrong type
(M07), NumPy layer lists (F05), damaged plugin digests (M09), a sense file listing a key twice (M06), a fixed mix with
a penalty (C01), a finished run's export deleted (R03), a test set of single-candidate words (D07), the gloss
precomputation script's errors (G07), a blanked biLM (D02) and a corpus cache copied from another out_dir (M08). (The gloss cache's checksum, G01/G02: tests/test_wsd_senses.py.)"""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from elmo_tasks.cli import main

from test_reliability_outputs_r3 import senses  # noqa: F401  (a module fixture: a tiny sense file)
from test_tasks_helpers import make_bilm, one_line_error, static_config_file

FAST = ["--cache-dir", "none", "--progress", "off"]
REPO = Path(__file__).resolve().parents[1]


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


# ---------------------------------------------------------------- L01 / L03 / L07: where outputs are written

def test_l03_configs_show_judges_a_symlink_by_the_file_it_points_to(tmp_path, capsys):
    run = tmp_path / "R"
    run.mkdir()
    for name in ("config.yaml", "model.pt", "vocab.json"):
        (run / name).write_text(f"{name} of the run\n")
    os.symlink(run / "config.yaml", tmp_path / "my.yaml")
    assert main(["configs", "show", "ner_conll2003", "--out", str(tmp_path / "my.yaml"), "--force"]) == 2
    one_line_error(capsys, "is a file of the run folder", "would destroy the run")
    assert (run / "config.yaml").read_text() == "config.yaml of the run\n"


def test_l07_predict_never_writes_onto_the_runs_own_data(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", "R", *FAST]) == 0
    (tmp_path / "in.txt").write_text("John lives in Paris\n")
    before = env["conll_train"].read_bytes()
    capsys.readouterr()
    assert main(["predict", "R", "in.txt", "--out", str(env["conll_train"])]) == 2
    one_line_error(capsys, "--out", "would destroy the input")
    assert env["conll_train"].read_bytes() == before


# ---------------------------------------------------------------- F06: a biLM edited through param.data

def test_f06_the_fingerprint_changes_when_weights_are_edited_through_data():
    import torch

    from elmo_features import BiLM, BiLMOptions
    from elmo_features.embedding.feature_cache import bilm_fingerprint
    from test_tasks_helpers import TINY_OPTIONS

    torch.manual_seed(0)
    bilm = BiLM(BiLMOptions.from_dict(TINY_OPTIONS))
    first = bilm_fingerprint(bilm)
    assert bilm_fingerprint(bilm) == first  # (memoised: the same)
    next(bilm.parameters()).data.mul_(2.0)  # no version counter sees this
    assert bilm_fingerprint(bilm) != first


# ---------------------------------------------------------------- M04 / M05 / M09: finished runs' records

@pytest.fixture
def comparison(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path, compare={"sources": {"g": {"name": "static", "path": "x"}}})
    args = ["compare", cfg, "--set", f"compare.sources={{g: {{name: static, path: {env['glove']}}}}}", "--runs-dir",
            "RR", "--results-dir", "RES", *FAST]
    assert main(args + ["--seeds", "1"]) == 0
    return args, glob.glob("RR/*/compare-*")[0]


@pytest.mark.parametrize("edit, why", [(lambda m: m.pop("test"), "it has no test scores"),
                                       (lambda m: m["test"].update(f1="high"), "test.f1 is not a number"),
                                       (lambda m: m.pop("seconds"), "seconds is missing"),
                                       (lambda m: m.update(plugin_modules={"p": 5}), "plugin_modules.p is not a sha256")])
def test_m04_m05_resume_refuses_a_finished_run_whose_record_lacks_what_a_row_reads(comparison, capsys, edit, why):
    args, grid = comparison
    path = Path(grid) / "g-seed1" / "metrics.json"
    m = json.loads(path.read_text())
    edit(m)
    path.write_text(json.dumps(m))
    capsys.readouterr()
    assert main(args + ["--seeds", "1,2", "--resume", grid]) == 2
    one_line_error(capsys, "a finished run of the comparison is damaged", why, "delete that folder")
    assert not (Path(grid) / "g-seed2").exists()  # refused before any training


# ---------------------------------------------------------------- K02 / K03: standard input closed, stderr full

@pytest.mark.parametrize("command", ["embed", "wsd tag"])
def test_k02_reading_a_closed_standard_input_is_one_error_line(senses, tmp_path, command):  # noqa: F811
    opts, weights = make_bilm(tmp_path / "bilm")
    argv = (["embed", "-", str(tmp_path / "e.h5"), "--options", str(opts), "--weights", str(weights)]
            if command == "embed" else ["wsd", "tag", "-", "--senses", str(senses / "senses.h5")])
    quoted = " ".join(f"'{a}'" for a in [sys.executable, "-m", "elmo_tasks.cli", *argv])
    r = subprocess.run(f"{quoted} <&-", shell=True, env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "standard input is closed (<&-)" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_k03_a_standard_error_that_fails_on_write_does_not_change_the_work(tmp_path):
    _, cfg = static_config_file(tmp_path)
    quoted = " ".join(f"'{a}'" for a in [sys.executable, "-m", "elmo_tasks.cli", "run", cfg, "--out", str(tmp_path / "R"),
                                         *FAST])
    r = subprocess.run(f"{quoted} 2>/dev/full", shell=True, env=_env(), capture_output=False, timeout=300,
                       stdout=subprocess.DEVNULL)
    assert r.returncode == 0 and (tmp_path / "R" / "metrics.json").is_file()


# ---------------------------------------------------------------- M01 / M02 / F01: feature-cache entries

def _cached(tmp_path):
    import torch

    from elmo_features import Embedder, load_bilm
    from elmo_features.embedding.feature_cache import FeatureCache

    torch.set_num_threads(1)
    opts, weights = make_bilm(tmp_path / "bilm")
    emb = Embedder(load_bilm(opts, weights))
    cache = FeatureCache(tmp_path / "c")
    return emb, cache


def test_m01_an_entry_whose_lengths_or_checksums_are_misshapen_is_recomputed(tmp_path, capsys):
    emb, cache = _cached(tmp_path)
    sentences = [["a", "b"], ["c"]]
    first = cache.embed(emb, sentences)
    entry = next((tmp_path / "c").glob("*.hdf5"))
    with h5py.File(entry, "r+") as f:
        del f["crc32"]
        f["crc32"] = np.zeros(5, dtype=np.uint32)
    again = cache.embed(emb, sentences)
    assert "its crc32 has shape (5,), not (2,)" in capsys.readouterr().err
    assert all(np.array_equal(a, b) for a, b in zip(first, again))


def test_m02_an_entry_copied_onto_another_keys_name_is_not_served(tmp_path):
    import shutil

    emb, cache = _cached(tmp_path)
    cache.embed(emb, [["a", "b"], ["c"]])
    cache.embed(emb, [["x", "y"], ["z"]])
    entries = sorted((tmp_path / "c").glob("*.hdf5"))
    shutil.copy(entries[0], entries[1])
    other = cache.computed
    got = cache.embed(emb, [["x", "y"], ["z"]] if entries[1] == cache.path_for(emb, [["x", "y"], ["z"]])
                      else [["a", "b"], ["c"]])
    assert cache.computed == other + 1 and len(got) == 2  # recomputed, not the other key's arrays


def test_f01_lazy_features_take_integer_indices_only(tmp_path):
    from elmo_features.embedding.feature_cache import LazyFeatures

    emb, cache = _cached(tmp_path)
    with LazyFeatures(cache.ensure(emb, [["a"], ["b"], ["c"]])) as lf:
        for bad in (1.5, "1", True, np.array(True)):
            with pytest.raises(TypeError, match="indices must be integers or slices"):
                lf[bad]
        assert np.array_equal(lf[np.int64(1)], lf[-2])
        import torch

        assert np.array_equal(lf[torch.tensor(1)], lf[np.array(1)])  # a sampler's 0-d indices
        with pytest.raises(IndexError, match=r"out of range: -4 \(have 3\)"):
            lf[-4]


# ---------------------------------------------------------------- M07 / F05: encoders

def test_m07_an_encoder_config_field_of_the_wrong_type_is_one_error(tmp_path):
    from elmo_features.encoders import load_encoder
    from elmo_features.encoders.loading import EncoderError
    from encoder_helpers import make_bert

    folder = make_bert(tmp_path / "enc")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "hidden_size": "16"}))
    with pytest.raises(EncoderError, match="config.json: cannot be read as a model config .*hidden_size"):
        load_encoder(str(folder))


def test_f05_transformer_layers_given_as_a_numpy_array(tmp_path):
    from elmo_features.encoders import TransformerEmbedder
    from encoder_helpers import make_bert

    folder = make_bert(tmp_path / "enc")
    assert TransformerEmbedder(str(folder), layers=np.array([0, 2])).layers == [0, 2]
    with pytest.raises(Exception, match="not integer hidden-state indices"):
        TransformerEmbedder(str(folder), layers=np.array([0.5]))


# ---------------------------------------------------------------- M06: a sense file listing a key twice

def test_m06_a_sense_file_listing_a_key_twice_is_named(senses, tmp_path, capsys):  # noqa: F811
    damaged = tmp_path / "s.h5"
    damaged.write_bytes((senses / "senses.h5").read_bytes())
    with h5py.File(damaged, "r+") as f:
        keys = [k.decode() if isinstance(k, bytes) else k for k in f["keys"][()]]
        keys[1] = keys[0]
        del f["keys"]
        f.create_dataset("keys", data=np.array(keys, dtype=object), dtype=h5py.string_dtype("utf-8"))
    capsys.readouterr()
    assert main(["wsd", "tag", str(senses / "in.txt"), "--senses", str(damaged), "--out", str(tmp_path / "t.jsonl")]) \
        == 2
    one_line_error(capsys, f"dataset keys lists {keys[0]} more than once", "make it again")


# ---------------------------------------------------------------- C01: a fixed mix with a penalty

def test_c01_a_penalty_on_fixed_mix_weights_is_refused(tmp_path, capsys):
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--set", f"features={{name: elmo, options_file: x, weights_file: y, mix: {{name: scalar, "
                 "trainable: false, l2_coef: 1.0}}", "--out", str(tmp_path / "R"), *FAST]) == 2
    one_line_error(capsys, "l2_coef: 1.0 penalises the mix weights, but trainable is false")


# ---------------------------------------------------------------- R03: a finished run's export deleted

def test_r03_resume_of_a_finished_run_writes_a_deleted_or_damaged_export_again(tmp_path, capsys):
    import shutil

    from test_reliability_training import finished_bilm_run

    args = finished_bilm_run(tmp_path)
    export = tmp_path / "run" / "export"
    weights = (export / "weights.hdf5").read_bytes()
    shutil.rmtree(export)
    capsys.readouterr()
    assert main(args + ["--resume"]) == 0
    assert "export: missing; written again from the finished model" in capsys.readouterr().err
    assert (export / "weights.hdf5").read_bytes() == weights
    (export / "weights.hdf5").write_bytes(weights[:3000])  # truncated
    assert main(args + ["--resume"]) == 0
    assert "does not load" in capsys.readouterr().err and (export / "weights.hdf5").read_bytes() == weights
    assert main(args + ["--resume"]) == 0
    assert "written again" not in capsys.readouterr().err  # whole: left as it is


# ---------------------------------------------------------------- D07: a test set that measures nothing

def test_d07_a_test_set_of_single_candidate_words_is_warned_about(capsys):
    from elmo_tasks.wsd.data.examples import WsdSentence, WsdTarget, check_candidates

    ex = WsdSentence(tokens=["a", "rock"], targets=[WsdTarget(id="t0", start=1, end=2, lemma="rock", pos="NOUN",
                                                             candidates=["rock%1:05:00::"], gold=["rock%1:05:00::"])])
    assert check_candidates([ex], "test set mono", "mono.xml", "wn") == 0
    assert "each of its 1 instances has a single WordNet candidate" in capsys.readouterr().err


# ---------------------------------------------------------------- G07: the gloss precomputation script

@pytest.mark.parametrize("args, needle", [(["--source", "nosuch", "--cache-dir", "C"], "unknown source 'nosuch'"),
                                          (["--source", "mpnet", "--cache-dir", ""], "--cache-dir: empty path"),
                                          (["--source", "mpnet", "--cache-dir", "C", "--threads", "0"], "--threads 0")])
def test_g07_the_gloss_script_gives_one_error_line(tmp_path, args, needle):
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "precompute_glosses.py"), *args], cwd=tmp_path,
                       env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and needle in r.stderr, r.stderr
    assert not (tmp_path / "glosses").exists()


# ---------------------------------------------------------------- D02 / M08: a blanked biLM, a copied corpus cache

def test_d02_a_bilm_whose_weight_matrices_are_all_zero_is_refused(tmp_path):
    from elmo_features import load_bilm
    from elmo_features.formats.weights import WeightFileError

    opts, weights = make_bilm(tmp_path / "bilm")
    with h5py.File(weights, "r+") as f:
        f.visititems(lambda name, obj: obj.__setitem__(Ellipsis, 0) if isinstance(obj, h5py.Dataset)
                     and obj.dtype.kind == "f" else None)
    with pytest.raises(WeightFileError, match="every weight matrix is zero"):
        load_bilm(opts, weights)


def test_m08_a_corpus_cache_copied_from_another_out_dir_is_prepared_again(tmp_path, capsys):
    import shutil

    from test_reliability_training import SMALL, _text

    runs = {}
    for name, words in (("A", "the cat sat on a mat"), ("B", "the cow ran under a rug")):
        corpus = _text(tmp_path / f"{name}.txt", words.split())
        config = tmp_path / f"{name}.yaml"
        config.write_text(yaml.safe_dump({**SMALL, "train_files": [str(corpus)], "out_dir": str(tmp_path / name)}))
        assert main(["train-bilm", "--config", str(config), "--progress", "off"]) == 0
        runs[name] = config
    a = tmp_path / "A"
    shutil.rmtree(a / "export")
    for n in ("checkpoint.pt", "curve.json"):
        (a / n).unlink(missing_ok=True)
    for n in ("prep.npz", "types.txt", "vocab.txt"):
        shutil.copy(tmp_path / "B" / n, a / n)  # B's corpus under A's key
    capsys.readouterr()
    assert main(["train-bilm", "--config", str(runs["A"]), "--progress", "off"]) == 0
    assert "is not the file prep.json was written with; preparing the corpus again" in capsys.readouterr().err
    vocab = (a / "export" / "vocab.txt").read_text().split()
    assert "cat" in vocab and "cow" not in vocab

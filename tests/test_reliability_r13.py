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

from elmo_tasks.cli import main

from signal_helpers import default_stop_signals
from test_reliability_outputs_r3 import bank_wsd_config, senses  # noqa: F401  (senses: a module fixture)
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
    for bad in ([0.0], [0.0, float("nan"), 1.0], "all", [0, 0, 0], [True, 0, 0]):  # from before the checksum: the
        _edit_meta(path, keep_checksum=False, layers=bad)  # recipe is checked
        assert main(["wsd", "tag", str(text), "--senses", str(path)]) == 2
        one_line_error(capsys, "meta layers", "are not 3 finite weights, one per layer of its feature source")
    _edit_meta(path, keep_checksum=False, layers=[0.0, 1.0, 0.0])
    for bad in ({"prior": True}, {"w": {"NOUN": True}}, {"w": {"NOUN": -2.0}}, {"prior": float("inf")}):
        _edit_meta(path, keep_checksum=False, **bad)
        assert main(["wsd", "tag", str(text), "--senses", str(path), "--prior"]) == 2
        one_line_error(capsys, "is not finite numbers >= 0")
        _edit_meta(path, keep_checksum=False, w={"NOUN": 0.0}, prior=0.1)


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
    for damaged in ("three", -3, None, {"k": "x"}, {"folds": True, "fold_seed": 0}):
        record = folded / ".data_sha256.json"
        record.write_text(json.dumps(json.loads(record.read_text()) | {"folds": damaged}))
        assert main(args + ["--folds", "3", "--resume", str(folded), "--results-dir", "RES2"]) == 2
        one_line_error(capsys, "missing, damaged or from an older version", "cannot be reused for 3 folds")
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
    from elmo_tasks.data.static_vectors import load_static_vectors

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


# ---------------------------------------------------------------- list fifteen

def test_ctrl_c_to_a_starting_or_running_pool_is_one_line(tmp_path):
    """Ctrl-C (or a closed terminal) to the process group of `compare --jobs 2` while its workers start (import
    torch) or run: exit 130 (129), the interrupt line, no worker or resource-tracker traceback and no "leaked
    semaphore objects" (a worker's tqdm lock)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    env, cfg = static_config_file(tmp_path)
    glove = env["glove"]
    args = [sys.executable, "-c", "import signal, runpy, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
            "sys.argv = ['elmo-tasks'] + sys.argv[1:]; runpy.run_module('elmo_tasks.cli', run_name='__main__')",
            "compare", cfg, "--set", f"compare.sources={{g: {{name: static, path: {glove}}}, h: {{name: static, path: "
            f"{glove}, lowercase: true}}}}", "--set", "training.max_epochs=3000", "--set", "training.patience=3000",
            "--seeds", "1,2", "--jobs", "2", "--cache-dir", "C", "--progress", "off"]
    run_env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    for i, (sig, delay, code) in enumerate(((signal.SIGINT, 3.0, 130), (signal.SIGINT, 6.0, 130),
                                            (signal.SIGHUP, 4.0, 129))):  # SIGHUP: a closed terminal
        p = subprocess.Popen(args + ["--runs-dir", f"RR{i}", "--results-dir", f"RES{i}"], cwd=tmp_path, env=run_env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
                             preexec_fn=default_stop_signals)
        time.sleep(delay)
        os.killpg(p.pid, sig)
        _, err = p.communicate(timeout=120)
        time.sleep(0.5)
        assert p.returncode == code, err
        assert "interrupted" in err and "Traceback" not in err and "leaked semaphore" not in err, err
        assert "resource_tracker" not in err, err


def test_a_wsd_fixed_mix_with_the_wrong_number_of_weights_is_one_line(tmp_path, capsys, monkeypatch):
    cfg = _tiny_wsd(tmp_path, monkeypatch, knn=["layers", "fixed_mix"], fixed_mix=[1, 1])
    assert main(["wsd", "--config", cfg, "--out", "W", "--no-plot", *FAST]) == 2
    _last_error(capsys, "fixed_mix: 2 weights, but source elmo has 3 layers; give one weight per layer")


def _last_error(capsys, *needles: str) -> None:
    """stderr ends with one ``error:`` line holding every needle (after warnings), with no traceback."""
    err = capsys.readouterr().err.strip()
    last = err.splitlines()[-1]
    assert last.startswith("error: ") and "Traceback" not in err, err
    for n in needles:
        assert n in last, err


def _tiny_wsd(tmp_path: Path, monkeypatch, **top) -> str:
    """The tiny "bank" WSD config (``bank_wsd_config``) with ``top`` keys, written to w.yaml."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(bank_wsd_config(tmp_path) | {"features": ["elmo"]} | top))
    return str(tmp_path / "w.yaml")


def test_settings_for_rows_not_listed_are_warned_about_and_nothing_held_out_is_refused(tmp_path, capsys, monkeypatch):
    cfg = _tiny_wsd(tmp_path, monkeypatch, knn=["layers"], fixed_mix=[1, 0, 0], gloss_texts=["full"])
    assert main(["wsd", "--config", cfg, "--out", "W", "--no-plot", *FAST]) == 0
    err = capsys.readouterr().err
    assert "fixed_mix weights the fixed_mix row, and knn does not list it: it has no effect" in err
    assert "gloss_texts chooses the glosses of the rows senses_glosses and senses_prior, and knn lists neither" in err
    for command in (["wsd", "--config", cfg, "--out", "W2", "--no-plot", "--set", "knn=[senses]"],
                    ["wsd", "senses", "--config", cfg, "--source", "elmo", "--out", "s.h5"]):
        assert main(command + ["--set", "head_dev_every=50", *FAST]) == 2
        _last_error(capsys, "head_dev_every 50: holds out no annotated instance of the 6 training sentences")


def test_a_transformer_embedders_cache_key_follows_weights_edited_in_memory(tmp_path):
    import torch

    from elmo_features import FeatureCache
    from elmo_features.encoders import TransformerEmbedder, load_encoder
    from encoder_helpers import make_bert

    enc = load_encoder(str(make_bert(tmp_path / "enc")))
    embedder, cache, s = TransformerEmbedder(enc), FeatureCache(tmp_path / "C"), [["the", "cat", "sat"]]
    before_fp = embedder.fingerprint
    before = cache.embed(embedder, s)[0]
    with torch.no_grad():
        enc.model.embeddings.word_embeddings.weight.data.mul_(2.0)  # an edit that no version counter sees
    assert embedder.fingerprint != before_fp
    np.testing.assert_array_equal(cache.embed(embedder, s)[0], embedder.embed_sentences(s)[0])
    assert not np.array_equal(cache.embed(embedder, s)[0], before)
    with torch.no_grad():
        enc.model.embeddings.word_embeddings.weight.data.div_(2.0)  # (exact: a power of two)
    assert embedder.fingerprint == before_fp  # the weights as loaded again: the files' key


def test_the_hub_call_refuses_a_bilm_switched_to_keep_sentence_boundaries(tmp_path):
    from elmo_features.hub import ElmoHub

    opts, weights = make_bilm(tmp_path / "bilm")
    hub = ElmoHub(str(opts.parent))
    tokens = {"tokens": [["the", "cat", "sat", ""]], "sequence_len": [3]}
    before = hub(tokens, signature="tokens", as_dict=True)["elmo"]
    hub.bilm.keep_sentence_boundaries = True
    for call in (lambda: hub(tokens, signature="tokens"), lambda: hub(["the cat sat"])):
        with pytest.raises(ValueError, match="keep_sentence_boundaries=False .*shifting every word by one"):
            call()
    hub.bilm.keep_sentence_boundaries = False
    assert torch_equal(hub(tokens, signature="tokens", as_dict=True)["elmo"], before)


def torch_equal(a, b) -> bool:
    import torch

    return bool(torch.equal(a, b))


def test_binary_files_given_as_text_are_named_for_what_they_are(tmp_path):
    from elmo_features import load_bilm
    from elmo_features.util.errors import ConfigError, TextInputError
    from elmo_features.util.text_input import iter_lines

    opts, weights = make_bilm(tmp_path / "bilm")
    u32 = tmp_path / "o32.json"
    u32.write_text(opts.read_text(), encoding="utf-32")
    with pytest.raises(ConfigError, match="the file is UTF-32; convert it to UTF-8 .*iconv -f UTF-32"):
        load_bilm(str(u32), str(weights))
    packed = tmp_path / "data.noun"
    packed.write_bytes(gzip.compress(b"  1 licence\n00000010 17 n 01 slope 0 000 | land\n"))
    with pytest.raises(TextInputError, match="data.noun:1: the file is gzip-compressed; decompress it"):
        list(iter_lines(packed))


def test_a_cache_dir_that_is_a_run_or_results_folder_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", "R", *FAST]) == 0
    capsys.readouterr()
    assert main(["run", cfg, "--out", "R2", "--cache-dir", "R", "--progress", "off"]) == 2
    one_line_error(capsys, "--cache-dir R: is a run folder", "the cache files would be written into another run's")
    assert not (tmp_path / "R2").exists()


# ---------------------------------------------------------------- list sixteen

def test_wsd_senses_with_no_held_out_setting_is_one_line(tmp_path, capsys, monkeypatch):
    cfg = _tiny_wsd(tmp_path, monkeypatch, knn=["layers"])
    assert main(["wsd", "senses", "--config", cfg, "--source", "elmo", "--out", "s.h5", "--set", "head_dev_every=0",
                 *FAST]) == 2
    _last_error(capsys, "head_dev_every 0: the sense vectors choose their settings on held-out training sentences")


def test_a_bilm_loaded_under_inference_mode_embeds(tmp_path):
    import torch

    from elmo_features import Embedder, FeatureCache, load_bilm

    opts, weights = make_bilm(tmp_path / "bilm")
    plain = Embedder(load_bilm(str(opts), str(weights))).embed_sentences([["the", "cat"]])[0]
    with torch.inference_mode():
        bilm = load_bilm(str(opts), str(weights))
    embedder = Embedder(bilm)
    np.testing.assert_array_equal(embedder.embed_sentences([["the", "cat"]])[0], plain)
    np.testing.assert_array_equal(FeatureCache(tmp_path / "C").embed(embedder, [["the", "cat"]])[0], plain)


def test_a_transformer_in_train_mode_still_gives_frozen_features(tmp_path):
    from elmo_features.encoders import TransformerEmbedder, load_encoder
    from encoder_helpers import make_bert

    enc = load_encoder(str(make_bert(tmp_path / "enc")))  # (its config has dropout 0.1)
    embedder, s = TransformerEmbedder(enc), [["the", "cat", "sat"]]
    frozen = embedder.embed_sentences(s)[0]
    enc.model.train()
    np.testing.assert_array_equal(embedder.embed_sentences(s)[0], frozen)
    assert enc.model.training  # the caller's mode is given back
    for bad in ("8", 4.0):
        with pytest.raises(TypeError, match="window_pieces must be an integer"):
            TransformerEmbedder(enc, window_pieces=bad)


def test_a_comparisons_record_that_is_a_link_is_never_written_through(tmp_path, capsys, monkeypatch):
    args, rr = _fold_comparison(tmp_path, monkeypatch)
    assert main(args + ["--results-dir", "RES"]) == 0
    grid = next(rr.glob("*/compare-*"))
    mine = tmp_path / "mine.json"
    mine.write_text("my notes\n")
    (grid / ".data_sha256.json").unlink()
    (grid / ".data_sha256.json").symlink_to(mine)
    capsys.readouterr()
    assert main(args + ["--resume", str(grid), "--results-dir", "RES2"]) == 2
    one_line_error(capsys, ".data_sha256.json: is a link, not the comparison's own record")
    assert mine.read_text() == "my notes\n"
    (grid / ".data_sha256.json").unlink()
    (grid / ".data_sha256.json").mkdir()
    assert main(args + ["--resume", str(grid), "--results-dir", "RES2"]) == 2
    one_line_error(capsys, ".data_sha256.json: is a folder")
    (grid / ".data_sha256.json").rmdir()
    (grid / ".data_sha256.json").write_text("{}")
    for name in ("RR", "mine_bilm"):  # a comparison's runs folder; a biLM folder
        folder = grid if name == "RR" else tmp_path / name
        folder.mkdir(exist_ok=True)
        if name != "RR":
            (folder / "options.json").write_text("{}")
            (folder / "weights.hdf5").write_bytes(b"")
        assert main(args + ["--results-dir", "RES3", "--cache-dir", str(folder)]) == 2
        one_line_error(capsys, "--cache-dir", "would be written among its files")


def test_eval_bilm_refuses_an_export_whose_bilm_was_edited_after_its_softmax(tmp_path, capsys):
    import h5py

    from test_reliability_training import finished_bilm_run

    finished_bilm_run(tmp_path)
    export = tmp_path / "run" / "export"
    with h5py.File(export / "weights.hdf5", "r+") as f:
        names = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) and "LSTMCell/W_0" in n else None)
        f[names[0]][...] = f[names[0]][()] * 5
    capsys.readouterr()
    assert main(["eval-bilm", str(tmp_path / "held.txt"), "--options", str(export / "options.json"), "--weights",
                 str(export / "weights.hdf5"), "--vocab", str(export / "vocab.txt")]) == 2
    one_line_error(capsys, "its biLM weights are not the ones its softmax was trained with")


def test_static_vectors_in_another_encoding_and_configs_in_gzip_are_named(tmp_path):
    from elmo_features.util.config_files import read_config_file
    from elmo_features.util.errors import ConfigError
    from elmo_tasks.data.static_vectors import load_static_vectors

    text = "the 0.1 0.2\ncat 0.3 0.4\n"
    for enc, says in (("utf-16", "UTF-16"), ("utf-32", "UTF-32")):
        path = tmp_path / f"v-{enc}.txt"
        path.write_text(text, encoding=enc)
        with pytest.raises(Exception, match=f"the file is {says}; convert it to UTF-8"):
            load_static_vectors(path)
    packed = tmp_path / "c.yaml"
    packed.write_bytes(gzip.compress(b"name: x\n"))
    with pytest.raises(ConfigError, match="gzip-compressed; decompress it \\(gunzip\\)$"):
        read_config_file(packed)


def one_layer_wsd(tmp_path: Path, monkeypatch, **top) -> tuple[str, dict]:
    """The tiny WSD config (``_tiny_wsd``) on one source of one layer, tiny static vectors "vec"; -> (path, raw)."""
    cfg = _tiny_wsd(tmp_path, monkeypatch, **top)
    raw = yaml.safe_load(Path(cfg).read_text())
    (tmp_path / "vec.txt").write_text("the 0.1 0.2\nbank 0.3 0.4\nriver 0.5 0.1\n")
    raw["sources"] = {"vec": {"name": "static", "path": str(tmp_path / "vec.txt"), "format": "text"}}
    raw["features"] = ["vec"]
    Path(cfg).write_text(yaml.safe_dump(raw))
    return cfg, raw


def test_wsd_rows_and_heads_that_cannot_be_made_are_said(tmp_path, capsys, monkeypatch):
    cfg, raw = one_layer_wsd(tmp_path, monkeypatch, knn=["layers", "average", "fixed_mix"], fixed_mix=[1.0])
    assert main(["wsd", "--config", cfg, "--out", "W", "--no-plot", *FAST]) == 0
    assert "source vec has one layer: no average or fixed_mix row for it" in capsys.readouterr().err
    raw |= {"knn": [], "head": {"name": "wsd_linear"}, "probes": False, "head_dev_every": 50,
            "training": {"max_epochs": 1}}
    Path(cfg).write_text(yaml.safe_dump(raw))
    assert main(["wsd", "--config", cfg, "--out", "W2", "--no-plot", *FAST]) == 0
    assert "head_dev_every 50: holds out none of the 6 training sentences; the head trains without a dev set" in \
        capsys.readouterr().err


def test_a_sense_file_with_its_meta_checksum_but_not_its_arrays_checksum_is_refused(tmp_path, capsys, senses):
    import h5py

    path = tmp_path / "s.h5"
    path.write_bytes((senses / "senses.h5").read_bytes())
    with h5py.File(path, "a") as f:
        del f.attrs["sha256"]
    assert main(["wsd", "tag", str(senses / "in.txt"), "--senses", str(path)]) == 2
    one_line_error(capsys, "do not match the checksum written with them")


def test_train_bilm_token_vectors_dim_without_token_vectors_is_warned_about(tmp_path):
    from elmo_features.training.config import TrainConfig

    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        TrainConfig.from_dict({**SMALL, "train_files": ["a.txt"], "out_dir": "run", "token_vectors_dim": 50})
    assert err.getvalue().count("token_vectors_dim 50 sizes the vectors of token_vectors") == 1


def test_a_stop_while_the_summary_is_written_says_what_finished(tmp_path, capsys, monkeypatch):
    from elmo_tasks.experiment import compare

    args, rr = _fold_comparison(tmp_path, monkeypatch)

    def stopped(*a, **k):
        raise KeyboardInterrupt("SIGTERM")

    monkeypatch.setattr(compare, "write_summary", stopped)
    assert main(args + ["--results-dir", "RES"]) == 130
    err = capsys.readouterr().err
    assert "1 of 1 runs finished" in err and "--resume" in err, err  # (was: a bare "interrupted")


def test_a_config_read_from_a_pipe_is_said_not_to_rerun(capsys):
    from elmo_tasks.cli.run import warn_unrepeatable

    warn_unrepeatable("/dev/fd/63")
    warn_unrepeatable("configs/c.yaml")
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "/dev/fd/63 is a pipe: the command recorded" in err


# ---------------------------------------------------------------- list seventeen

def test_a_set_value_that_yaml_would_cut_at_a_comment_is_refused():
    from elmo_features.util.config_files import apply_set
    from elmo_features.util.errors import ConfigError

    for assignment in ("data.train=/x/train #2.tsv", "name=nightly #2"):
        with pytest.raises(ConfigError, match="YAML reads ' #' as the start of a comment.*quote it"):
            apply_set({}, assignment)
    raw: dict = {}
    for assignment in ('name="nightly #2"', "tag=a#b"):
        apply_set(raw, assignment)
    assert raw == {"name": "nightly #2", "tag": "a#b"}


def test_more_files_are_named_for_what_they_are_and_static_vectors_check_their_values(tmp_path):
    import bz2
    import lzma

    from elmo_tasks.data.static_vectors import StaticVectors, load_static_vectors

    text = b"the 0.1 0.2\ncat 0.3 0.4\n"
    for name, data, says in (("v.xz", lzma.compress(text), "xz-compressed"), ("v.bz", bz2.compress(text), "bzip2"),
                             ("v.cr", text.replace(b"\n", b"\r"), "old-Mac line ends")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(Exception, match=says):
            load_static_vectors(tmp_path / name)
    np.save(tmp_path / "v.npy", np.zeros((2, 2), dtype=np.float32))
    with pytest.raises(Exception, match="NumPy .npy array, not text"):
        load_static_vectors(tmp_path / "v.npy", format="text")
    (tmp_path / "BZh.txt").write_bytes(b"BZh9 0.1 0.2\ncat 0.3 0.4\n")  # a word that starts like bzip2's magic
    assert load_static_vectors(tmp_path / "BZh.txt").words == ["BZh9", "cat"]
    with pytest.raises(ValueError, match="row 1 \\('cat'\\) holds NaN or infinity"):
        StaticVectors(["the", "cat"], np.array([[0.1, 0.2], [np.nan, 0.0]]), lowercase=False)


def test_a_feature_cache_folder_that_cannot_be_one_is_named(tmp_path):
    from elmo_features import FeatureCache
    from elmo_features.util.errors import PathError

    for bad in (None, 123):
        with pytest.raises(TypeError, match="cache_dir must be a str or a path"):
            FeatureCache(bad)
    (tmp_path / "file").write_text("x")
    with pytest.raises(PathError, match="cannot create .*file.sub: .*file is a file, not a folder"):
        FeatureCache(tmp_path / "file" / "sub")


def test_a_cache_dir_that_is_an_encoder_or_wordnet_folder_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    for name, marker in (("enc", "config.json"), ("wn", "index.sense")):
        (tmp_path / name).mkdir()
        (tmp_path / name / marker).write_text("{}" if name == "enc" else "bank%1:14:00:: 08420278 1 20\n")
        (tmp_path / name / ("model.safetensors" if name == "enc" else "data.noun")).write_bytes(b"")
        assert main(["run", cfg, "--out", f"R{name}", "--cache-dir", name, "--progress", "off"]) == 2
        one_line_error(capsys, f"--cache-dir {name}: holds {marker}")


# ---------------------------------------------------------------- list eighteen

def test_list_eighteen_paths_sense_files_comments_and_pipes(tmp_path, capsys, monkeypatch, senses):
    import h5py

    from elmo_features.util.config_files import apply_set
    from elmo_features.util.errors import ConfigError
    from elmo_tasks.cli.run import warn_unrepeatable

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", "R", "--cache-dir", "~nosuchuser_xyz/c", "--progress", "off"]) == 2
    one_line_error(capsys, "no such user's home folder")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text("{}")  # a user's own config beside the cache: not a model folder
    assert main(["run", cfg, "--out", "R2", "--cache-dir", str(mine), "--progress", "off"]) == 0
    path = tmp_path / "s.h5"
    path.write_bytes((senses / "senses.h5").read_bytes())
    with h5py.File(path, "a") as f:
        del f["context"]
    capsys.readouterr()
    assert main(["wsd", "tag", str(senses / "in.txt"), "--senses", str(path)]) == 2
    one_line_error(capsys, "dataset context is missing; the file is damaged")
    with pytest.raises(ConfigError, match="cut the value to 0.01; drop the comment"):
        apply_set({}, "training.lr=0.01 # note")
    import os
    os.mkfifo(tmp_path / "fifo.yaml")
    warn_unrepeatable(str(tmp_path / "fifo.yaml"))
    assert "fifo.yaml is a pipe" in capsys.readouterr().err

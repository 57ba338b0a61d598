"""Hostile cases, list eighteen's leftovers and list nineteen: where a cache folder came from and what kind of
folder it is, files that are archives or arrays given as text, pipes given to the WSD command, vectors that carry no
information, a WSD training set with one sense, and the Python API's checks of words, overrides and cache folders."""
from __future__ import annotations

import bz2
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from elmo_tasks.cli import main

from signal_helpers import default_stop_signals
from test_reliability_outputs_r3 import bank_wsd_config, senses  # noqa: F401  (senses: a module fixture)
from test_tasks_helpers import one_line_error, static_config_file

FAST = ["--cache-dir", "none", "--progress", "off"]


def _cli(args: list[str], cwd: Path, **env: str):
    """``python -m elmo_tasks.cli ARGS`` in ``cwd`` with ``env`` added: (exit code, stderr)."""
    import subprocess
    import sys

    run_env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), **env}
    p = subprocess.run([sys.executable, "-m", "elmo_tasks.cli", *args], cwd=cwd, env=run_env, capture_output=True,
                       text=True, timeout=300)
    return p.returncode, p.stderr.strip()


def test_a_cache_folder_from_the_environment_is_named_as_such_with_its_kind(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    wn = tmp_path / "wn"
    wn.mkdir()
    (wn / "index.sense").write_text("bank%1:14:00:: 08420278 1 20\n")
    code, err = _cli(["run", cfg, "--out", "R", "--progress", "off"], tmp_path, ELMO_TASKS_FEATURE_CACHE=str(wn))
    assert code == 2 and err.count("\n") == 0, err
    assert err.startswith(f"error: $ELMO_TASKS_FEATURE_CACHE {wn}: holds index.sense, so it is a WordNet folder"), err
    assert main(["run", cfg, "--out", "R3", "--cache-dir", str(wn), "--progress", "off"]) == 2
    one_line_error(capsys, f"--cache-dir {wn}: holds index.sense, so it is a WordNet folder")


def test_archives_and_arrays_given_as_text_are_named_without_the_vectors_hints(tmp_path, capsys, monkeypatch):
    import lzma

    from elmo_features.util.text_input import binary_kind
    from elmo_tasks.data.static_vectors import load_static_vectors

    text = b"the 0.1 0.2\ncat 0.3 0.4\n"
    assert "7z archive" in binary_kind(b"7z\xbc\xaf\x27\x1c\x00\x04")
    assert "lzma" in binary_kind(lzma.compress(text, format=lzma.FORMAT_ALONE))
    assert "bzip2" in binary_kind(bz2.compress(b""))  # an empty stream: no first block
    np.save(tmp_path / "a.npy", np.ones((2, 2), dtype=np.float32))
    (tmp_path / "w2v.txt").write_bytes(b"2 2\nthe \x00\x00\x80\xbf\xff\xff\x7f\x7f\n")
    with pytest.raises(Exception, match="after a 'count dim' header; a word2vec binary file needs format="):
        load_static_vectors(tmp_path / "w2v.txt")
    (tmp_path / "l1.txt").write_bytes("caf\xe9 0.1 0.2\n".encode("latin-1"))
    with pytest.raises(Exception) as e:
        load_static_vectors(tmp_path / "l1.txt")
    assert "word2vec" not in str(e.value) and "UTF-8" in str(e.value)
    with pytest.raises(Exception, match="NumPy .npy array, not text; give it with format npy"):
        load_static_vectors(tmp_path / "a.npy", format="text")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "a.npy", "--out", "R"]) == 2
    assert "format npy" not in one_line_error(capsys, "a.npy: the file is a NumPy .npy array, not text")


def test_embed_stops_at_a_binary_signature_without_reading_on(tmp_path):
    from elmo_features.embedding.embed_input import EmbedInput
    from elmo_features.util.text_input import BinaryFileError

    np.save(tmp_path / "a.npy", np.ones((4, 4), dtype=np.float32))
    with pytest.raises(BinaryFileError) as e:
        EmbedInput(tmp_path / "a.npy")
    assert str(e.value).count(";") == 0 and "NumPy .npy array, not text" in str(e.value)


def test_a_wsd_config_read_through_a_descriptor_is_said_not_to_rerun(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(bank_wsd_config(tmp_path) | {"features": []}))
    with open(tmp_path / "w.yaml") as f:
        assert main(["wsd", "--config", f"/proc/self/fd/{f.fileno()}", "--out", "W", "--no-plot", *FAST]) == 0
    assert "is a pipe: the command recorded with the results cannot be run again" in capsys.readouterr().err


def test_vectors_that_are_all_the_same_are_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    lines = Path(env["glove"]).read_text().splitlines()
    same = [ln.split()[0] + " " + " ".join(["0.5"] * (len(ln.split()) - 1)) for ln in lines]
    (tmp_path / "same.txt").write_text("\n".join(same) + "\n")
    assert main(["run", cfg, "--out", "R", "--set", f"features.path={tmp_path / 'same.txt'}", *FAST]) == 2
    one_line_error(capsys, "every word has the same vector")


def test_a_wsd_training_set_of_one_sense_is_refused_before_any_embedding(tmp_path, capsys, monkeypatch):
    from wsd_toy import ToyInstance as I
    from wsd_toy import write_dataset

    monkeypatch.chdir(tmp_path)
    cfg = bank_wsd_config(tmp_path) | {"features": ["elmo"], "knn": ["layers"], "head": {"name": "wsd_linear"}}
    river = lambda: I("bank", "bank", "NOUN", ["bank%1:17:01::"])
    write_dataset(tmp_path / "one", "one", [["the", river(), "of", "the", "river"]] * 4)
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["wsd", "--config", "w.yaml", "--train", "one", "--out", "W", "--no-plot", *FAST]) == 2
    err = capsys.readouterr()
    assert "1-NN" not in err.out and "Traceback" not in err.err, err
    assert err.err.strip().splitlines()[-1].startswith("error: ") and "has the gold key bank%1:17:01::" in err.err
    assert "label column" not in err.err


def test_the_python_api_checks_words_overrides_and_cache_folders(tmp_path, monkeypatch):
    from elmo_features import FeatureCache
    from elmo_features.util.errors import PathError
    from elmo_tasks.data.static_vectors import StaticVectors
    from elmo_tasks.experiment.config import load_config

    for words in (["a", 1], ["a", None], ["a", ""]):
        with pytest.raises(ValueError, match=r"words\[1\] .*must be a non-empty str"):
            StaticVectors(words, np.ones((2, 2)), lowercase=False)
    env, cfg = static_config_file(tmp_path)
    for bad in ("name=x", [("name", "x")], [1]):
        with pytest.raises(TypeError, match="overrides must be a list of 'key.sub=value' strings"):
            load_config(cfg, bad)
    assert load_config(cfg, None).name == load_config(cfg).name
    monkeypatch.chdir(tmp_path)
    os.symlink("nowhere/x", "dang")
    for bad, says in (("~nosuchuser_xyz/x", "no such user's home folder"), ("dang", "is a symlink to nowhere/x"),
                      (Path(""), "Path\\('.'\\)"), ("/proc/1/x", "FeatureCache")):
        with pytest.raises(PathError, match=says):
            FeatureCache(bad)
    assert FeatureCache(".").cache_dir == Path(".")


# ---------------------------------------------------------------- list nineteen

def test_a_stop_signal_while_the_command_loads_is_one_line(tmp_path):
    """Ctrl-C, SIGHUP or SIGTERM in the first second, while torch loads (before main's handlers): exit 128 + the
    signal, the one line a command still starting prints, no import traceback."""
    import signal
    import subprocess
    import sys
    import time

    run_env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        p = subprocess.Popen([sys.executable, "-m", "elmo_tasks.cli", "components"], cwd=tmp_path, env=run_env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             preexec_fn=default_stop_signals)
        time.sleep(0.4)
        p.send_signal(sig)
        err = p.communicate(timeout=60)[1]
        assert p.returncode == 128 + sig and err.strip() == "interrupted; it was still starting (checking its inputs, " \
            "loading), and nothing was written: rerun the same command", (sig, p.returncode, err[-800:])


def test_word2vec_files_whose_header_does_not_fit_and_latin1_text_are_told_apart(tmp_path):
    import struct

    from elmo_tasks.data.static_vectors import load_static_vectors

    rows = b"".join(w + b" " + struct.pack("<6f", *range(6)) + b"\n" for w in (b"john", b"paris", b"lives"))
    (tmp_path / "w.bin").write_bytes(b"3 5\n" + rows)  # each row holds 6 floats; the header says 5
    with pytest.raises(Exception, match="the header's dimension 5 does not fit the rows"):
        load_static_vectors(tmp_path / "w.bin")
    (tmp_path / "ok.bin").write_bytes(b"3 6\n" + rows)
    assert load_static_vectors(tmp_path / "ok.bin").words == ["john", "paris", "lives"]
    (tmp_path / "more.bin").write_bytes(b"2 6\n" + rows)  # one row more than the header says
    with pytest.raises(Exception, match="follow the 2 x 6 float32 vectors the header says"):
        load_static_vectors(tmp_path / "more.bin")
    (tmp_path / "v.vec").write_bytes("2 2\ncaf\xe9 0.1 0.2\nthe 0.3 0.4\n".encode("latin-1"))
    with pytest.raises(Exception) as e:
        load_static_vectors(tmp_path / "v.vec")
    assert "word2vec_bin" not in str(e.value) and "iconv -f latin1" in str(e.value)


def test_token_vectors_that_are_archives_or_carry_nothing_are_named(tmp_path):
    from elmo_features.training.vectors import VectorFileError, read_vector_table

    (tmp_path / "v.7z").write_bytes(b"7z\xbc\xaf\x27\x1c\x00\x04" + bytes(range(200)))
    (tmp_path / "eq.txt").write_text("the 0.5 0.5\ncat 0.5 0.5\n")
    (tmp_path / "zero.txt").write_text("the 0 0\ncat 0 0\n")
    for name, says in (("v.7z", "7z archive"), ("eq.txt", "every word has the same vector"),
                       ("zero.txt", "every vector is zero")):
        with pytest.raises(VectorFileError, match=says) as e:
            read_vector_table(tmp_path / name)
        assert name in str(e.value)


def test_cache_dir_values_that_are_empty_or_none_with_spaces(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", "R", "--cache-dir", "", "--progress", "off"]) == 2
    one_line_error(capsys, "--cache-dir: empty path; give a folder, or 'none'")
    assert main(["run", cfg, "--out", "R2", "--cache-dir", " none", "--progress", "off"]) == 0
    assert not (tmp_path / " none").exists()


def test_wsd_one_key_without_a_head_warns_and_inputs_are_not_outputs(tmp_path, capsys, monkeypatch):
    from wsd_toy import ToyInstance as I
    from wsd_toy import write_dataset

    monkeypatch.chdir(tmp_path)
    cfg = bank_wsd_config(tmp_path) | {"features": ["elmo"], "knn": ["layers"]}
    write_dataset(tmp_path / "one", "one", [["the", I("bank", "bank", "NOUN", ["bank%1:17:01::"]), "of", "it"]] * 4)
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["wsd", "--config", "w.yaml", "--train", "one", "--out", "W", "--no-plot", *FAST]) == 0
    assert "the 1-NN rows can answer only that sense" in capsys.readouterr().err
    for flag, folder, kind in (("--runs-dir", "wn", "a WordNet folder"), ("--runs-dir", "bilm", "a biLM's model"),
                               ("--cache-dir", "train", "a WSD data folder")):
        args = ["wsd", "--config", "w.yaml", "--out", f"W{flag}", "--no-plot", "--progress", "off", flag, folder]
        assert main(args + (["--cache-dir", "none"] if flag == "--runs-dir" else [])) == 2
        one_line_error(capsys, f"{flag} {folder}: holds ", kind)


def test_vectors_that_carry_nothing_are_refused_before_a_comparison_trains(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    lines = Path(env["glove"]).read_text().splitlines()
    (tmp_path / "same.txt").write_text("\n".join(ln.split()[0] + " 0.5 0.5" for ln in lines) + "\n")
    (tmp_path / "two.txt").write_text("a 0.5 0.5\nb 0.5 0.5\n" + Path(env["glove"]).read_text())
    sources = (f"compare.sources={{g: {{name: static, path: {env['glove']}}}, "
               f"s: {{name: static, path: {tmp_path / 'same.txt'}}}}}")
    assert main(["compare", cfg, "--set", sources, "--runs-dir", "RR", *FAST, "--seeds", "1"]) == 2
    err = capsys.readouterr().err
    assert "every word has the same vector" in err and not list((tmp_path / "RR").rglob("metrics.json")), err
    assert main(["run", cfg, "--out", "R", "--set", f"features.path={tmp_path / 'two.txt'}",
                 "--set", "features.max_vectors=2", *FAST]) == 2
    one_line_error(capsys, "(the first 2 of the file: max_vectors 2; raise it)")


def test_signatures_and_pipes_are_not_taken_for_what_they_are_not(tmp_path, capsys):
    from elmo_features.util.cli_types import warn_unrepeatable
    from elmo_features.util.text_input import binary_kind

    assert binary_kind("]abc def".encode("utf-32-le")) is None  # UTF-32 text that starts with "]"
    (tmp_path / "c.yaml").write_text("name: x\n")
    warn_unrepeatable(f"/proc/self/cwd/{tmp_path / 'c.yaml'}")
    assert capsys.readouterr().err == ""


def test_a_test_split_whose_every_word_is_unknown_is_warned_about(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    raw = yaml.safe_load(Path(cfg).read_text())
    test = Path(raw["data"]["test"])
    lines = [ln.split(" ") if ln.strip() else [] for ln in test.read_text().splitlines()]
    (tmp_path / "oov.tsv").write_text("".join(" ".join(["zzqx" + p[0], *p[1:]]) + "\n" if p else "\n" for p in lines))
    assert main(["run", cfg, "--out", "R", "--set", f"data.test={tmp_path / 'oov.tsv'}", *FAST]) == 0
    assert "100% of the test tokens" in capsys.readouterr().err


def test_the_python_api_takes_generators_and_refuses_words_no_token_matches(tmp_path, senses):  # noqa: F811
    from elmo_features import FeatureCache
    from elmo_features.util.errors import PathError, UsageError
    from elmo_tasks.data.static_vectors import StaticVectors
    from elmo_tasks.experiment.config import load_config
    from elmo_tasks.wsd.tagging import SenseTagger

    env, cfg = static_config_file(tmp_path)
    assert load_config(cfg, (s for s in ["name=from_a_generator"])).name == "from_a_generator"
    assert load_config(cfg, map(str, ["name=mapped"])).name == "mapped"
    with pytest.raises(TypeError, match="overrides must be a list"):
        load_config(cfg, {"name": "x"})
    with pytest.raises(ValueError, match="ends with a line break"):
        StaticVectors(["john\n", "b"], np.ones((2, 2)), lowercase=False)
    with pytest.raises(ValueError, match="0 dimensions"):
        StaticVectors(["a", "b"], np.zeros((2, 0)), lowercase=False)
    with pytest.raises(PathError, match="so it is a WordNet folder"):
        FeatureCache(senses / "wn")
    with pytest.raises(TypeError, match="SenseTagger: prior must be True or False"):
        SenseTagger(senses / "senses.h5", prior="yes")
    with pytest.raises(UsageError, match="drop SenseTagger\\(prior=True\\)"):
        SenseTagger(senses / "senses.h5", prior=True)


def test_wsd_senses_says_which_set_values_it_does_not_read(capsys):
    from elmo_tasks.wsd.config import warn_senses_inert

    warn_senses_inert(["knn=[layers]", "head_dev_every=10", "training.lr=0.1", "gloss_texts=[full]"])
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "--set knn=[layers]: wsd senses does not read knn" in err[0], err
    assert "does not read training" in err[1]


# ---------------------------------------------------------------- list twenty

def test_vectors_files_with_odd_words_load(tmp_path, capsys, monkeypatch):
    import struct

    from elmo_tasks.data.static_vectors import load_static_vectors

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    odd = ["paris\xa0", "\u200b", "a\x85b", "\u200f", "x\ty"]  # crawled files hold a few such words
    text = Path(env["glove"]).read_text()
    dim = len(text.splitlines()[0].split()) - 1
    (tmp_path / "odd.txt").write_text(text + "".join(w + " 0.5" * dim + "\n" for w in odd), encoding="utf-8")
    assert load_static_vectors(tmp_path / "odd.txt").words[-5:] == odd
    assert main(["run", cfg, "--out", "R", "--set", f"features.path={tmp_path / 'odd.txt'}", *FAST]) == 0
    words = [b"the", "\u200b".encode(), b"x\ty", b"a\x1bb"]
    (tmp_path / "odd.bin").write_bytes(b"4 2\n" + b"".join(w + b" " + struct.pack("<2f", 0.5, i) + b"\n"
                                                            for i, w in enumerate(words)))
    assert load_static_vectors(tmp_path / "odd.bin").words == [w.decode() for w in words]


def test_token_vectors_read_headers_and_name_what_they_cannot_read(tmp_path):
    import struct

    from elmo_features.training.vectors import VectorFileError, read_vector_table, vocabulary_rows

    (tmp_path / "ft.vec").write_text("2 2 \nthe 0.1 0.2 \ncat 0.3 0.4 \n")  # fastText: a header, trailing spaces
    words, mat = read_vector_table(tmp_path / "ft.vec", 2)
    assert words == ["the", "cat"] and mat.shape == (2, 2)
    (tmp_path / "g.bin").write_bytes(b"2 2\n" + b"".join(w + b" " + struct.pack("<2f", 0.5, 1.5) + b"\n"
                                                           for w in (b"the", b"cat")))
    (tmp_path / "t.txt.gz").write_text("the 0.1 0.2\n")
    folder = tmp_path / "npy"
    folder.mkdir()
    np.save(folder / "vectors.npy", np.array([[0.1, 0.2], [0.3, 0.4]], dtype=np.float32))
    (folder / "words.txt").write_bytes("caf\xe9\nthe\n".encode("latin-1"))
    for path, says in ((tmp_path / "g.bin", "a word2vec binary file"), (tmp_path / "t.txt.gz", "not gzip"),
                       (folder, "words.txt: not UTF-8 text")):
        with pytest.raises(VectorFileError, match=says):
            read_vector_table(path)
    (folder / "words.txt").write_bytes("\ufeffthe\ncat\n".encode("utf-8"))
    assert read_vector_table(folder)[0] == ["the", "cat"]  # (the byte-order mark is not part of the first word)
    with pytest.raises(TypeError, match="dim must be an integer"):
        read_vector_table(tmp_path / "ft.vec", "2")
    with pytest.raises(TypeError, match="path must be a non-empty str or path"):
        read_vector_table(None)
    with pytest.raises(VectorFileError, match="none of its 2 words is in the biLM vocabulary"):
        vocabulary_rows(tmp_path / "ft.vec", ["zz", "yy"], words, mat, True)


def test_a_users_program_that_imports_the_command_keeps_its_own_ctrl_c(tmp_path):
    import subprocess
    import sys

    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("import elmo_tasks.cli\n")
    (tmp_path / "mypkg" / "__main__.py").write_text("import signal\nprint(signal.getsignal(signal.SIGINT))\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-m", "mypkg"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120, preexec_fn=default_stop_signals).stdout  # (as a terminal's foreground program)
    assert "default_int_handler" in out, out


def test_folder_kinds_need_their_companion_files(tmp_path):
    from elmo_features.util.errors import PathError
    from elmo_tasks.experiment.preflight import check_output_dirs

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "options.json").write_text('{"lr": 0.1}')  # a user's own settings; a Keras model; another tool's XML
    (mine / "weights.hdf5").write_bytes(b"")
    (mine / "weights.hdf5").unlink()
    (mine / "results.data.xml").write_text("<data/>")
    (mine / "data.noun").write_text("my nouns")
    check_output_dirs(runs_dir=mine, cache_dir=mine)
    run = tmp_path / "bilm_run"
    run.mkdir()
    (run / "checkpoint.pt").write_bytes(b"")
    (run / "vocab.txt").write_text("the\n")
    with pytest.raises(PathError, match="so it is a train-bilm run folder"):
        check_output_dirs(runs_dir=run)
    (mine / "test.data.xml").write_text('<?xml version="1.0"?>\n<corpus lang="en">\n</corpus>\n')
    with pytest.raises(PathError, match="so it is a WSD data folder"):
        check_output_dirs(runs_dir=mine)


def test_vectors_sniffing_latin1_rows_with_spaces_and_text_named_bin(tmp_path):
    from elmo_tasks.data.static_vectors import load_static_vectors

    (tmp_path / "s.vec").write_bytes("2 3\n. . . 0.1 0.2 0.3\ncaf\xe9 0.4 0.5 0.6\n".encode("latin-1"))
    with pytest.raises(Exception) as e:
        load_static_vectors(tmp_path / "s.vec")
    assert "iconv -f latin1" in str(e.value) and "word2vec_bin" not in str(e.value)
    (tmp_path / "text.bin").write_text("2 3\nthe 0.1 0.2 0.3\ncat 0.4 0.5 0.6\n")
    assert load_static_vectors(tmp_path / "text.bin").words == ["the", "cat"]


def test_warnings_are_said_once(tmp_path, capsys):
    from test_reliability_models_r3b import _static, _vectors

    source = _static(_vectors(tmp_path / "other.txt", ["zz1", "zz2"]))
    for _ in range(3):  # three seeds' runs of one comparison
        source.precompute([["the", "cat"]], "test")
    assert capsys.readouterr().err.count("100% of the test tokens") == 1


def test_two_weights_files_are_warned_about_only_when_they_differ(tmp_path, capsys):
    import torch
    from safetensors.torch import load_file

    from elmo_features.encoders.loading import load_encoder
    from encoder_helpers import make_bert

    same, other = make_bert(tmp_path / "same"), make_bert(tmp_path / "other")
    tensors = load_file(same / "model.safetensors")
    torch.save(tensors, same / "pytorch_model.bin")
    torch.save({k: v + 1 for k, v in tensors.items()}, other / "pytorch_model.bin")
    load_encoder(str(same))
    assert "holds both" not in capsys.readouterr().err
    load_encoder(str(other))
    assert "holds both model.safetensors and pytorch_model.bin (with other weights)" in capsys.readouterr().err


def test_cache_dir_words_that_mean_off_and_api_misuse(tmp_path, capsys, monkeypatch):
    from elmo_features import FeatureCache
    from elmo_features.util.errors import PathError
    from elmo_tasks.experiment.config import load_config

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    for word in ("off", "false", "none/"):
        assert main(["run", cfg, "--out", "R", "--cache-dir", word, "--progress", "off"]) == 2
        one_line_error(capsys, f"--cache-dir {word}: would make a folder named", "turned off with 'none'")
        assert not (tmp_path / word).exists()
    for bad in (" none", "NONE"):
        with pytest.raises(PathError, match="to embed without a cache, use no FeatureCache"):
            FeatureCache(bad)
    with pytest.raises(TypeError, match="for a dict, use elmo_tasks.experiment.config.resolve"):
        load_config({"name": "x"})
    with pytest.raises(TypeError, match="in the order they apply"):
        load_config(cfg, {"name=a", "name=b"})


# ---------------------------------------------------------------- list twenty-one

def test_word2vec_binaries_gzipped_with_odd_words_and_fasttext_models(tmp_path):
    import gzip
    import struct

    from elmo_features.training.vectors import VectorFileError, read_vector_table
    from elmo_tasks.data.static_vectors import load_static_vectors

    words = [b"the", b"john\r", b"cat"]  # (vectors trained on Windows text)
    data = b"3 2\n" + b"".join(w + b" " + struct.pack("<2f", 0.5, i) + b"\n" for i, w in enumerate(words))
    (tmp_path / "cr.bin").write_bytes(data)
    assert load_static_vectors(tmp_path / "cr.bin").words == ["the", "john\r", "cat"]
    (tmp_path / "g.bin.gz").write_bytes(gzip.compress(data))  # GoogleNews-vectors-negative300.bin.gz
    assert load_static_vectors(tmp_path / "g.bin.gz").words == ["the", "john\r", "cat"]
    (tmp_path / "g.vec.gz").write_bytes(gzip.compress(data))
    with pytest.raises(Exception, match="a gzip-compressed word2vec binary file; give it with format='word2vec_bin'"):
        load_static_vectors(tmp_path / "g.vec.gz")
    with pytest.raises(VectorFileError, match="a word2vec binary file"):
        read_vector_table(tmp_path / "g.bin.gz")
    (tmp_path / "cc.en.300.bin").write_bytes(b"\xba\x16\x4f\x2f" + bytes(100))
    with pytest.raises(Exception, match="a fastText model"):
        load_static_vectors(tmp_path / "cc.en.300.bin")
    (tmp_path / "l1.bin").write_bytes("2 2\ncaf\xe9 0.1 0.2\nthe 0.3 0.4\n".encode("latin-1"))  # text named .bin
    with pytest.raises(Exception, match="iconv -f latin1"):
        load_static_vectors(tmp_path / "l1.bin")
    (tmp_path / "cr.txt").write_text("the 0.1 0.2\nfoo\rbar 0.3 0.4\n", newline="")  # a CR inside one word
    assert load_static_vectors(tmp_path / "cr.txt").words == ["the", "foo\rbar"]


def test_token_vectors_headers_that_do_not_fit_utf16_words_and_low_coverage(tmp_path, capsys):
    from elmo_features.training.vectors import VectorFileError, read_vector_table, vocabulary_rows

    (tmp_path / "h5.vec").write_text("2 5\nthe 0.1 0.2 0.3 0.4\ncat 0.1 0.2 0.3 0.4\n")  # a text file, a wrong header
    with pytest.raises(VectorFileError, match="line 2: 4 values, expected 5"):
        read_vector_table(tmp_path / "h5.vec")
    folder = tmp_path / "tv"
    folder.mkdir()
    np.save(folder / "vectors.npy", np.array([[0.1, 0.2], [0.3, 0.4]], dtype=np.float32))
    (folder / "words.txt").write_bytes("the\ncat\n".encode("utf-16"))
    with pytest.raises(VectorFileError, match="UTF-16"):
        read_vector_table(folder)
    with pytest.raises(TypeError, match="non-empty"):
        read_vector_table("")
    vocab = ["the", "a", "b", "c", "d"]
    vocabulary_rows("one.txt", vocab, ["the", "zz"], np.array([[0.1, 0.2], [0.3, 0.4]], dtype=np.float32), True)
    assert "only 1 of the 5 vocabulary words have a vector (20%)" in capsys.readouterr().err


def test_the_start_up_handler_knows_python_dash_m_without_a_space(monkeypatch):
    import sys

    import elmo_tasks.cli as cli

    monkeypatch.setattr(sys, "argv", ["x"])
    for orig, expected in ((["python", "-melmo_tasks.cli", "run"], True),
                           (["python", "-X", "utf8", "-m", "elmo_tasks.cli"], True),
                           (["python", "-m", "mypkg"], False), (["python", "-mmypkg"], False)):
        monkeypatch.setattr(sys, "orig_argv", orig)
        assert cli._is_the_command() is expected, orig


def test_a_stop_while_the_wsd_plot_is_drawn_says_the_table_is_complete(tmp_path, capsys, monkeypatch):
    import elmo_tasks.wsd.run as wsd_run

    def stopped(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(bank_wsd_config(tmp_path) | {"features": []}))
    monkeypatch.setattr(wsd_run, "plot_f1_per_layer", stopped)
    assert main(["wsd", "--config", "w.yaml", "--out", "W", *FAST]) == 130
    assert "the table in W is complete (table5.md, scores.json); its plot f1_per_layer.png was not drawn" in \
        capsys.readouterr().err


def test_folder_kinds_by_allennlp_names_shards_and_content(tmp_path):
    from elmo_features.util.errors import PathError
    from elmo_tasks.experiment.preflight import check_output_dirs

    allen = "elmo_2x1024_128_2048cnn_1xhighway"
    cases = {"elmo": ([f"{allen}_options.json", f"{allen}_weights.hdf5"], "a biLM's model folder"),
             "sharded": (["config.json", "model-00001-of-00002.safetensors", "model.safetensors.index.json"],
                         "an encoder's model folder"),
             "wn": (["index.sense"], "a WordNet folder")}
    for name, (files, kind) in cases.items():
        (tmp_path / name).mkdir()
        for f in files:
            (tmp_path / name / f).write_text("bank%1:14:00:: 08420278 1 20\n" if f == "index.sense" else "{}")
        for flag in ("runs_dir", "cache_dir"):
            with pytest.raises(PathError, match=kind):
                check_output_dirs(**{flag: tmp_path / name})
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "t.data.xml").write_text("<?xml version='1.0'?>\n<!--" + "licence " * 500 + "-->\n<corpus>")
    with pytest.raises(PathError, match="a WSD data folder"):
        check_output_dirs(runs_dir=tmp_path / "test")


def test_more_api_misuse_and_off_words(tmp_path, capsys, monkeypatch):
    from elmo_features import Embedder, FeatureCache
    from elmo_features.hub import ElmoHub
    from elmo_features.util.errors import PathError
    from elmo_tasks.data.static_vectors import load_static_vectors
    from elmo_tasks.experiment.config import load_config
    from elmo_tasks.experiment.run import run_experiment

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", "R", "--cache-dir", "null", "--progress", "off"]) == 2
    one_line_error(capsys, "--cache-dir null: would make a folder named")
    for word in ("off", "None/"):
        with pytest.raises(PathError, match="use no FeatureCache"):
            FeatureCache(word)
    with pytest.raises(TypeError, match="load_static_vectors: path must be a non-empty str or path"):
        load_static_vectors(None)
    for cls in (ElmoHub, Embedder):
        with pytest.raises(TypeError, match="takes one model: .*not AllenNLP's Elmo\\(options_file, weight_file\\)"):
            cls("b/options.json", "b/weights.hdf5")
    with pytest.raises(TypeError, match="context must be a FeatureContext or None"):
        run_experiment(load_config(cfg), tmp_path / "R1", context="cache")
    assert not (tmp_path / "R1").exists()


def test_two_weights_files_that_cannot_be_compared_are_said_so(tmp_path, capsys):
    import torch
    from transformers import BertModel

    from elmo_features.encoders.loading import load_encoder
    from encoder_helpers import make_bert

    folder = make_bert(tmp_path / "whole")
    torch.save(BertModel.from_pretrained(folder), folder / "pytorch_model.bin")  # a whole pickled model
    capsys.readouterr()
    load_encoder(str(folder))
    assert "holds both model.safetensors and pytorch_model.bin (not compared: sharded, or not a plain state " \
        "dict)" in capsys.readouterr().err


def test_a_config_json_of_another_family_over_these_weights_is_warned_about(tmp_path, capsys):
    import json

    from elmo_features.encoders.loading import load_encoder
    from encoder_helpers import make_bert

    folder = make_bert(tmp_path / "e")
    load_encoder(str(folder))
    assert "goes with" not in capsys.readouterr().err
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"model_type": "roberta", "architectures": ["RobertaModel"]}))
    load_encoder(str(folder))
    assert "config.json's model_type roberta goes with RobertaTokenizer, but tokenizer_config.json names " \
        "BertTokenizer" in capsys.readouterr().err
    (folder / "config.json").write_text(json.dumps(config))  # bert again, with a generic or a family tokenizer
    for named in ("PreTrainedTokenizerFast", "DistilBertTokenizer", "ElectraTokenizerFast"):
        tok = json.loads((folder / "tokenizer_config.json").read_text())
        (folder / "tokenizer_config.json").write_text(json.dumps(tok | {"tokenizer_class": named}))
        load_encoder(str(folder))
        assert "goes with" not in capsys.readouterr().err, named


# ---------------------------------------------------------------- list twenty-two

def test_word2vec_headers_beyond_the_file_doubly_gzipped_and_gzipped_fasttext(tmp_path):
    import gzip
    import struct

    from elmo_features.training.vectors import VectorFileError, read_vector_table
    from elmo_tasks.data.static_vectors import load_static_vectors

    rows = b"".join(w + b" " + struct.pack("<5f", *range(5)) + b"\n" for w in (b"the", b"cat"))
    (tmp_path / "h.bin").write_bytes(b"3000000000 300\n" + rows)
    with pytest.raises(Exception, match="the header says 3000000000 x 300 float32, but the file holds"):
        load_static_vectors(tmp_path / "h.bin")
    (tmp_path / "twice.bin.gz").write_bytes(gzip.compress(gzip.compress(b"2 5\n" + rows)))
    with pytest.raises(Exception, match="decompressed, the file is gzip-compressed again; decompress it twice"):
        load_static_vectors(tmp_path / "twice.bin.gz")
    (tmp_path / "G.TXT.GZ").write_bytes(gzip.compress(b"2 5\n" + rows))
    with pytest.raises(Exception, match="a gzip-compressed word2vec binary file"):
        load_static_vectors(tmp_path / "G.TXT.GZ", format="text")
    (tmp_path / "cc.bin.gz").write_bytes(gzip.compress(b"\xba\x16\x4f\x2f" + bytes(1000)))
    with pytest.raises(Exception, match="decompressed, the file is a fastText model"):
        load_static_vectors(tmp_path / "cc.bin.gz")
    with pytest.raises(VectorFileError, match="decompressed, the file is a fastText model"):
        read_vector_table(tmp_path / "cc.bin.gz")


def test_python_dash_m_with_joined_flags_and_prefixed_allennlp_pairs(tmp_path, monkeypatch):
    import sys

    import elmo_tasks.cli as cli
    from elmo_tasks.experiment.preflight import check_output_dirs

    monkeypatch.setattr(sys, "argv", ["x"])
    for orig, expected in ((["python", "-um", "elmo_tasks.cli"], True), (["python", "-Bmelmo_tasks.cli"], True),
                           (["python", "-um", "mypkg"], False), (["python", "-W", "ignore", "-m", "elmo_tasks.cli"], True)):
        monkeypatch.setattr(sys, "orig_argv", orig)
        assert cli._is_the_command() is expected, orig
    keras = tmp_path / "keras"
    keras.mkdir()
    (keras / "train_options.json").write_text("{}")
    (keras / "model_weights.hdf5").write_bytes(b"")
    check_output_dirs(cache_dir=keras, runs_dir=keras)  # two names that are no AllenNLP pair


def test_utf16_without_a_byte_order_mark_and_hub_calls_with_urls_or_a_file(tmp_path):
    from elmo_features.embedding.embed_input import EmbedInput
    from elmo_features.hub import ElmoHub
    from elmo_features.util.errors import UsageError
    from elmo_features.util.text_input import BinaryFileError

    (tmp_path / "u16.txt").write_bytes("the cat sat\nhello world\n".encode("utf-16-le"))
    with pytest.raises(BinaryFileError, match="UTF-16 without a byte-order mark; convert it \\(iconv -f UTF-16LE"):
        EmbedInput(tmp_path / "u16.txt")
    url = "https://allennlp.s3.amazonaws.com/models/elmo/x/elmo_2x4096_512_2048cnn_2xhighway_"
    with pytest.raises(TypeError, match="reads no URL: for AllenNLP's published ELMo give a preset's name"):
        ElmoHub(url + "options.json", url + "weights.hdf5")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "options.json").write_text("{}")
    with pytest.raises(UsageError, match="is a file; give its folder"):
        ElmoHub(str(tmp_path / "b" / "options.json"))


# ---------------------------------------------------------------- list twenty-three

def test_list_twenty_three_tabs_in_predict_nul_files_main_module_tilde_and_urls(tmp_path, capsys, monkeypatch):
    import sys

    import elmo_tasks.cli as cli
    from elmo_features.formats.default_model import resolve_bilm
    from elmo_features.util.errors import UsageError
    from elmo_features.util.text_input import utf16_order
    from elmo_tasks.data.static_vectors import load_static_vectors

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", "R", *FAST]) == 0
    (tmp_path / "in.txt").write_text("john lives\tB-PER O\n")
    capsys.readouterr()
    assert main(["predict", "R", "in.txt", "--cache-dir", "none"]) == 0
    assert "in.txt:1: a tab in a plain-text input" in capsys.readouterr().err
    (tmp_path / "blank.txt").write_text("john lives\n\nparis\n")
    assert main(["predict", "R", "blank.txt", "--cache-dir", "none"]) == 2
    one_line_error(capsys, "blank line", "give --reader")
    assert utf16_order(bytes(8), first=True) is None  # all NUL bytes: not text of any kind
    monkeypatch.setattr(sys, "argv", ["x"])
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "elmo_tasks.cli.__main__"])
    assert cli._is_the_command()
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load_static_vectors("~/" + Path(env["glove"]).relative_to(tmp_path).as_posix()).dim > 0
    with pytest.raises(UsageError, match="no biLM is read from a URL"):
        resolve_bilm("https://allennlp.s3.amazonaws.com/models/elmo/x")


def test_an_embed_file_given_as_senses_and_a_doubly_gzipped_token_vectors_file(tmp_path, capsys):
    import gzip

    import h5py

    from elmo_features.training.vectors import VectorFileError, read_vector_table

    with h5py.File(tmp_path / "e.h5", "w") as f:
        f["0"] = np.zeros((3, 2, 4), dtype=np.float32)
    (tmp_path / "in.txt").write_text("the bank\n")
    assert main(["wsd", "tag", str(tmp_path / "in.txt"), "--senses", str(tmp_path / "e.h5")]) == 2
    one_line_error(capsys, "an HDF5 file, but not a sense file")
    (tmp_path / "t.txt.gz").write_bytes(gzip.compress(gzip.compress(b"the 0.1 0.2\n")))
    with pytest.raises(VectorFileError, match="decompressed, the file is gzip-compressed again; decompress it twice"):
        read_vector_table(tmp_path / "t.txt.gz")

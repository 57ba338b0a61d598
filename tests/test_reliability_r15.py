"""Hostile cases, list twenty-three's leftovers: UTF-16 without a byte-order mark in any script, on standard input
and in a config; tar archives given as vectors; shell patterns as training files; Jsonnet configs; text vectors named
.npy; framework files given to ``wsd tag``; biLM URLs in every form of the Python API."""
from __future__ import annotations

import contextlib
import io
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from elmo_tasks.cli import main

from signal_helpers import default_stop_signals
from test_reliability_outputs_r3 import bank_wsd_config, senses  # noqa: F401  (senses: a module fixture)
from test_tasks_helpers import one_line_error, static_config_file

FAST = ["--cache-dir", "none", "--progress", "off"]


@pytest.mark.parametrize("text, codec, line", [
    ("Москва большая\nпривет\n", "utf-16-le", 1),  # no NUL high byte in Cyrillic letters: the space has one
    ("Москва большая\n", "utf-16-be", 1),
    ("\nthe cat\n", "utf-16-le", 2),  # a blank first line: the next line starts with the line end's NUL
    ("I\nam\n", "utf-16-le", 1),  # one character
    ("I\nam\n", "utf-16-be", 1),
])
def test_utf16_without_a_byte_order_mark_in_any_script_or_line_length(tmp_path, text, codec, line):
    from elmo_features.embedding.embed_input import EmbedInput
    from elmo_features.util.text_input import BinaryFileError

    (tmp_path / "u.txt").write_bytes(text.encode(codec))
    order = codec[-2:].upper()
    with pytest.raises(BinaryFileError, match=f"u.txt:{line}: the file looks like UTF-16 without a byte-order mark; "
                                              f"convert it \\(iconv -f UTF-16{order} -t UTF-8 "):
        EmbedInput(tmp_path / "u.txt")


def test_nul_bytes_that_are_not_utf16_keep_the_nul_message(tmp_path):
    from elmo_features.embedding.embed_input import EmbedInput
    from elmo_features.util.errors import TextInputError
    from elmo_features.util.text_input import utf16_order

    for raw in (bytes(4096), b"the cat\x00\x01\x02\x03 sat\n", b"\x00\x01\x00\x02\n"):
        (tmp_path / "z.txt").write_bytes(raw)
        with pytest.raises(TextInputError, match="NUL byte at byte column"):
            EmbedInput(tmp_path / "z.txt")
    assert utf16_order("the cat".encode("utf-8"), first=True) is None  # no NUL: UTF-8's concern


def test_utf16_on_standard_input_and_in_a_config(tmp_path, capsys, monkeypatch):
    from elmo_features.embedding.embed_input import spool_input
    from elmo_features.util.errors import TextInputError

    data = "the cat sat\nhello world\n".encode("utf-16-le")
    with pytest.raises(TextInputError, match="stdin: the file looks like UTF-16 without a byte-order mark; convert "
                                             "it \\(iconv -f UTF-16LE -t UTF-8 -\\)"):
        spool_input("-", tmp_path / "spool", stdin=io.BytesIO(data))
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    Path("u16.yaml").write_bytes(Path(cfg).read_text().encode("utf-16-le"))
    assert main(["run", "u16.yaml", "--out", "R", *FAST]) == 2
    one_line_error(capsys, "u16.yaml: the file looks like UTF-16 without a byte-order mark", "UTF-16LE")
    Path("c.jsonnet").write_text('local lr = 0.01;\n{trainer: {lr: lr, glove: std.extVar("GLOVE")}}\n')
    assert main(["run", "c.jsonnet", "--out", "R", *FAST]) == 2
    one_line_error(capsys, "c.jsonnet: a Jsonnet file", "render it first (jsonnet c.jsonnet > config.json")
    assert not Path("R").exists()


def _tar(path: Path, member: str, data: bytes, gz: bool) -> Path:
    with tarfile.open(path, "w:gz" if gz else "w") as t:
        info = tarfile.TarInfo(member)
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return path


def test_vectors_in_a_tar_archive_are_named(tmp_path, capsys, monkeypatch):
    from elmo_features.training.vectors import VectorFileError, read_vector_table
    from elmo_features.util.text_input import binary_kind

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    glove = Path(env["glove"]).read_bytes()
    for name, gz in (("g.tar.gz", True), ("g.tar", False)):
        _tar(tmp_path / name, "glove.6B.50d.txt", glove, gz)
        assert main(["run", cfg, "--out", "R", "--set", f"features.path={tmp_path / name}", *FAST]) == 2
        one_line_error(capsys, f"{name}:1: the file is a tar archive; unpack it (tar xf ")
    with pytest.raises(VectorFileError, match="decompressed, the file is a tar archive"):
        read_vector_table(tmp_path / "g.tar.gz")
    head = b"custard " * 40  # "ustar" at offset 257 of text: no NUL-padded member name, so text
    assert head[257:262] == b"ustar" and binary_kind(head) is None


def test_text_vectors_named_npy_are_read_as_text_and_a_damaged_npy_is_named(tmp_path):
    from elmo_tasks.data.static_vectors import DataFormatError, load_static_vectors

    (tmp_path / "g.npy").write_text("the 0.1 0.2\ncat 0.3 0.5\n")
    assert load_static_vectors(tmp_path / "g.npy", progress=False).dim == 2
    (tmp_path / "r.npy").write_bytes(bytes(range(256)))
    with pytest.raises(DataFormatError, match="not a NumPy .npy file"):
        load_static_vectors(tmp_path / "r.npy", progress=False)


def test_a_pattern_in_train_files_is_refused_saying_what_it_matches(tmp_path, capsys, monkeypatch):
    from elmo_features.training.cli import _refuse_pattern
    from elmo_features.util.errors import UsageError

    monkeypatch.chdir(tmp_path)
    Path("shards").mkdir()
    for part in ("aa", "ab"):
        Path(f"shards/part.{part}.txt").write_text("the cat sat\n")
    with pytest.raises(UsageError, match=r"shards/\*.txt is a pattern, and patterns are not expanded \(it matches 2 "
                                         r"file\(s\)\); list the files, e.g."):
        _refuse_pattern("shards/*.txt", "c.yaml: train_files[0]")
    with pytest.raises(UsageError, match=r"it matches 0 file\(s\)\); list the files$"):
        _refuse_pattern("shards/*.gz", "c.yaml: train_files[0]")
    Path("odd[1].txt").write_text("a file whose name holds a bracket\n")
    _refuse_pattern("odd[1].txt", "c.yaml: train_files[0]")  # a file that exists is no pattern


def test_wsd_tag_refuses_framework_xml_and_gold_keys(senses, tmp_path, capsys):  # noqa: F811
    (tmp_path / "t.data.xml").write_text('<?xml version="1.0" encoding="UTF-8" ?>\n<corpus lang="en">\n</corpus>\n')
    (tmp_path / "t.gold.key.txt").write_text("d000.s000.t000 bank%1:17:01::\nd000.s001.t000 bank%1:14:00:: x%2:3\n")
    (tmp_path / "keys.txt").write_text("d000.s000.t000 bank%1:17:01::\nd000.s001.t000 bank%1:14:00:: bank%1:17:01::\n")
    for name, what in (("t.data.xml", "a WSD framework XML"), ("keys.txt", "a WSD framework gold key file")):
        assert main(["wsd", "tag", str(tmp_path / name), "--senses", str(senses / "senses.h5")]) == 2
        one_line_error(capsys, what, "wsd --test FOLDER")
    assert main(["wsd", "tag", str(tmp_path / "t.gold.key.txt"), "--senses", str(senses / "senses.h5")]) == 0


def test_bilm_urls_in_every_form_of_the_python_api(tmp_path):
    from elmo_features.formats.default_model import resolve_bilm
    from elmo_features.hub import ElmoHub
    from elmo_features.util.errors import UsageError

    url = "https://allennlp.s3.amazonaws.com/models/elmo/x/elmo_2x4096_512_2048cnn_2xhighway_"
    for spec in ({"options": url + "options.json", "weights": url + "weights.hdf5"}, Path(url + "options.json"),
                 "s3://bucket/elmo", {"options": str(tmp_path / "o.json"), "weights": "gs://b/w.hdf5"}):
        with pytest.raises(UsageError, match="no biLM is read from a URL"):
            resolve_bilm(spec)
    with pytest.raises(TypeError, match="reads no URL"):
        ElmoHub(Path(url + "options.json"), Path(url + "weights.hdf5"))
    with pytest.raises(UsageError, match="no biLM is read from a URL"):
        ElmoHub(yaml.safe_load(f"{{options: '{url}options.json', weights: '{url}weights.hdf5'}}"))


def said_in_a_worker(what: str) -> bool:
    """(run in spawned workers by the test below)"""
    from elmo_features.util.once import first_time

    return first_time(("test message", what))


def test_a_warning_is_said_once_per_command_across_worker_processes():
    from elmo_features.util.once import first_time
    from elmo_tasks.experiment.parallel import run_jobs

    assert first_time(("test message", "said by the parent"))
    said = run_jobs(said_in_a_worker, [("a",), ("a",), ("a",), ("said by the parent",)], jobs=2, threads=1)
    assert sum(said) == 1 and not said[3]  # one worker says it; the parent's own is not said again
    assert not first_time(("test message", "a"))  # said by a worker: said for the rest of the command


# ---------------------------------------------------------------- list twenty-four

def _limited(limit_bytes: int):
    """A preexec_fn setting the file-size limit (``ulimit -f``) of a child process."""
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, resource.RLIM_INFINITY))


def test_embed_that_would_not_fit_stops_before_writing_and_the_rerun_continues(tmp_path):
    import subprocess
    import sys

    from test_tasks_helpers import make_bilm

    opts, weights = make_bilm(tmp_path / "bilm")
    (tmp_path / "in.txt").write_text("the cat sat on the mat\n" * 200)
    args = [sys.executable, "-m", "elmo_tasks.cli", "embed", "in.txt", "o.h5", "--options", str(opts), "--weights",
            str(weights), "--progress", "off", "--threads", "1"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    p = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                       preexec_fn=_limited(200_000))
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0, p.stderr
    assert "the file-size limit (ulimit -f) leaves" in p.stderr and "the partial file is kept" in p.stderr
    assert (tmp_path / "o.h5.partial").exists() and not (tmp_path / "o.h5").exists()
    p = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and (tmp_path / "o.h5").exists(), p.stderr


def test_embed_whose_hdf5_write_fails_for_room_ends_with_one_error_not_a_crash(tmp_path):
    import subprocess
    import sys

    from test_tasks_helpers import make_bilm

    opts, weights = make_bilm(tmp_path / "bilm")
    (tmp_path / "in.txt").write_text("the cat sat on the mat\n" * 2000)
    code = ("import sys; import elmo_features.embedding.hdf5_output as h; h.check_room = lambda *a: None; "
            "from elmo_tasks.cli import main; sys.argv = ['elmo-tasks'] + sys.argv[1:]; sys.exit(main())")
    args = [sys.executable, "-c", code, "embed", "in.txt", "o.h5", "--options", str(opts), "--weights", str(weights),
            "--progress", "off", "--threads", "1"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    p = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                       preexec_fn=_limited(300_000))
    last = p.stderr.strip().splitlines()[-1]
    assert p.returncode == 2, p.stderr[-2000:]  # (was: a segmentation fault as HDF5 shut down, exit 139)
    assert last.startswith("error: o.h5.partial: the file-size limit (ulimit -f) was reached"), last
    assert not (tmp_path / "o.h5.partial").exists() and not (tmp_path / "o.h5").exists()


def test_a_checkpoint_that_cannot_be_saved_after_an_error_is_one_warning(tmp_path, capsys, monkeypatch):
    import errno
    import types

    import elmo_features.training.trainer as trainer

    def fails():
        raise OSError(errno.ENOSPC, "No space left on device", "checkpoint.pt")
    trainer.Trainer._save_finally(types.SimpleNamespace(_save=fails), False)
    assert "warning: the checkpoint could not be saved either ([Errno 28] No space left" in capsys.readouterr().err
    with pytest.raises(OSError):
        trainer.Trainer._save_finally(types.SimpleNamespace(_save=fails), True)

    def torch_full(*_a, **_k):  # what torch.save raises when the disk fills under it
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 560000 vs 559888")
    monkeypatch.setattr(trainer.torch, "save", torch_full)
    monkeypatch.setattr(trainer.shutil, "disk_usage", lambda p: types.SimpleNamespace(free=1000))
    fake = types.SimpleNamespace(world=1, out=tmp_path, model=torch.nn.Linear(1, 1), state={}, cfg=None,
                                 gen=np.random.default_rng(0).bit_generator)
    fake.opt = torch.optim.SGD(fake.model.parameters(), lr=0.1)
    fake.cfg = types.SimpleNamespace(to_dict=lambda: {})
    fake.gen = types.SimpleNamespace(get_state=lambda: {})
    with pytest.raises(OSError) as e:
        trainer.Trainer._save(fake)
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(tmp_path / "checkpoint.pt")


def test_train_bilm_paths_expand_home_and_an_unknown_user_is_refused(tmp_path, monkeypatch):
    from elmo_features.training.config import TrainConfig, resume_changes
    from elmo_features.util.errors import ConfigError

    monkeypatch.setenv("HOME", str(tmp_path))
    cfg = TrainConfig.from_dict({"train_files": ["~/a.txt"], "out_dir": "~/D3", "heldout_file": "~/h.txt"})
    assert cfg.out_dir == str(tmp_path / "D3") and cfg.train_files == [str(tmp_path / "a.txt")]
    assert cfg.heldout_file == str(tmp_path / "h.txt")
    assert resume_changes({**cfg.to_dict(), "out_dir": "~/D3", "train_files": ["~/a.txt"]}, cfg) == []
    with pytest.raises(ConfigError, match="out_dir: ~nosuchuser9/D: no such user's home folder"):
        TrainConfig.from_dict({"train_files": ["a.txt"], "out_dir": "~nosuchuser9/D"})


def test_a_loss_that_is_nan_before_any_update_names_the_head_not_the_lr(tmp_path, capsys, monkeypatch):
    import math

    from elmo_tasks.experiment.training import TaskModel

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    original = TaskModel.loss
    monkeypatch.setattr(TaskModel, "loss", lambda self, split, idx: original(self, split, idx) * math.nan)
    assert main(["run", cfg, "--out", "R", *FAST]) == 2
    err = one_line_error(capsys, "training diverged: the loss is nan (before any update, on finite features: the "
                                 "head CrfTagger", "check its forward, logits and loss")
    assert "training.lr" not in err


def test_gzipped_tsv_data_is_read(tmp_path, capsys, monkeypatch):
    import gzip

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path, kind="sentiment")
    gz = tmp_path / "train.tsv.gz"
    gz.write_bytes(gzip.compress(Path(env["tsv_train"]).read_bytes()))
    assert main(["run", cfg, "--out", "R", "--set", f"data.train={gz}", *FAST]) == 0


def test_scalar_mix_names_a_mask_of_the_wrong_shape():
    import torch as t

    from elmo_features import ScalarMix

    for norm in ("batch", None, "token"):
        with pytest.raises(ValueError, match=r"ScalarMix mask must be a \(B, T\) tensor matching the layers' \(B, T\) "
                                             r"= \(2, 4\), got \(2, 3\)"):
            ScalarMix(3, layer_norm=norm)(t.randn(3, 2, 4, 5), t.ones(2, 3, dtype=t.bool))


def test_compare_refuses_two_sources_whose_files_have_the_same_content(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    copy = tmp_path / "copy.txt"
    copy.write_bytes(Path(env["glove"]).read_bytes())
    sources = f"compare.sources={{a: {{name: static, path: {env['glove']}}}, b: {{name: static, path: {copy}}}}}"
    assert main(["compare", cfg, "--set", sources, "--results-dir", "RES", "--runs-dir", "RR", *FAST]) == 2
    one_line_error(capsys, "compare.sources: a and b load the same frozen inputs", "give the same features")
    assert not Path("RES").exists() or not any(Path("RES").iterdir())
    rows = Path(env["glove"]).read_text().splitlines(keepends=True)
    copy.write_text("".join(reversed(rows)))  # the same vectors, rows in another order
    assert main(["compare", cfg, "--set", sources, "--results-dir", "RES", "--runs-dir", "RR", *FAST]) == 2
    one_line_error(capsys, "compare.sources: a and b load the same frozen inputs", "give the same features")


def test_heldout_sentences_are_evaluated_whole_and_short_pieces_are_warned_about(tmp_path, capsys):
    from elmo_features.training.config import TrainConfig
    from elmo_features.training.evaluate import read_heldout
    from elmo_features.training.run_checks import check_warmup

    (tmp_path / "h.txt").write_text("a b c d e\nf g\n")
    cfg = TrainConfig.from_dict({"train_files": ["t.txt"], "heldout_file": str(tmp_path / "h.txt"),
                                 "max_sentence_length": 2})
    assert read_heldout(cfg) == [["a", "b", "c", "d", "e"], ["f", "g"]]  # (was: [a, b], [f, g])
    check_warmup(cfg, np.array([2, 2, 1] * 100))
    assert "warning: max_sentence_length 2: sentences are cut into pieces" in capsys.readouterr().err


def test_api_flags_and_tokens_with_whitespace(capsys, monkeypatch):
    from elmo_features.util import once
    from elmo_features.util.arguments import check_sentences
    from elmo_tasks.data.static_vectors import StaticVectors

    monkeypatch.setattr(once, "_SAID", set())  # (a fresh command)

    with pytest.raises(TypeError, match="StaticVectors lowercase must be True or False, got str: 'false'"):
        StaticVectors(["Paris"], np.ones((1, 2)), "false")
    assert check_sentences([["the\tcat", "sat"]]) == [["the\tcat", "sat"]]
    check_sentences([["a b"]])
    err = capsys.readouterr().err
    assert err.count("holds whitespace") == 1 and "read from a file is split into 2" in err


def test_a_semicolon_csv_is_named_as_such(tmp_path):
    from elmo_tasks.data.classification import DataFormatError, read_csv

    (tmp_path / "e.csv").write_text("pos;a good film\nneg;boring, dull, long\npos;fine\n")
    with pytest.raises(DataFormatError, match="e.csv:1: most lines have 1 field\\(s\\) with the delimiter ',', but the "
                                              "columns need 2; the lines seem to separate fields with ';'"):
        read_csv(tmp_path / "e.csv")


# ---------------------------------------------------------------- list twenty-five

def test_heldout_log_probs_in_slices_equal_the_whole():
    from elmo_features.training.evaluate import _log_probs

    class Model:
        def full_log_probs(self, h, y):
            return torch.log_softmax(h, dim=1).gather(1, y.unsqueeze(1)).squeeze(1)

    h, y = torch.randn(10, 4), torch.randint(0, 4, (10,))
    assert torch.equal(_log_probs(Model(), h, y, 3), Model().full_log_probs(h, y))


def test_a_tsv_row_with_label_and_text_swapped_is_warned_about(tmp_path, capsys):
    from elmo_tasks.data.classification import read_tsv

    rows = "pos\ta fine film\nneg\tdull\npos\tgood\nneg\tbad\n"
    for swapped, label, text in (("a great film\tpos\n", "a great film", "pos"), ("great\tpos\n", "great", "pos"),
                                 ("truly awful\tNEG\n", "truly awful", "NEG"),  # (in another case)
                                 ("dull film\tneg\ndull film\tneg\n", "dull film", "neg")):  # (twice)
        (tmp_path / "sw.tsv").write_text(rows + swapped)
        read_tsv(tmp_path / "sw.tsv")
        err = capsys.readouterr().err
        assert f"sw.tsv:5: the text is {text!r}, a label of other rows, under the label {label!r}" in err, err
        assert "are the label and text columns swapped" in err
    (tmp_path / "ok.tsv").write_text("play music\tplay a song\nplay music\tsome jazz\nget weather\train today\n"
                                     "get weather\tis it sunny\nbook flight\ti want to fly to paris\n")
    read_tsv(tmp_path / "ok.tsv")
    assert capsys.readouterr().err == ""  # a rare class whose text is no label is a class


def test_unordered_containers_are_refused_as_sentences():
    from elmo_features.util.arguments import check_sentences

    with pytest.raises(TypeError, match="sentence 0 is a set \\(its order is not defined\\)"):
        check_sentences([{"the", "cat", "sat"}])
    with pytest.raises(TypeError, match="sentence 0 is a dict \\(its keys would be the tokens\\)"):
        check_sentences([{"the": 1}])


def test_compare_says_each_data_warning_once(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path, kind="sentiment")
    sources = f"compare.sources={{g: {{name: static, path: {env['glove']}}}}}"
    assert main(["compare", cfg, "--set", sources, "--set", f"data.dev={env['tsv_test']}", "--seeds", "1,2,3",
                 "--results-dir", "RES", "--runs-dir", "RR", *FAST]) == 0
    err = capsys.readouterr().err
    assert err.count("data.dev and data.test are the same file") == 1, err
    assert err.count("gold labels never seen in training") <= 2, err  # (dev and test: once each, not per seed)


def test_a_full_disk_under_the_lock_names_the_lock_file_and_leaves_no_folder(tmp_path, monkeypatch):
    import errno

    import elmo_features.util.locking as locking
    from elmo_tasks.experiment.preflight import claim_results_folder

    def full(*_a):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(locking.os, "pwrite", full)
    with pytest.raises(OSError) as e:
        claim_results_folder(tmp_path / "RES", "summary.json", "x", "--results-dir")
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(tmp_path / "RES" / ".writer.lock")
    assert not (tmp_path / "RES").exists()


def test_a_relative_data_path_beside_the_config_is_said_so(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    (tmp_path / "proj" / "cfg").mkdir(parents=True)
    Path("proj/train.conll").write_text(Path(env["conll_train"]).read_text())
    data = yaml.safe_load(Path(cfg).read_text())
    data["data"]["train"] = "../train.conll"
    Path("proj/cfg/c.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", "proj/cfg/c.yaml", "--out", "R", *FAST]) == 2
    one_line_error(capsys, "data.train: ../train.conll not found; relative paths resolve against the current folder",
                   "it exists next to the config (proj/train.conll): run from proj/cfg, or give an absolute path")


def test_dash_as_an_output_is_standard_output_or_refused(tmp_path, capsys, monkeypatch):
    from test_tasks_helpers import make_bilm

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path, kind="sentiment")
    assert main(["run", cfg, "--out", "R", *FAST]) == 0
    Path("in.txt").write_text("a good film\n")
    capsys.readouterr()
    assert main(["predict", "R", "in.txt", "--out", "-", "--cache-dir", "none"]) == 0
    assert "a good film" in capsys.readouterr().out and not Path("-").exists()
    opts, weights = make_bilm(tmp_path / "bilm")
    assert main(["embed", "in.txt", "-", "--options", str(opts), "--weights", str(weights)]) == 2
    one_line_error(capsys, "embed output: '-' would be a file named '-': this output cannot go to standard output")
    assert main(["run", cfg, "--out", "-", *FAST]) == 2
    one_line_error(capsys, "--out: '-' would be a folder named '-'")
    assert not Path("-").exists()


def test_more_python_api_checks(tmp_path):
    from elmo_features import ScalarMix
    from elmo_features.embedding.embedder import Embedder
    from elmo_features.formats.weights import load_bilm
    from elmo_tasks.data.static_vectors import StaticVectors

    from test_tasks_helpers import make_bilm

    with pytest.raises(ValueError, match="ScalarMix: layer 1 is \\(1, 3, 5\\), but layer 0 is \\(1, 3, 4\\)"):
        ScalarMix(2)([torch.randn(1, 3, 4), torch.randn(1, 3, 5)])
    opts, weights = make_bilm(tmp_path / "bilm")
    with pytest.raises(TypeError, match="Embedder: the BiLM's parameters are float16; give the float32 model"):
        Embedder(load_bilm(opts, weights).half())
    with pytest.raises(ValueError, match="StaticVectors: no words"):
        StaticVectors([], np.zeros((0, 3), dtype=np.float32), False)


# ---------------------------------------------------------------- list twenty-six

def test_hints_for_paths_beside_the_config_and_only_real_data_folders(tmp_path, capsys, monkeypatch):
    from elmo_tasks.data.fetch import fetch_hint

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    (tmp_path / "proj" / "cfg").mkdir(parents=True)
    Path("proj/glove.txt").write_text(Path(env["glove"]).read_text())
    data = yaml.safe_load(Path(cfg).read_text())
    data["features"]["path"] = "../glove.txt"
    Path("proj/cfg/c.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", "proj/cfg/c.yaml", "--out", "R", *FAST]) == 2
    one_line_error(capsys, "features.path", "it exists next to the config (proj/glove.txt): run from proj/cfg")
    assert fetch_hint("data/wsd/semcor").startswith("run `elmo-tasks data get wsd-framework`")
    assert fetch_hint("../wsd/wn") == "" and fetch_hint("/home/me/wsd/wn") == ""  # a user's own folder named wsd


def test_a_lock_that_cannot_be_written_leaves_nothing_behind(tmp_path, monkeypatch):
    import errno

    import elmo_features.util.locking as locking

    def full(*_a):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(locking.os, "pwrite", full)
    (tmp_path / "R").mkdir()
    for folder in (tmp_path / "R", tmp_path / "new"):
        with pytest.raises(OSError) as e:
            locking.OutputLock(folder / "run.lock", "the run").acquire()
        assert e.value.filename == str(folder / "run.lock") and not (folder / "run.lock").exists()
    assert (tmp_path / "R").is_dir() and not (tmp_path / "new").exists()  # (a folder it made is removed)


def test_set_with_a_lone_dash_is_the_string(tmp_path, capsys, monkeypatch):
    from elmo_features.util.config_files import apply_set

    d: dict = {}
    apply_set(d, "data.test=-")
    assert d == {"data": {"test": "-"}}  # (YAML alone reads it as [None])
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--set", "data.test=-", *FAST]) == 2
    one_line_error(capsys, "data.test: '-' (standard input) cannot be a data split")


def test_embed_room_estimate_lets_an_output_that_fits_be_written(tmp_path):
    import subprocess
    import sys

    from test_tasks_helpers import make_bilm

    opts, weights = make_bilm(tmp_path / "bilm")
    words = "the cat sat on a mat".split()
    (tmp_path / "in.txt").write_text("".join(" ".join(words[: 1 + i % 6]) + "\n" for i in range(1000)))
    args = [sys.executable, "-m", "elmo_tasks.cli", "embed", "in.txt", "o.h5", "--options", str(opts), "--weights",
            str(weights), "--progress", "off", "--threads", "1"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    assert subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, timeout=300).returncode == 0
    size = (tmp_path / "o.h5").stat().st_size
    (tmp_path / "o.h5").unlink()
    p = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                       preexec_fn=_limited(int(size * 1.5) + 300_000))  # (was: refused, needing 3.5x the file)
    assert p.returncode == 0, p.stderr


def test_an_output_name_without_room_for_its_temporary_sibling_is_said_so(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("the cat\n")
    from test_tasks_helpers import make_bilm

    opts, weights = make_bilm(tmp_path / "bilm")
    long = "o" * 247 + ".h5"
    assert main(["embed", "in.txt", long, "--options", str(opts), "--weights", str(weights)]) == 2
    one_line_error(capsys, "embed output: the file name is 250 bytes; while it is written, a temporary file beside it "
                           "needs 14 more", "shorten it to at most 241 bytes")


PLUGIN_BAD_HEAD = ("from elmo_tasks.registry import HEADS\nfrom elmo_tasks.heads.sentence_classifier import SentenceClassifier\n"
                   "@HEADS.register('bad_head_r15')\nclass BadHead(SentenceClassifier):\n"
                   "    def logits(self, x, mask, layers=None, examples=None):\n"
                   "        return super().logits(x, mask, layers, examples).unsqueeze(1)  # (B, 1, C)\n")


@contextlib.contextmanager
def _plugin(tmp_path, monkeypatch, module: str, text: str, registry=None, names: tuple = ()):
    """The plugin module ``module`` (source ``text``) importable from ``tmp_path`` (the current folder) for the
    block; afterwards its ``names`` are dropped from ``registry`` and the module from ``sys.modules``."""
    import sys

    from elmo_tasks import plugins

    monkeypatch.chdir(tmp_path)
    (tmp_path / f"{module}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_INCLUDED", list(plugins._INCLUDED))
    try:
        yield
    finally:
        for name in names:
            registry._entries.pop(name, None)
        sys.modules.pop(module, None)


def _run_with_plugin(tmp_path, monkeypatch, module: str, text: str, registry, name: str, key: str) -> int:
    """``run`` of a sentiment config whose ``key`` names ``name``, registered by the plugin ``module`` (``text``)."""
    with _plugin(tmp_path, monkeypatch, module, text, registry, (name,)):
        env, cfg = static_config_file(tmp_path, kind="sentiment")
        return main(["run", cfg, "--out", "R", "--include", module, "--set", f"{key}={name}", *FAST])


def test_a_plugin_head_whose_logits_have_the_wrong_shape_is_one_line(tmp_path, capsys, monkeypatch):
    from elmo_tasks.registry import HEADS

    assert _run_with_plugin(tmp_path, monkeypatch, "badhead_r15", PLUGIN_BAD_HEAD, HEADS, "bad_head_r15",
                            "head.name") == 2
    one_line_error(capsys, "plugin module badhead_r15: head BadHead failed computing the loss",
                   "check the shapes its logits and loss return")


# ---------------------------------------------------------------- list twenty-seven

def test_compare_refuses_one_bilm_given_by_folder_and_by_its_files(tmp_path, capsys, monkeypatch):
    from test_tasks_helpers import make_bilm

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    opts, weights = make_bilm(tmp_path / "bilm")
    sources = (f"compare.sources={{a: {{name: elmo, bilm: {tmp_path / 'bilm'}}}, "
               f"b: {{name: elmo, options_file: {opts}, weights_file: {weights}}}}}")
    assert main(["compare", cfg, "--set", sources, "--results-dir", "RES", "--runs-dir", "RR", *FAST]) == 2
    one_line_error(capsys, "compare.sources: a and b load the same frozen inputs")


PLUGIN_BAD_SOURCE = ("from elmo_tasks.registry import FEATURES\nfrom elmo_tasks.features.static import StaticFeatures\n"
                     "@FEATURES.register('bad_static_r15')\nclass BadStatic(StaticFeatures):\n"
                     "    def forward(self, batch, mask):\n        return batch.double()\n")


def test_an_error_with_a_plugin_component_in_play_is_one_line_naming_it(tmp_path, capsys, monkeypatch):
    from elmo_tasks.registry import FEATURES

    assert _run_with_plugin(tmp_path, monkeypatch, "badsource_r15", PLUGIN_BAD_SOURCE, FEATURES, "bad_static_r15",
                            "features.name") == 2
    one_line_error(capsys, "(in a command using the plugin component(s) feature source bad_static_r15 (module "
                           "badsource_r15)", "rerun with --debug for the traceback")


def test_small_outputs_fit_small_room_and_long_tsv_fields_and_more_paths(tmp_path, capsys, monkeypatch):
    import types

    import elmo_features.embedding.hdf5_output as out
    from elmo_tasks.data.classification import read_tsv

    (tmp_path / "p.h5").write_bytes(bytes(6144))
    monkeypatch.setattr(out.shutil, "disk_usage", lambda p: types.SimpleNamespace(free=60_000))
    out.check_room(str(tmp_path / "p.h5"), 3 * 3 * 32 * 4 + 3 * out.DATASET_OVERHEAD, 0)  # (was: "need 0.3 MB")
    monkeypatch.undo()
    (tmp_path / "long.tsv").write_text("pos\t" + "word " * 40_000 + "\nneg\tdull\n")
    assert len(read_tsv(tmp_path / "long.tsv")[0].tokens) == 40_000  # (was: "unparsable row", csv's field limit)
    monkeypatch.chdir(tmp_path)
    assert main(["configs", "show", "backbones/ner", "--out", "-"]) == 0 and "features" in capsys.readouterr().out
    Path("afile").write_text("x")
    monkeypatch.setenv("ELMO_TASKS_DATA", "afile")
    assert main(["data", "get", "glove-6b-50d"]) == 2
    assert "$ELMO_TASKS_DATA" in capsys.readouterr().err


def test_train_bilm_files_beside_the_config_are_said_so(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "proj" / "cfg").mkdir(parents=True)
    Path("proj/train.txt").write_text("the cat sat\n")
    Path("proj/cfg/b.yaml").write_text(yaml.safe_dump({"train_files": ["../train.txt"],
                                                      "out_dir": str(tmp_path / "B")}))
    assert main(["train-bilm", "--config", "proj/cfg/b.yaml", "--progress", "off"]) == 2
    one_line_error(capsys, "train_files[0]: ../train.txt not found", "it exists next to the config (proj/train.txt)")


def test_a_stop_swallowed_by_a_finaliser_is_not_reported_twice(capsys, monkeypatch):
    import signal
    import sys

    from elmo_features.util import stop

    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)
    stop.quiet_swallowed_stops()
    try:
        stop.request(signal.SIGTERM)

        class Finaliser:
            def __del__(self):
                raise KeyboardInterrupt("SIGTERM")  # as the handler does when the signal lands here
        Finaliser()
        assert "Exception ignored" not in capsys.readouterr().err
        with pytest.raises(KeyboardInterrupt):
            stop.check()  # the recorded request still stops the command
    finally:
        stop.clear()

    class Other:
        def __del__(self):
            raise ValueError("a real problem")
    Other()
    assert "a real problem" in capsys.readouterr().err  # other unraisable errors are still reported


def test_a_relative_encoder_folder_beside_the_config_is_said_so(tmp_path, monkeypatch):
    from elmo_features.util.errors import MissingPathError
    from elmo_tasks.experiment.preflight import check_feature_paths

    monkeypatch.chdir(tmp_path)
    (tmp_path / "proj" / "cfg").mkdir(parents=True)
    (tmp_path / "proj" / "enc").mkdir()
    Path("proj/cfg/s.yaml").write_text("name: x\n")
    with pytest.raises(MissingPathError, match="features.model: ../enc not found.*it exists next to the config "
                                               "\\(proj/enc\\): run from proj/cfg"):
        check_feature_paths({"name": "transformer", "model": "../enc"}, "proj/cfg/s.yaml: features",
                            "proj/cfg/s.yaml")


# ---------------------------------------------------------------- list twenty-eight

def test_a_common_class_whose_text_is_another_class_name_is_no_swap(tmp_path, capsys):
    from elmo_tasks.data.classification import read_tsv

    (tmp_path / "y.tsv").write_text("0\ta\n0\tb\n0\tc\n1\td\n1\te\n0\t1\n")
    read_tsv(tmp_path / "y.tsv")
    assert capsys.readouterr().err == ""


def test_a_resume_that_reuses_no_run_takes_the_new_data(tmp_path):
    from elmo_features.util.errors import ConfigError
    from elmo_tasks.experiment.config import load_config
    from elmo_tasks.experiment.data_record import DATA_RECORD, check_data_unchanged

    env, cfg_path = static_config_file(tmp_path, kind="sentiment")
    cfg = load_config(cfg_path)
    grid = tmp_path / "grid"
    check_data_unchanged(cfg, grid, None, resuming=False)
    Path(env["tsv_train"]).write_text(Path(env["tsv_train"]).read_text() + "pos\ta new line\n")
    with pytest.raises(ConfigError, match="changed since its finished runs were trained"):
        check_data_unchanged(cfg, grid, None, resuming=True)
    check_data_unchanged(cfg, grid, None, resuming=True, reusing=False)  # (was: refused, though nothing could mix)
    check_data_unchanged(cfg, grid, None, resuming=True)  # the record now holds the new data
    assert (grid / DATA_RECORD).is_file()


def test_a_copied_model_and_an_unreachable_rank_zero_and_an_empty_data_variable(tmp_path, monkeypatch):
    import subprocess
    import sys

    from elmo_features.util.errors import CheckpointError
    from elmo_tasks.data.fetch import default_data_dir
    from elmo_tasks.experiment.preflight import check_config_digest, config_digests

    raw = {"head": {"name": "crf_tagger", "hidden_dim": 8}}
    ckpt = {"config_sha256": config_digests({"head": {"name": "crf_tagger", "hidden_dim": 16}})}
    with pytest.raises(CheckpointError, match="config.yaml and .*model.pt disagree on head \\(config.yaml edited after "
                                              "training, e.g. the tag scheme, or model.pt copied from another run\\)"):
        check_config_digest(tmp_path, raw, ckpt)
    monkeypatch.setenv("ELMO_TASKS_DATA", "")
    assert default_data_dir() == Path("data")
    from dist_launch import free_port

    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "RANK": "1", "LOCAL_RANK": "1",
           "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "GLOO_SOCKET_IFNAME": "lo", "ELMO_TASKS_DIST_TIMEOUT": "3",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    code = ("from elmo_features.util import distributed as D\n"
            "try:\n    D.init()\nexcept D.DistributedError as e:\n    print(e)")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "rank 1: could not join the process group at 127.0.0.1" in p.stdout, p.stdout + p.stderr[-2000:]


def test_eval_bilm_warns_about_unknown_words_and_a_blank_data_variable_is_unset(tmp_path, capsys, monkeypatch):
    from elmo_tasks.data.fetch import default_data_dir

    monkeypatch.setenv("ELMO_TASKS_DATA", "   ")
    assert default_data_dir() == Path("data")
    corpus = tmp_path / "t.txt"
    corpus.write_text("the cat sat on the mat .\n" * 30)
    cfg = {"train_files": [str(corpus)], "heldout_file": str(corpus), "out_dir": str(tmp_path / "B"),
           "char_embedding_dim": 4, "filters": [[1, 4], [2, 8]], "n_highway": 1, "lstm_dim": 16, "projection_dim": 8,
           "n_negative_samples": 4, "max_train_tokens": 200, "eval_every_tokens": 200, "eval_sentences": 5,
           "batch_tokens": 100, "threads": 1, "warmup_steps": 1}
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["train-bilm", "--config", str(tmp_path / "b.yaml"), "--progress", "off"]) == 0
    (tmp_path / "held.txt").write_text("zebra quokka axolotl the\n")
    export = tmp_path / "B" / "export"
    capsys.readouterr()
    assert main(["eval-bilm", "--options", str(export / "options.json"), "--weights", str(export / "weights.hdf5"),
                 "--vocab", str(tmp_path / "B" / "vocab.txt"), str(tmp_path / "held.txt")]) == 0
    assert "of the predictions are <UNK>" in capsys.readouterr().err


def _rank_one(port: int, timeout: str, tmp_path: Path, rank: int = 1):
    """``elmo-tasks embed`` as rank ``rank`` (1) of 2, rank 0 expected at 127.0.0.1:``port``."""
    import subprocess
    import sys

    (tmp_path / "in.txt").write_text("hello world\n")
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank), "LOCAL_RANK": "1",
           "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "GLOO_SOCKET_IFNAME": "lo", "ELMO_TASKS_DIST_TIMEOUT": timeout,
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    code = "import sys\nfrom elmo_tasks.cli import main\nsys.exit(main())"
    return subprocess.Popen([sys.executable, "-c", code, "embed", str(tmp_path / "in.txt"), str(tmp_path / "o.h5")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_stop_signals)


def test_a_rank_waiting_for_rank_0_stops_on_sigterm_and_its_join_error_is_one_line(tmp_path):
    import signal
    import socket
    import subprocess

    from dist_launch import free_port

    with socket.socket() as server:  # a "rank 0" that takes the connection and never answers
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(120)
        p = _rank_one(server.getsockname()[1], "600", tmp_path)
        conn, _ = server.accept()  # rank 1 is joining now
        p.send_signal(signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            pytest.fail("the rank ignored SIGTERM while joining the process group")
        conn.close()
    assert p.returncode == 143, err
    assert err.strip().startswith("interrupted") and "Traceback" not in err, err
    for value in ("0", "-5", "nan"):
        p = _rank_one(free_port(), value, tmp_path)
        err = p.communicate(timeout=120)[1]
        assert p.returncode == 2 and err == f"error: ELMO_TASKS_DIST_TIMEOUT={value!r}: give a number of seconds above " \
                                            "0, e.g. 1800\n", err
    p = _rank_one(free_port(), "2", tmp_path)  # nobody at the port: PyTorch logs each attempt with a C++ stack
    err = p.communicate(timeout=120)[1]
    assert p.returncode == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("error: rank 1: could not join the process group at 127.0.0.1:"), err


def test_a_bare_encoder_name_that_is_a_folder_beside_the_config_is_said_so(tmp_path, monkeypatch):
    from elmo_features.util.errors import MissingPathError
    from elmo_tasks.experiment.preflight import check_feature_paths

    monkeypatch.chdir(tmp_path)
    (tmp_path / "proj" / "enc").mkdir(parents=True)
    Path("proj/s.yaml").write_text("name: x\n")
    with pytest.raises(MissingPathError, match="features.model: enc is not a folder here \\(it would be looked up as a "
                                               "Hugging Face hub id\\);.*it exists next to the config \\(proj/enc\\)"):
        check_feature_paths({"name": "transformer", "model": "enc"}, "proj/s.yaml: features", "proj/s.yaml")
    (tmp_path / "proj" / "minilm-l6").mkdir()  # a packaged name is that model wherever the config is
    check_feature_paths({"name": "transformer", "model": "minilm-l6"}, "proj/s.yaml: features", "proj/s.yaml")
    monkeypatch.chdir(tmp_path / "proj")
    check_feature_paths({"name": "transformer", "model": "enc"}, "s.yaml: features", "s.yaml")


def test_a_full_standard_output_is_named(tmp_path):
    import subprocess
    import sys

    code = "import sys\nfrom elmo_tasks.cli import main\nsys.exit(main())"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    if os.path.exists("/dev/full"):
        with open("/dev/full", "w") as full:
            p = subprocess.run([sys.executable, "-c", code, "configs", "list"], stdout=full, stderr=subprocess.PIPE,
                               text=True, env=env, timeout=120)
        assert p.returncode == 2 and p.stderr == "error: standard output: No space left on device; free some space, " \
                                                 "or redirect it elsewhere\n", p.stderr
    with open(tmp_path / "out.txt", "w") as out:
        p = subprocess.run(["bash", "-c", f"ulimit -f 1; exec {sys.executable} -c '{code}' configs list"], stdout=out,
                           stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    assert p.returncode == 2 and p.stderr == "error: standard output: File too large; raise the file-size limit " \
                                             "(ulimit -f), or redirect it elsewhere\n", p.stderr


def test_run_out_dot_slash_dash_is_a_folder_named_dash(tmp_path, monkeypatch, capsys):
    env, cfg = static_config_file(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["run", cfg, "--out", "./-", "--progress", "off"]) == 0, capsys.readouterr().err
    assert (tmp_path / "-" / "metrics.json").is_file()
    capsys.readouterr()
    assert main(["run", cfg, "--out", "-", "--progress", "off"]) == 2
    one_line_error(capsys, "'-' would be a folder named '-'")


def test_ranks_outside_the_world_alone_or_given_other_inputs_are_told_so(tmp_path):
    from dist_launch import free_port, start, wait

    p = _rank_one(free_port(), "600", tmp_path, rank=2)
    err = p.communicate(timeout=120)[1]
    assert p.returncode == 2 and err == "error: RANK=2 is outside the job's WORLD_SIZE=2 (ranks 0 to 1): launch with " \
                                        "torchrun, which numbers the ranks\n", err
    p = _rank_one(free_port(), "2", tmp_path, rank=0)  # rank 0 alone: the other rank never comes
    err = p.communicate(timeout=120)[1]
    assert p.returncode == 2 and err.startswith("error: rank 0: the other ranks did not all join the process group "
                                                "at 127.0.0.1:") and "were all 2 ranks started" in err, err
    (tmp_path / "a.txt").write_text("".join(f"sentence number {i}\n" for i in range(30)))
    (tmp_path / "b.txt").write_text("".join(f"sentence number {i}\n" for i in range(10)))
    out = tmp_path / "o.h5"
    r0, r1 = wait(start("elmo_tasks.cli", ["embed", str(tmp_path / "a.txt"), str(out)],
                        env={"ELMO_TASKS_DIST_TIMEOUT": "120"},
                        rank_args={1: ["embed", str(tmp_path / "b.txt"), str(out)]}), timeout=300)
    for r in (r0, r1):
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "error: rank 1 was given another job than rank 0: the input (" in r.stderr, r.stderr
        assert "b.txt" in r.stderr, r.stderr
    assert not out.exists() and not Path(str(out) + ".shards").exists()


def test_compare_uses_no_more_processes_than_runs_and_a_folder_output_suggests_its_kind(tmp_path, capsys):
    import json

    from elmo_features.util.threads import threads_per_job

    env, cfg = static_config_file(tmp_path)
    raw = yaml.safe_load(Path(cfg).read_text())
    raw["compare"] = {"seeds": [1], "sources": {"glove": {"name": "static", "path": str(env["glove"])}}}
    Path(cfg).write_text(yaml.safe_dump(raw))
    assert main(["compare", cfg, "--results-dir", str(tmp_path / "res"), "--runs-dir", str(tmp_path / "runs"),
                 "--cache-dir", str(tmp_path / "cache"), "--progress", "off", "--jobs", "50"]) == 0
    summary = json.loads((tmp_path / "res" / "summary.json").read_text())
    assert summary["jobs"] == 1 and summary["threads_per_job"] == threads_per_job(1), summary
    assert f"1 runs on 1 processes x {threads_per_job(1)} torch thread(s)" in capsys.readouterr().out
    (tmp_path / "d").mkdir()
    assert main(["configs", "show", "ner_conll2003", "--out", str(tmp_path / "d")]) == 2
    one_line_error(capsys, f"is a folder; give a file name (e.g. {tmp_path / 'd' / 'ner_conll2003.yaml'})")


def test_training_labels_that_differ_only_in_case_are_warned_about(tmp_path, capsys):
    from elmo_tasks.heads.base import Head
    from elmo_tasks.data.types import LabeledSentence
    from elmo_tasks.registry import HEADS

    head = HEADS.get("sentence_classifier")
    rows = [LabeledSentence(["good"], "pos"), LabeledSentence(["great"], "POS"), LabeledSentence(["bad"], "neg")]
    assert issubclass(head, Head)
    vocab = head.build_vocab(head.Config(), rows, {})
    assert vocab["labels"] == ["POS", "neg", "pos"]  # still separate classes: the data decides
    err = capsys.readouterr().err
    assert err == "warning: the training labels 'POS' and 'pos' differ only in letter case: they are separate " \
                  "classes; if they mean one, write them alike in the data\n", err
    head.build_vocab(head.Config(), rows[::2] + [LabeledSentence(["x"], "Neg2")], {})
    assert capsys.readouterr().err == ""


def test_symlink_loops_configless_wsd_sources_and_a_missing_semcor_are_told_what_to_do(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    os.symlink("a", "b")
    os.symlink("b", "a")
    os.symlink("nowhere", "c")
    assert main(["embed", "a", "o.h5"]) == 2
    one_line_error(capsys, "embed input: a is a symbolic link loop (it leads back to itself)")
    assert main(["embed", "c", "o.h5"]) == 2
    one_line_error(capsys, "embed input: c is a symbolic link to nowhere, which does not exist")
    Path("tr").mkdir()
    assert main(["wsd", "--train", "tr", "--test", "tr", "--features", "glove", "--out", "W"]) == 2
    one_line_error(capsys, "unknown source 'glove': there are no sources without a config; give --config with a "
                           "sources section")
    assert main(["wsd", "senses", "--config", "wsd_senses", "--source", "glove", "--out", "s.h5"]) == 2
    one_line_error(capsys, "wsd senses: SemCor (data/wsd/semcor) not found; get it with `elmo-tasks data get "
                           "wsd-framework` (or give --train FOLDER; --lemmas LEMMA,... builds a few lemmas without it)")


def test_an_out_of_vocabulary_warning_is_said_once_for_a_set_embedded_in_chunks(tmp_path, capsys):
    from test_reliability_models_r3b import _static, _vectors

    source = _static(_vectors(tmp_path / "few.txt", ["the", "zz2"]))
    for chunk in (["the", "cat"], ["a", "dog", "the"], ["the", "cats"], ["the", "end", "x"]):  # other rates in each
        source.precompute([chunk], "glosses")
        source.precompute([chunk], "train")
    err = capsys.readouterr().err
    assert err.count("of the glosses tokens") == 1 and err.count("of the training tokens") == 1, err


PLUGIN_SHORT_ROWS = ("from elmo_tasks.registry import FEATURES\nfrom elmo_tasks.features.static import StaticFeatures\n"
                     "@FEATURES.register('short_rows_r15')\nclass ShortRows(StaticFeatures):\n"
                     "    def precompute(self, sentences, split):\n"
                     "        return [a[:-1] for a in super().precompute(sentences, split)]\n")

PLUGIN_NAN_METRIC = ("import math\nfrom elmo_tasks.registry import HEADS\n"
                     "from elmo_tasks.heads.sentence_classifier import SentenceClassifier\n"
                     "@HEADS.register('nan_metric_r15')\nclass NanMetric(SentenceClassifier):\n"
                     "    def evaluate(self, examples, predictions):\n        return {'accuracy': math.nan}\n")


def test_plugin_items_with_a_row_short_and_a_nan_metric_are_refused(tmp_path, capsys, monkeypatch):
    from elmo_tasks.registry import FEATURES, HEADS

    assert _run_with_plugin(tmp_path, monkeypatch, "shortrows_r15", PLUGIN_SHORT_ROWS, FEATURES, "short_rows_r15",
                            "features.name") == 2
    one_line_error(capsys, "feature source ShortRows: precompute gave ", "rows for sentence 1 of train, which has ",
                   "give one row per token")
    assert not (tmp_path / "R" / "metrics.json").exists()
    (tmp_path / "R2").mkdir()
    assert _run_with_plugin(tmp_path / "R2", monkeypatch, "nanmetric_r15", PLUGIN_NAN_METRIC, HEADS, "nan_metric_r15",
                            "head.name") == 2
    one_line_error(capsys, "head NanMetric: its evaluate gave accuracy nan")
    assert not (tmp_path / "R2" / "R" / "metrics.json").exists()


def test_a_command_that_does_not_run_as_ranks_is_refused_under_torchrun_and_ports_are_checked(tmp_path, capsys,
                                                                                               monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main(["wsd", "--config", "wsd_senses", "--out", "W"]) == 2
    one_line_error(capsys, "wsd does not run under torchrun (WORLD_SIZE=2): run it as one process")
    assert not Path("W").exists()
    assert main(["configs", "list"]) == 0  # (a listing is harmless)
    capsys.readouterr()
    Path("in.txt").write_text("a b\n")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    for port, says in (("abc", "MASTER_PORT='abc' is not an integer"), ("99999", "MASTER_PORT=99999 is not a port")):
        monkeypatch.setenv("MASTER_PORT", port)
        assert main(["embed", "in.txt", "o.h5"]) == 2
        one_line_error(capsys, says)


def test_a_stop_while_a_command_starts_says_nothing_was_written(tmp_path, capsys, monkeypatch):
    import signal

    from elmo_tasks.cli import run as run_cli

    def stopped(*a, **k):
        raise KeyboardInterrupt("SIGTERM")

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    monkeypatch.setattr(run_cli, "load_config", stopped)  # a stop while the config is read
    assert main(["run", cfg, "--out", "R"]) == 128 + signal.SIGINT  # (no signal recorded: as Ctrl-C)
    err = capsys.readouterr().err
    assert err.startswith("interrupted; it was still starting (checking its inputs, loading), and nothing was "
                          "written: rerun the same command"), err
    assert not Path("R").exists()


def test_damaged_model_weights_and_sense_files_and_bad_save_arguments_are_named(tmp_path, capsys, monkeypatch):
    from elmo_features import load_bilm, save_bilm
    from test_tasks_helpers import make_bilm

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", "R", *FAST]) == 0
    ckpt = torch.load("R/model.pt", weights_only=True)
    name = next(k for k, v in ckpt["state_dict"].items() if v.is_floating_point() and v.numel())
    ckpt["state_dict"][name].view(-1)[0] += 0.118  # one value changed, the file still a valid checkpoint
    torch.save(ckpt, "R/model.pt")
    Path("in.txt").write_text("the cat\n")
    capsys.readouterr()
    assert main(["predict", "R", "in.txt"]) == 2
    one_line_error(capsys, "R/model.pt: its weights do not match the checksum they were saved with")
    opts, weights = make_bilm(tmp_path / "b")
    bilm = load_bilm(opts, weights)
    with pytest.raises(ValueError, match="dtype 'int8'; give one of float32, float16, float64"):
        save_bilm(bilm, tmp_path / "i.json", tmp_path / "i.hdf5", dtype="int8")
    with pytest.raises(ValueError, match="the options file and the weight file are one file"):
        save_bilm(bilm, tmp_path / "x.json", tmp_path / "x.json")
    assert not (tmp_path / "i.hdf5").exists() and not (tmp_path / "x.json").exists()
    (tmp_path / "x.json").write_text("{}")
    os.symlink(tmp_path / "x.json", tmp_path / "y.json")
    with pytest.raises(ValueError, match="the options file and the weight file are one file"):
        save_bilm(bilm, tmp_path / "x.json", tmp_path / "y.json")  # (a link to the other)
    (tmp_path / "d").mkdir()
    with pytest.raises(ValueError, match="d is a folder; give a file path"):
        save_bilm(bilm, tmp_path / "d", tmp_path / "w.h5")
    assert not (tmp_path / "w.h5").exists()
    data = bytearray(Path(weights).read_bytes())
    for k in range(len(data) // 2, len(data) // 2 + 64):  # a damaged stretch in the middle of the file
        data[k] ^= 0xFF
    Path("bad.hdf5").write_bytes(bytes(data))
    rc = main(["embed", "in.txt", "o.h5", "--options", str(opts), "--weights", "bad.hdf5"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and err.count("\n") == 1, err


def test_a_stop_after_predict_wrote_its_output_says_it_was_written(tmp_path, capsys, monkeypatch):
    from elmo_tasks.heads.crf_tagger import CrfTagger

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", "R", *FAST]) == 0
    capsys.readouterr()

    def stopped(*a, **k):  # the stop lands while the scores are computed, after the file was written
        raise KeyboardInterrupt("SIGTERM")

    monkeypatch.setattr(CrfTagger, "evaluate", stopped)
    assert main(["predict", "R", str(env["conll_test"]), "--reader", "--out", "p.txt", *FAST]) == 130
    err = capsys.readouterr().err
    assert "interrupted; p.txt was written whole (" in err and "was not written" not in err, err
    assert Path("p.txt").read_text().strip()


def test_scalar_mix_names_a_numpy_layer():
    from elmo_features import ScalarMix

    with pytest.raises(TypeError, match="ScalarMix: layer 0 is a ndarray, not a torch tensor"):
        ScalarMix(2)([np.zeros((1, 2, 3), np.float32)] * 2)


PLUGIN_NAN_FUSION = ("from elmo_tasks.registry import FUSIONS\nfrom elmo_tasks.features.fusion import LayerAttention\n"
                     "@FUSIONS.register('nan_fusion_r15')\nclass NanFusion(LayerAttention):\n"
                     "    def forward(self, layers, mask):\n"
                     "        return super().forward(layers, mask) * float('nan')\n")


def test_a_nan_loss_from_a_plugin_fusion_names_the_fusion(tmp_path, capsys, monkeypatch):
    from test_tasks_helpers import elmo_section
    from elmo_tasks.registry import FUSIONS

    with _plugin(tmp_path, monkeypatch, "nanfusion_r15", PLUGIN_NAN_FUSION, FUSIONS, ("nan_fusion_r15",)):
        env, cfg = static_config_file(tmp_path)
        raw = yaml.safe_load(Path(cfg).read_text())
        raw["features"] = elmo_section(env, mix={"name": "nan_fusion_r15"})
        Path(cfg).write_text(yaml.safe_dump(raw))
        assert main(["run", cfg, "--out", "R", "--include", "nanfusion_r15", *FAST]) == 2
    one_line_error(capsys, "training diverged: the loss is nan (before any update, on finite features: fusion "
                           "nan_fusion_r15 (module nanfusion_r15), the head ")


def test_a_plugin_module_that_raises_keyboard_interrupt_on_import_is_one_line(tmp_path, capsys, monkeypatch):
    with _plugin(tmp_path, monkeypatch, "kbint_r15", "raise KeyboardInterrupt\n"):
        assert main(["components", "--include", "kbint_r15"]) == 2  # (no stop signal: the plugin's own error)
    one_line_error(capsys, "--include kbint_r15: importing it (", "raised KeyboardInterrupt itself (no stop signal was "
                           "received)")


PLUGIN_READERS = ("from elmo_tasks.registry import READERS\nfrom elmo_tasks.data.types import LabeledSentence\n"
                  "@READERS.register('rd_empty_r15')\ndef rd_empty(path, **options):\n    return []\n"
                  "@READERS.register('rd_gen_r15')\ndef rd_gen(path, **options):\n"
                  "    for line in open(path):\n        label, text = line.rstrip('\\n').split('\\t')\n"
                  "        yield LabeledSentence(text.split(), label)\n"
                  "@READERS.register('rd_blank_r15')\ndef rd_blank(path, **options):\n"
                  "    return [LabeledSentence(['good', ''], 'pos'), LabeledSentence(['bad'], 'neg')]\n")


def test_plugin_readers_that_give_nothing_yield_or_make_bad_examples(tmp_path, capsys, monkeypatch):
    from elmo_tasks.registry import READERS

    with _plugin(tmp_path, monkeypatch, "rdr_r15", PLUGIN_READERS, READERS, ("rd_empty_r15", "rd_gen_r15",
                                                                             "rd_blank_r15")):
        env, cfg = static_config_file(tmp_path, kind="sentiment")
        assert main(["run", cfg, "--out", "R1", "--include", "rdr_r15", "--set", "data.reader=rd_gen_r15", *FAST]) == 0
        assert (tmp_path / "R1" / "metrics.json").is_file()  # a reader that yields: every split read whole
        capsys.readouterr()
        assert main(["run", cfg, "--out", "R2", "--include", "rdr_r15", "--set", "data.reader=rd_empty_r15",
                     *FAST]) == 2
        one_line_error(capsys, "the reader rd_empty_r15 (plugin module rdr_r15) gave no examples from this non-empty "
                               "file; check the reader")
        assert main(["run", cfg, "--out", "R3", "--include", "rdr_r15", "--set", "data.reader=rd_blank_r15",
                     *FAST]) == 2
        err = capsys.readouterr().err
        assert err.endswith("tsv_train.txt: train example 1: token 2 is '', not a word (empty, whitespace or not a "
                            "string); check the reader\n"), err


def test_the_wordnet_variable_is_the_default_of_a_wsd_config(tmp_path, monkeypatch):
    from elmo_tasks.wsd.config import load_wsd_config

    monkeypatch.setenv("ELMO_TASKS_WORDNET", str(tmp_path / "wn2"))
    assert load_wsd_config(None, features=[]).wordnet == str(tmp_path / "wn2")
    (tmp_path / "c.yaml").write_text("name: c\nwordnet: wn3\n")
    assert load_wsd_config(str(tmp_path / "c.yaml")).wordnet == "wn3"  # (a config's own key wins)
    monkeypatch.setenv("ELMO_TASKS_WORDNET", "  ")
    assert load_wsd_config(None, features=[]).wordnet == "data/wordnet-3.0"


def test_rank_0_whose_port_is_taken_says_so(tmp_path):
    import socket

    with socket.socket() as other:  # another program listens on the port
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        port = other.getsockname()[1]
        p = _rank_one(port, "5", tmp_path, rank=0)
        err = p.communicate(timeout=120)[1]
    assert p.returncode == 2 and err.startswith(f"error: rank 0: MASTER_PORT {port} is in use by another program"), err
    assert "choose a free port for every rank" in err and err.count("\n") == 1, err

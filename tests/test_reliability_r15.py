"""Hostile cases, list twenty-three's leftovers: UTF-16 without a byte-order mark in any script, on standard input
and in a config; tar archives given as vectors; shell patterns as training files; Jsonnet configs; text vectors named
.npy; framework files given to ``wsd tag``; biLM URLs in every form of the Python API."""
from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
import yaml

from tasks.cli import main

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
    from tasks.data.static_vectors import DataFormatError, load_static_vectors

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
    from tasks.experiment.parallel import run_jobs

    assert first_time(("test message", "said by the parent"))
    said = run_jobs(said_in_a_worker, [("a",), ("a",), ("a",), ("said by the parent",)], jobs=2, threads=1)
    assert sum(said) == 1 and not said[3]  # one worker says it; the parent's own is not said again
    assert not first_time(("test message", "a"))  # said by a worker: said for the rest of the command

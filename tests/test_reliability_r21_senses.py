"""Round seven, building and tagging senses (docs/reliability.md, "Round seven: building and tagging senses"): a
``~`` left in --cache-dir, a feature source giving NaN, a pre-checksum gloss folder holding NaN, full disks under
the sense file and the gloss cache, a read-only file system, marked words glued to punctuation with
--pretokenized, and raw-eval on the sense file's own training folder. Tiny fixtures (the WordNet, SemCor and biLM
of test_wsd_senses_build; the sense file of test_wsd_tag_text); the real full and read-only disks are small tmpfs
mounts, run only as root where mount works."""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest

import elmo_tasks.data  # noqa: F401 (first: elmo_tasks.wsd.data.reader cannot be imported first)
from elmo_tasks.cli import main

from test_tasks_helpers import one_line_error
from test_wsd_senses_build import tiny  # noqa: F401 (a WordNet, SemCor and biLM in the current folder)
from test_wsd_tag_text import senses  # noqa: F401 (the module's sense file fixture)

REPO = Path(__file__).resolve().parents[1]


def _build(*extra: str, out: str = "s.h5", cache: str = "none") -> list[str]:
    return ["wsd", "senses", "--config", "c.yaml", "--source", "elmo", f"--cache-dir={cache}", "--progress", "off",
            "--out", out, *extra]


def _finite(path) -> bool:
    with h5py.File(path, "r") as f:
        return bool(np.isfinite(f["context"][()]).all() and np.isfinite(f["gloss"][()]).all())


@pytest.fixture
def tmpfs(tmp_path):
    """A function mounting a tmpfs of ``size`` KB at a new folder (``ro``: read-only), with ``free`` KB left free
    (a filler file takes the rest); unmounted after the test. Skipped unless root and mount works."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small tmpfs needs root and mount(8)")
    mounted = []

    def make(size: int = 256, free: int | None = None, ro: bool = False) -> Path:
        m = tmp_path / f"m{len(mounted)}"
        m.mkdir()
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}k", "tmpfs", str(m)], capture_output=True)
        if p.returncode:
            pytest.skip(f"mount -t tmpfs failed here: {p.stderr.decode().strip()}")
        mounted.append(m)
        if free is not None:
            with open(m / "filler", "wb") as f:
                f.write(b"\0" * ((size - free) << 10))
        if ro:
            subprocess.run(["mount", "-o", "remount,ro", str(m)], check=True)
        return m

    yield make
    for m in mounted:
        subprocess.run(["umount", str(m)])


def _cli(args: list[str], cwd, env_extra: dict | None = None, prelude: str = "") -> subprocess.CompletedProcess:
    """``elmo-tasks ARGS`` as its own process (a crash is its exit code), ``prelude`` run first."""
    code = prelude + "\nimport sys\nfrom elmo_tasks.cli import main\nsys.argv = ['elmo-tasks', *sys.argv[1:]]\n" \
                     "sys.exit(main())"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]), **(env_extra or {})}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=600)


# ---------------------------------------------------------------- S36: a "~" the shell left in --cache-dir

def test_s36_a_tilde_in_cache_dir_is_the_home_folder_for_every_file_of_the_gloss_cache(tiny, monkeypatch,  # noqa: F811
                                                                                       capsys):
    home = tiny / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert main(_build("--lemmas", "bank", out="a.h5", cache="~/c")) == 0
    assert not (tiny / "~").exists()  # (was: the arrays under ./~/c, progress.json and the lock under $HOME/c)
    folders = {p.parent for p in (home / "c" / "glosses").rglob("progress.json")}
    assert folders and all(list(f.glob("*.npy")) for f in folders)
    capsys.readouterr()
    assert main(_build("--lemmas", "bank", out="b.h5", cache="~/c")) == 0  # the second build reads the cache
    assert "embedded" not in capsys.readouterr().err


def test_s36_the_cache_variable_with_a_tilde_and_a_users_home_that_does_not_exist(tiny, monkeypatch):  # noqa: F811
    from elmo_features.util.cli_types import cache_dir_of
    from elmo_features.util.errors import UsageError

    monkeypatch.setenv("HOME", str(tiny))

    class Args:
        cache_dir = "~/c"

    assert cache_dir_of(Args) == tiny / "c"
    Args.cache_dir = "~no_such_user_r21/c"
    with pytest.raises(UsageError, match="no such user's home folder"):
        cache_dir_of(Args)


def test_s36_every_path_option_and_the_wsd_data_paths_read_a_tilde_as_home(tiny, monkeypatch):  # noqa: F811
    from elmo_features.util.cli_types import DefaultValue
    from elmo_tasks.cli import build_parser
    from elmo_tasks.wsd.data.inventory import find_index_sense
    from elmo_tasks.wsd.data.reader import find_dataset_files

    monkeypatch.setenv("HOME", str(tiny))
    args = build_parser().parse_args(["wsd", "raw-eval", "--senses=~/s.h5", "--test", "~/train", "~/t2",
                                      "--out=~/re", "--wordnet=~/wn"])
    assert (args.senses, args.test, args.out, args.wordnet) == (
        f"{tiny}/s.h5", [f"{tiny}/train", f"{tiny}/t2"], f"{tiny}/re", f"{tiny}/wn")
    args = build_parser().parse_args(["wsd", "senses", "--source", "elmo", "--out", "~/s.h5"])
    assert isinstance(args.cache_dir, DefaultValue) and args.out == f"{tiny}/s.h5"  # (a default: as it is)
    assert find_index_sense("~/wn") == tiny / "wn" / "index.sense"  # (a config's wordnet: ~/wn)
    assert find_dataset_files("~/train")[1] == tiny / "train" / "train.data.xml"  # (a config's train: ~/train)


# ---------------------------------------------------------------- S12: a feature source giving NaN

def _huge_bilm(tiny):  # noqa: F811
    """The tiny biLM's weights x1e25: finite, but its features overflow (what a diverged model looks like)."""
    with h5py.File(tiny / "bilm" / "weights.hdf5", "r+") as f:
        f.visititems(lambda n, o: o.__setitem__(Ellipsis, o[()] * 1e25)
                     if isinstance(o, h5py.Dataset) and o.dtype.kind == "f" else None)


def test_s12_a_source_giving_nan_is_refused_before_the_build(tiny, capsys):  # noqa: F811
    _huge_bilm(tiny)
    capsys.readouterr()
    assert main(_build("--lemmas", "bank")) == 2
    one_line_error(capsys, "the feature source elmo gives NaN or infinite features", "diverged or damaged",
                   "nothing was written")
    assert not (tiny / "s.h5").exists()


def test_s12_non_finite_sense_vectors_are_never_written(tiny, capsys, monkeypatch):  # noqa: F811
    from elmo_tasks.wsd import sense_build

    _huge_bilm(tiny)
    monkeypatch.setattr(sense_build, "feature_trouble", lambda source: None, raising=False)  # (the probe passes)
    capsys.readouterr()
    assert main(_build("--lemmas", "bank")) == 2
    err = one_line_error(capsys, "have NaN or infinite vectors", "s.h5 was not written")
    assert err.startswith("error: wsd senses: 2 of 2 senses have NaN or infinite vectors"), err  # (bank: 2)
    assert not (tiny / "s.h5").exists()


def _nan_sense_file(src: Path, dest: Path) -> None:
    """A copy of the sense file ``src`` whose first sense's context vector is NaN, whole by its checksums (as a
    version without the check wrote it; its part-of-speech head left out, as a build without SemCor has none)."""
    import hashlib

    from elmo_tasks.wsd.pos_head import GROUP
    from elmo_tasks.wsd.sense_file import SENSE_ARRAYS, sense_digest

    shutil.copy(src, dest)
    with h5py.File(dest, "r+") as f:
        context = f["context"][()]
        context[0] = np.nan
        f["context"][...] = context
        keys = [k.decode() if isinstance(k, bytes) else k for k in f["keys"][()]]
        f.attrs["sha256"] = sense_digest(keys, *(f[n][()] for n in SENSE_ARRAYS))
        if GROUP in f:
            del f[GROUP]
        meta = {**json.loads(f.attrs["meta"]), "pos_head": None}
        f.attrs["meta"] = json.dumps(meta)
        f.attrs["meta_sha256"] = hashlib.sha256(f.attrs["meta"].encode("utf-8")).hexdigest()


def test_s12_wsd_tag_refuses_a_sense_file_holding_nan(senses, tmp_path, capsys):  # noqa: F811
    _nan_sense_file(senses / "senses.h5", tmp_path / "nan.h5")
    (tmp_path / "b.txt").write_text("the bank of the river\n")
    capsys.readouterr()
    assert main(["wsd", "tag", str(tmp_path / "b.txt"), "--senses", str(tmp_path / "nan.h5"), "--format", "tsv"]) == 2
    one_line_error(capsys, f"{tmp_path / 'nan.h5'}: 1 of ", "senses have NaN or infinite vectors (1 context, 0 gloss)",
                   "cannot tag")


# ---------------------------------------------------------------- S11: a pre-checksum gloss folder holding NaN

def test_s11_a_gloss_folder_without_checksums_holding_nan_is_computed_again(tiny, capsys):  # noqa: F811
    (tiny / "train").rename(tiny / "elsewhere")  # no SemCor: each sense's vector is its gloss's
    assert main(_build("--lemmas", "bank,rock", cache="C")) == 0
    for record in (tiny / "C" / "glosses").rglob("progress.json"):  # as an older version wrote it, then damaged
        saved = json.loads(record.read_text())
        saved.pop("crc32", None), saved.pop("verified", None)
        record.write_text(json.dumps(saved))
        for npy in record.parent.glob("*.npy"):
            a = np.load(npy, mmap_mode="r+")
            a[:] = np.nan
            a.flush()
            del a
    capsys.readouterr()
    assert main(_build("--lemmas", "bank,rock", "--force", cache="C")) == 0
    err = capsys.readouterr().err
    assert "was written before checksums were recorded and holds NaN or infinite values" in err, err
    assert _finite(tiny / "s.h5")


# ---------------------------------------------------------------- S42: the sense file on a full disk

def test_s42_no_room_for_the_sense_file_is_one_line_naming_it_and_the_room_it_needs(tiny, capsys,  # noqa: F811
                                                                                     monkeypatch):
    from elmo_tasks.wsd import sense_build

    monkeypatch.setattr(sense_build, "room_left", lambda path: (3000, "its file system has", "free some space"),
                        raising=False)
    capsys.readouterr()
    assert main(_build("--lemmas", "bank")) == 2
    err = one_line_error(capsys, "s.h5: the sense file needs about ", "but its file system has 3 KB",
                         "free some space or write it elsewhere (--out)")
    assert "Traceback" not in err
    assert sorted(p.name for p in tiny.iterdir() if p.name.startswith((".s.h5", "s.h5"))) == []


def test_s42_a_write_failing_for_room_is_one_line_and_leaves_no_temporary_file(tiny, capsys, monkeypatch):  # noqa: F811
    from elmo_tasks.wsd import sense_build

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sense_build, "write_pos_head", full)  # (inside the HDF5 write, after the arrays)
    capsys.readouterr()
    assert main(_build("--lemmas", "bank")) == 2
    one_line_error(capsys, "s.h5: no space left on device while writing the sense file (about ",
                   "it was not written: free some space or write it elsewhere (--out)")
    assert sorted(p.name for p in tiny.iterdir() if p.name.startswith((".s.h5", "s.h5"))) == []


@pytest.mark.parametrize("estimate", ["checked", "passed"])
def test_s42_a_real_full_disk_under_the_sense_file(tiny, tmpfs, estimate):  # noqa: F811
    """8 KB free: refused by the estimate, or (estimate bypassed) by HDF5's failed write, in one line without a
    traceback or a crash at exit, the temporary file removed."""
    m = tmpfs(256, free=8)
    prelude = ("import elmo_tasks.wsd.sense_build as b; b.room_left = lambda p: (1 << 40, 'x', 'y')"
               if estimate == "passed" else "")
    p = _cli(_build("--lemmas", "bank", out=str(m / "s.h5")), tiny, prelude=prelude)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {m / 's.h5'}: ") and ("needs about" in last or "no space left" in last), last
    assert sorted(x.name for x in m.iterdir()) == ["filler"]


# ---------------------------------------------------------------- S40, S41: the gloss cache on a full disk

def test_s40_no_room_for_the_gloss_arrays_names_the_folder_and_the_room_they_need(tmp_path, monkeypatch):
    from elmo_features.util.errors import PathError
    from elmo_tasks.wsd import gloss_cache

    store = gloss_cache.GlossStore(tmp_path / "C", "fp", ("sentence", "lemma"), 100, 8)
    monkeypatch.setattr(gloss_cache, "room_left", lambda path: (5000, "its file system has", "free some space"),
                        raising=False)
    with pytest.raises(PathError, match=r"C/glosses/\w+: the gloss arrays need about 418 KB, but its file system "
                                        r"has 5 KB; free some space, or give another --cache-dir"):
        store.create(4, 256)
    assert list(store.folder.glob("*.npy")) == []


def test_s41_the_gloss_arrays_take_their_space_when_made_and_a_full_disk_is_one_error(tmp_path, monkeypatch):
    from elmo_features.util.errors import PathError
    from elmo_tasks.wsd import gloss_cache

    reserved = []
    monkeypatch.setattr(gloss_cache, "reserve", lambda fd, size: reserved.append(size), raising=False)
    store = gloss_cache.GlossStore(tmp_path / "C", "fp", ("sentence", "lemma"), 100, 8)
    arrays = store.create(4, 256)
    assert reserved == [a.nbytes + a.offset for a in arrays.values()] and len(reserved) == 2
    del arrays

    def full(fd, size):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(gloss_cache, "reserve", full, raising=False)
    with pytest.raises(PathError, match=r"sentence\.npy: no space left on device; the gloss arrays need about"):
        store.create(4, 256)
    assert list(store.folder.glob("*.npy")) == []  # (none left half made)
    with pytest.raises(FileNotFoundError):
        store.open(writable=True)


def test_s41_a_resumed_computation_takes_the_rest_of_its_space_first(tmp_path, monkeypatch):
    from elmo_features.util.errors import PathError
    from elmo_tasks.wsd import gloss_cache

    store = gloss_cache.GlossStore(tmp_path / "C", "fp", ("sentence",), 100, 8)
    del store.create(4, 256)["sentence"]

    def full(fd, size):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(gloss_cache, "reserve", full, raising=False)
    with pytest.raises(PathError, match="the glosses embedded so far are kept: free some space and run the same "
                                        "command again"):
        store.open(writable=True)
    assert store.open()["sentence"].shape == (100, 4, 256)  # (reading needs no room)


GLOSS_ON = """
import numpy as np, sys
from elmo_tasks.wsd.gloss_cache import GlossStore
{patch}
s = GlossStore(sys.argv[1], "fp", ("sentence",), 64, 8)
a = s.create(2, 512)["sentence"]
a[:] = 1.0
a.flush()
print("written")
"""


@pytest.mark.parametrize("estimate", ["checked", "passed"])
def test_s41_gloss_arrays_on_a_real_full_disk_are_an_error_not_a_sigbus(tmpfs, estimate):
    m = tmpfs(256, free=28)  # (the arrays: 128 KB)
    patch = ("import elmo_tasks.wsd.gloss_cache as g; g.room_left = lambda p: (1 << 40, 'x', 'y')"
             if estimate == "passed" else "")
    p = subprocess.run([sys.executable, "-c", GLOSS_ON.format(patch=patch), str(m / "C")], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 1 and "PathError" in p.stderr, (p.returncode, p.stderr)  # (was: -7, SIGBUS)
    assert ("the gloss arrays need about" in p.stderr.splitlines()[-1]), p.stderr
    assert not list((m / "C").rglob("*.npy"))


# ---------------------------------------------------------------- T06: a read-only file system

def test_t06_an_output_on_a_read_only_file_system_is_said_so(tmp_path, monkeypatch):
    from elmo_features.util import paths
    from elmo_features.util.errors import PathError

    class ReadOnly:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(paths.os, "access", lambda *a, **k: False)
    monkeypatch.setattr(paths.os, "statvfs", lambda p: ReadOnly)
    with pytest.raises(PathError, match=r"--out: cannot write to .* \(a read-only file system\); choose another path"):
        paths.check_output_file(tmp_path / "t.tsv", "--out")
    (tmp_path / "t.tsv").write_text("x\n")
    with pytest.raises(PathError, match=r"t\.tsv exists and is not writable \(a read-only file system\)"):
        paths.check_output_file(tmp_path / "t.tsv", "--out")


def test_t06_a_real_read_only_mount_for_out_and_cache_dir(senses, tmpfs, tmp_path, capsys):  # noqa: F811
    ro = tmpfs(64, ro=True)
    (tmp_path / "b.txt").write_text("the bank\n")
    capsys.readouterr()
    assert main(["wsd", "tag", str(tmp_path / "b.txt"), "--senses", str(senses / "senses.h5"), "--out",
                 str(ro / "t.tsv")]) == 2
    one_line_error(capsys, f"--out: cannot write to {ro} (a read-only file system); choose another path")


def test_t06_an_oserror_of_a_read_only_file_system_says_where_to_write():
    from elmo_tasks.cli import error_message

    assert error_message(OSError(errno.EROFS, "Read-only file system", "/ro/t.tsv")) == \
        "/ro/t.tsv: Read-only file system; write the output elsewhere"


# ---------------------------------------------------------------- T13: marked words glued to punctuation

def test_t13_pretokenized_marked_words_glued_to_punctuation_are_said(senses, tmp_path, capsys):  # noqa: F811
    (tmp_path / "mk.txt").write_text("bank/VERB, river/noun.\n")
    capsys.readouterr()
    assert main(["wsd", "tag", str(tmp_path / "mk.txt"), "--senses", str(senses / "senses.h5"), "--format", "tsv",
                 "--pretokenized"]) == 0
    err = [e for e in capsys.readouterr().err.splitlines() if "tokenized" in e]
    assert len(err) == 1 and err[0].startswith("warning: 2 of the 2 words split on whitespace alone keep punctuation "
                                               "at their edge ('bank/VERB,', 'river/noun.')"), err
    doc = " ".join((REPO / "docs" / "wsd.md").read_text().split())
    assert "`--pretokenized` keeps each token whole, so there the mark ends the token" in doc
    (tmp_path / "ok.txt").write_text("bank/VERB , river/noun .\n")  # (tokenized: tagged, not said)
    assert main(["wsd", "tag", str(tmp_path / "ok.txt"), "--senses", str(senses / "senses.h5"), "--format", "tsv",
                 "--pretokenized"]) == 0
    out = capsys.readouterr()
    assert "tokenized" not in out.err and "bank%2:40:00::" in out.out and "river%1:17:00::" in out.out


# ---------------------------------------------------------------- R04: raw-eval on the training folder

def test_r04_raw_eval_on_the_sense_files_training_folder_warns_as_wsd_does(tiny, tmp_path, capsys,  # noqa: F811
                                                                           monkeypatch):
    assert main(_build("--lemmas", "bank", "--train", "train")) == 0  # (recorded as given: relative)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert main(["wsd", "raw-eval", "--senses", str(tiny / "s.h5"), "--test", str(tiny / "train"), "--out", "re",
                 "--progress", "off"]) == 0
    err = capsys.readouterr().err
    assert (f"warning: the test folder {tiny / 'train'} is the training folder: its scores measure fit to the "
            "training data, not generalisation") in err, err
    shutil.copytree(tiny / "train", tmp_path / "copy")  # a copy: its files' content
    assert main(["wsd", "raw-eval", "--senses", str(tiny / "s.h5"), "--test", str(tmp_path / "copy"), "--out",
                 "re2", "--progress", "off"]) == 0
    assert "has the same content as the training set's" in capsys.readouterr().err

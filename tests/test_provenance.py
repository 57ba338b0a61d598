"""elmo_features.util.provenance: atomic writes keep the old file on failure; git commit + dirty marker; machine."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from elmo_features.util.provenance import (DIRTY_MARKER, atomic_open, atomic_path, cpu_info, git_commit, machine,
                                      write_bytes_atomic, write_text_atomic)


def test_write_replaces_content_with_ordinary_permissions(tmp_path):
    p = tmp_path / "sub" / "out.txt"  # the folder is created
    write_text_atomic(p, "old\n")
    write_text_atomic(p, "new ü\n")
    assert p.read_text(encoding="utf-8") == "new ü\n"
    umask = os.umask(0)
    os.umask(umask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600
    assert sorted(x.name for x in p.parent.iterdir()) == ["out.txt"]


def test_failed_write_keeps_old_file_and_leaves_no_temp(tmp_path):
    p = tmp_path / "out.bin"
    write_bytes_atomic(p, b"old")
    with pytest.raises(RuntimeError, match="disk on fire"):
        with atomic_open(p, "wb") as f:
            f.write(b"half of the new con")
            raise RuntimeError("disk on fire")
    assert p.read_bytes() == b"old"
    assert [x.name for x in tmp_path.iterdir()] == ["out.bin"]


def test_failed_write_by_name_keeps_old_file(tmp_path):
    p = tmp_path / "weights.hdf5"
    p.write_bytes(b"old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(p) as tmp:
            assert tmp.parent == tmp_path and tmp != p
            tmp.write_bytes(b"partial")
            raise KeyboardInterrupt  # also on Ctrl-C
    assert p.read_bytes() == b"old"
    assert [x.name for x in tmp_path.iterdir()] == ["weights.hdf5"]


def test_failed_rename_leaves_no_temp(tmp_path):
    target = tmp_path / "a_folder"
    target.mkdir()
    (target / "keep").write_text("x")
    with pytest.raises(OSError):
        write_text_atomic(target, "text")  # os.replace of a file onto a non-empty folder fails
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a_folder"]
    assert (target / "keep").read_text() == "x"


def test_atomic_open_text_mode_and_bad_mode(tmp_path):
    with atomic_open(tmp_path / "t.txt", "w") as f:
        f.write("é")
    assert (tmp_path / "t.txt").read_bytes() == "é".encode("utf-8")
    with pytest.raises(ValueError, match="mode"):
        with atomic_open(tmp_path / "t.txt", "a"):
            pass


def _git(root, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
                   cwd=root, check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")
def test_git_commit_marks_a_dirty_tree(tmp_path):
    assert git_commit(tmp_path) == "unknown"  # not a checkout
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    _git(tmp_path, "add", "a.py")
    _git(tmp_path, "commit", "-q", "-m", "first")
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert git_commit(tmp_path) == sha
    (tmp_path / "untracked.txt").write_text("scratch\n")  # untracked files do not count
    assert git_commit(tmp_path) == sha
    (tmp_path / "a.py").write_text("x = 2\n")
    assert git_commit(tmp_path) == sha + DIRTY_MARKER == sha + "-dirty"
    _git(tmp_path, "add", "a.py")  # staged but not committed: still dirty
    assert git_commit(tmp_path) == sha + "-dirty"


def test_cpu_info_and_machine(tmp_path):
    f = tmp_path / "cpuinfo"
    f.write_text("processor\t: 0\nmodel name\t: Test CPU 9000\nflags\t\t: fpu sse4_2 avx avx2 fma avx512f\n\n"
                 "processor\t: 1\nmodel name\t: Other\nflags\t\t: fpu\n")
    assert cpu_info(f) == ("Test CPU 9000", ["sse4_2", "avx", "avx2", "fma", "avx512f"])
    model, flags = cpu_info(tmp_path / "missing")
    assert model and flags == []
    m = machine()
    assert m["cpu_cores"] >= 1 and m["cpu_model"] and isinstance(m["cpu_flags"], str)
    assert {"torch", "torch_threads", "python", "platform"} <= set(m)

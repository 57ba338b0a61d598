"""How outputs are written: atomically, and stamped with where they came from.

Atomic: the bytes go to a temporary file in the destination's folder, are flushed and fsync'ed, then
``os.replace``d onto the destination (and the folder entry fsync'ed; a symlink's target, the link is kept), so a reader sees the old file or the
complete new one, never a half-written one. On any failure the temporary file is removed and the old file
is left as it was. Every output of elmo_features, tasks, bench and scripts goes through this module.

Provenance: ``package_version()`` (the installed package's version, recorded beside the commit by every writer),
``git_commit()`` (short commit, ``-dirty`` when tracked files differ from it), ``machine()`` (CPU cores, model and SIMD
flags, library versions) and ``timestamp()`` (UTC).
"""
from __future__ import annotations

import contextlib
import os
import re
import platform
import subprocess
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Iterator

import torch

from elmo_features.util.paths import is_stream

REPO = Path(__file__).resolve().parents[2]  # elmo_features/util/provenance.py -> the repository
DIRTY_MARKER = "-dirty"  # appended to the commit when tracked files have uncommitted changes
# The CPU flags that matter for the speed of dense fp32/bf16 kernels, reported when present.
SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
              "amx_tile", "amx_bf16", "asimd", "sve")


# ---------------------------------------------------------------- atomic writes

def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort: not every platform/file system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def real_output(path: str | os.PathLike) -> Path:
    """Where writing ``path`` goes: a symlink (even a dangling one) is followed, so its target is written and the
    link kept."""
    path = Path(path).expanduser()
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def commit_file(src: str | os.PathLike, dest: str | os.PathLike) -> None:
    """fsync the finished file ``src`` and rename it onto ``dest`` (same folder; a symlink: onto its target),
    durably."""
    src, dest = Path(src), real_output(dest)
    _fsync_file(src)
    os.replace(src, dest)
    _fsync_dir(dest.parent)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path next to ``path`` to write to (e.g. with h5py or torch.save by name).

    When the block ends normally the file is fsync'ed and renamed onto ``path``; when it raises, the
    temporary file is removed and ``path`` is untouched. The parent folder is created if needed. A symlink is
    followed: its target is replaced (the temporary file is made in the target's folder) and the link kept.
    """
    given, path = path, real_output(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file ordinary permissions
        yield tmp
        commit_file(tmp, path)
    except OSError as e:  # (a full disk while writing: the one-line error then names the file)
        if e.filename is None and e.errno is not None:
            raise OSError(e.errno, e.strerror or str(e), str(given)) from e
        raise
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO]:
    """An open file (``"wb"`` or ``"w"``, UTF-8) whose content replaces ``path`` atomically when the block ends."""
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_open: mode must be 'wb' or 'w', got {mode!r}")
    with atomic_path(path) as tmp:
        with open(tmp, mode, **({"encoding": "utf-8"} if mode == "w" else {})) as f:
            yield f


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically; a stream (``/dev/stdout``, a pipe: ``paths.is_stream``) cannot be
    replaced and is written in place."""
    if is_stream(path):
        try:
            with open(Path(path).expanduser(), "wb") as f:
                f.write(data)
        except OSError as e:  # (/dev/full: the one-line error then names it)
            if e.filename is None and e.errno is not None:
                raise OSError(e.errno, e.strerror or str(e), str(path)) from e
            raise
        return
    with atomic_open(path, "wb") as f:
        f.write(data)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically."""
    write_bytes_atomic(path, text.encode("utf-8"))


# ---------------------------------------------------------------- provenance

DISTRIBUTION = "elmo-tasks"  # the name pip knows the package by: its metadata holds the version


def package_version() -> str:
    """The version of the installed ``elmo-tasks`` (its package metadata: the one source of truth, from
    pyproject.toml); in a checkout that is not installed, pyproject.toml's own ``version``; else "unknown"."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        pass
    try:
        text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return "unknown"
    m = re.search(r'^\[project\][^\[]*?^version\s*=\s*"([^"]+)"', text, re.MULTILINE | re.DOTALL)
    return m.group(1) if m else "unknown"


def git_commit(root: str | os.PathLike | None = None) -> str:
    """Short commit of the checkout at ``root`` (default: this code's), + ``-dirty`` if tracked files changed.

    "unknown" when ``root`` is not a git checkout (e.g. an installed package) or git is missing.
    """
    root = Path(root) if root is not None else REPO
    if not (root / ".git").exists():
        return "unknown"
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + (DIRTY_MARKER if dirty else "")


def cpu_info(cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> tuple[str, list[str]]:
    """(CPU model name, the SIMD_FLAGS it has) from /proc/cpuinfo; (platform.processor() or "unknown", []) elsewhere."""
    model, flags = None, None
    try:
        lines = Path(cpuinfo).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:  # one block per core: the first one is enough
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model is None:
            model = value.strip()
        elif key in ("flags", "Features") and flags is None:  # x86 / ARM
            have = set(value.split())
            flags = [f for f in SIMD_FLAGS if f in have]
    return model or platform.processor() or "unknown", flags or []


def machine() -> dict:
    """CPU cores, model and SIMD flags, torch threads, python/torch versions and the platform string."""
    model, flags = cpu_info()
    return {"cpu_cores": os.cpu_count(), "cpu_model": model, "cpu_flags": " ".join(flags),
            "torch_threads": torch.get_num_threads(), "python": platform.python_version(),
            "torch": torch.__version__, "platform": platform.platform()}


def timestamp() -> str:
    """The current time in UTC, e.g. ``2025-01-31 14:05 UTC``."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

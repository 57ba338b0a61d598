"""Room on disk for an output: what its file system has free (or what the file-size limit leaves), checked before a
write, space reserved for a memory-mapped file, and a write refused for room (a full disk, a quota, ``ulimit -f``)
told apart from other failures and put in words. ``embed``'s HDF5 output, ``wsd senses``' sense file and its gloss
cache use it."""
from __future__ import annotations

import errno
import os
import resource
import shutil
import sys
from pathlib import Path

ROOM_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # a write refused for room


def size_text(n: int) -> str:
    """A byte count for a message: MB from a million bytes, else KB."""
    return f"{n / 1e6:.2f} MB" if n >= 1e6 else f"{max(n, 0) / 1e3:.0f} KB"


def room_left(path: str | os.PathLike) -> tuple[int, str, str]:
    """(bytes that may still be written to ``path``, whose words, what to do when they are too few): its file
    system's free space ("its file system has", "free some space"), or what the process's file-size limit leaves
    of the file when that is less ("the file-size limit (ulimit -f) leaves", "raise the limit"). ``path`` may not
    exist yet: its nearest existing folder is measured."""
    p = Path(path)
    folder = next((a for a in (p.parent, *p.parent.parents) if a.is_dir()), Path("."))
    room, what, todo = shutil.disk_usage(folder).free, "its file system has", "free some space"
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    size = p.stat().st_size if p.is_file() else 0
    if limit != resource.RLIM_INFINITY and limit - size < room:
        room, what, todo = limit - size, "the file-size limit (ulimit -f) leaves", "raise the limit"
    return room, what, todo


def reserve(fd: int, size: int) -> None:
    """Allocate the first ``size`` bytes of the open file ``fd`` on disk now (``posix_fallocate``), so that a full
    disk is an OSError (ENOSPC) here rather than a SIGBUS when a memory-mapped page of it is first written; nothing
    where the file system or platform cannot (the file stays sparse)."""
    if size <= 0 or not hasattr(os, "posix_fallocate"):
        return
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno in ROOM_ERRNOS:
            raise
        # (EOPNOTSUPP, EINVAL, ENODEV: a file system without it: the file stays sparse)


def disk_full(e: BaseException) -> bool:
    """True for a write refused for room: ENOSPC, a quota (EDQUOT) or the file-size limit (EFBIG), raised as OSError
    by Python or as an h5py error that quotes it."""
    texts = ("No space left", "Disk quota exceeded", "File too large") + tuple(f"errno = {c}," for c in ROOM_ERRNOS)
    return getattr(e, "errno", None) in ROOM_ERRNOS or any(t in str(e) for t in texts)


def room_cause(e: BaseException) -> str:
    """What refused a write for room, in words (``disk_full``'s errors)."""
    code, text = getattr(e, "errno", None), str(e)
    if code == errno.EFBIG or "File too large" in text or f"errno = {errno.EFBIG}," in text:
        return "the file-size limit (ulimit -f) was reached"
    if code == errno.EDQUOT or "quota" in text or f"errno = {errno.EDQUOT}," in text:
        return "the disk quota was exceeded"
    return "no space left on device"


class H5pyRoomWatch:
    """A ``with`` block writing HDF5 files: the reports h5py makes of each object it frees after a write failed for
    room ("Can't decrement id ref count (file write failed ... errno = 28 ...)": a traceback through
    ``sys.excepthook``, then an unraisable-exception report) are dropped and kept in ``failed``; ``check()`` raises
    the first, so that the writer stops before HDF5 uses the file again (flushing or closing it then may crash the
    process). Other reports pass. The hooks are put back when the block ends, unless by a write refused for room
    (``disk_full``): HDF5 then reports again until the process ends."""

    def __init__(self):
        self.failed: list[BaseException] = []

    def __enter__(self) -> "H5pyRoomWatch":
        self._hooks = sys.unraisablehook, sys.excepthook
        sys.unraisablehook, sys.excepthook = self._unraisable, self._excepthook
        return self

    def _drops(self, e: BaseException | None) -> bool:
        if isinstance(e, RuntimeError) and "decrement id ref count" in str(e):
            self.failed.append(e)
            return True
        return False

    def _unraisable(self, unraisable) -> None:
        if not self._drops(unraisable.exc_value):
            self._hooks[0](unraisable)

    def _excepthook(self, kind, value, tb) -> None:
        if not self._drops(value):
            self._hooks[1](kind, value, tb)

    def check(self) -> None:
        """Raise the first write failure h5py reported only as an object freed."""
        if self.failed:
            raise self.failed[0]

    def __exit__(self, kind, value, tb) -> bool:
        if value is None or not disk_full(value):
            sys.unraisablehook, sys.excepthook = self._hooks
        return False


def close_once(f) -> None:
    """Close an HDF5 file after a failed write (h5py would report each object's failed write again)."""
    try:
        f.close()
    except Exception:  # (the close flushes, and fails on the full disk too)
        pass

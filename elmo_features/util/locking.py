"""One writer per output: an exclusive ``fcntl.flock`` on a lock file next to it.

HDF5's own file locking is often switched off on cluster file systems (``HDF5_USE_FILE_LOCKING=FALSE``),
and it does not cover a resumable ``.partial`` file or a folder of checkpoints, so outputs take this lock
instead: ``embed``, ``predict``, ``wsd tag`` and ``wsd senses`` lock ``OUTPUT.lock``, ``train-bilm`` locks ``OUT_DIR/train.lock``, the feature cache
locks ``KEY.hdf5.lock`` while it computes an entry. The lock file holds the writer's PID and host, for
the refusal message; it is removed when the lock is released. A crashed writer's lock is released by the
kernel, so a stale lock file never blocks anyone.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
import sys
from pathlib import Path
from typing import Callable

from elmo_features.util.errors import LockError, PathError
from elmo_features.util.paths import check_plain_file, is_stream


def lock_path_for(target: str | os.PathLike) -> Path:
    """``target`` + ".lock" (in the same folder)."""
    target = Path(target)
    return target.with_name(target.name + ".lock")


def lock_output_file(path: str | os.PathLike | None, flag: str):
    """Take the lock of the output file ``path`` now (``OUTPUT.lock`` beside the file, a symlink's target's) as
    ``embed`` does: a second writer of it gets a LockError. A context manager that releases it; a no-op for None
    (stdout) and for a stream (a pipe, ``/dev/stdout``: written in place, it has no folder to hold a lock file)."""
    if path is None or is_stream(path):
        return contextlib.nullcontext()
    real = Path(os.path.realpath(Path(path).expanduser()))
    return OutputLock(lock_path_for(real), f"{flag} {path}").acquire()


def lock_holder(path: str | os.PathLike) -> str | None:
    """Who holds the lock file ``path`` now ("PID ... on host ..."), or None when nobody does (no file, or a stale
    one left by a killed writer). Only reads: the file is neither made nor changed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _holder(fd)
    except OSError:  # (a file system without locks: nobody can be told apart)
        return None
    finally:
        os.close(fd)  # (closing releases a shared lock taken just now)
    return None


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
    except OSError:
        text = []
    if len(text) >= 2:
        return f"PID {text[0]} on host {text[1]}"
    return f"PID {text[0]}" if text else "unknown PID"


class OutputLock:
    """An exclusive lock on ``path`` (a lock file); ``what`` names the protected output in messages.

    ``acquire()`` refuses at once with a LockError naming the other writer; ``acquire(wait=True)``
    waits for it instead (``on_wait(holder)`` is called once before waiting). Use as a context manager.
    """

    def __init__(self, path: str | os.PathLike, what: str):
        self.path = Path(path)
        self.what = what
        self.fd: int | None = None

    def acquire(self, wait: bool = False, on_wait: Callable[[str], None] | None = None) -> "OutputLock":
        made = not self.path.parent.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        waited = False
        while True:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                if not wait:
                    os.close(fd)
                    raise LockError(f"{self.what} is being written by another process ({holder}; lock file "
                                    f"{self.path}); wait until it has finished, or write somewhere else") from None
                if on_wait is not None and not waited:
                    on_wait(holder)
                waited = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError as e:
                if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    os.close(fd)
                    raise
                print(f"warning: cannot lock {self.path} ({e.strerror}: the file system has no locks); make sure "
                      f"no other process writes {self.what}", file=sys.stderr)
            # a releasing holder unlinks the file: make sure the locked file is still the one at the path
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
            except OSError as e:  # (a full disk: the error names the lock file, which holds no path of its own)
                self._abandon(fd, made)
                raise OSError(e.errno, e.strerror, str(self.path)) from None
            self.fd = fd
            return self

    def _abandon(self, fd: int, made_folder: bool) -> None:
        """Undo a lock that could not be written (a full disk): the file is ours (we hold its flock), so it is
        removed, and its folder too when this acquire made it; a rerun then finds the folder as it was."""
        with contextlib.suppress(OSError):
            self.path.unlink()
        os.close(fd)
        if made_folder:
            with contextlib.suppress(OSError):
                self.path.parent.rmdir()

    def _open(self) -> int:
        """The lock file, opened (made when absent); never through a symlink or into a file with other names (a
        hard link): the lock writes its holder into the file, which would destroy a user's file."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as e:
            if e.errno != errno.ELOOP:
                raise
            check_plain_file(self.path, "a lock file")  # (a symlink: the error naming it)
            raise
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            os.close(fd)
            if stat.S_ISREG(st.st_mode):
                check_plain_file(self.path, "a lock file")  # (a hard link: the error naming it)
            raise PathError(f"{self.path} is not a regular file, not a lock file: remove it, then run again")
        return fd

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            self.path.unlink()  # while still holding the lock (see acquire)
        except (FileNotFoundError, NotADirectoryError):  # (its folder removed, or replaced by a file, meanwhile)
            pass
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None

    def __enter__(self) -> "OutputLock":
        return self.acquire() if self.fd is None else self

    def __exit__(self, *_exc) -> None:
        self.release()

    def __del__(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass

"""The standard streams of the ``elmo-tasks`` command: a closed standard output,
and text a stream (or a UTF-8 output file) cannot encode, each one line rather than a traceback."""
from __future__ import annotations

import codecs
import errno
import fcntl
import os
import resource
import stat
import sys
from contextlib import suppress

from elmo_features.util.errors import PathError
from elmo_features.util.paths import show_bytes, undecodable_byte


def _codec(name: str | None) -> str:
    """The normalized codec name (``ascii``, ``utf-8``, ...); '' for an unknown one."""
    try:
        return codecs.lookup(name or "utf-8").name
    except LookupError:
        return ""


def _encoding(stream) -> str:
    return _codec(getattr(stream, "encoding", None))


def soften_stderr() -> None:
    """Messages on a standard error that cannot encode some character (PYTHONIOENCODING=ascii, a C locale) show
    it escaped (``\\xeb``) rather than failing."""
    stream = sys.stderr
    if stream is not None and _encoding(stream) != "utf-8" and hasattr(stream, "reconfigure"):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (ValueError, OSError):
            pass


def _to_devnull(fd: int) -> None:
    """Point the file descriptor ``fd`` at /dev/null (its stream then writes nowhere, without an error)."""
    null = os.open(os.devnull, os.O_WRONLY)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)


def reopen_closed_stderr() -> None:
    """A standard error closed at start (``2>&-``) goes to /dev/null: the command does its work and exits with
    its own code, instead of failing (exit 1) at its first warning or progress line."""
    try:  # closed, or (a launcher script's file took the free descriptor) open for reading only
        writable = (fcntl.fcntl(2, fcntl.F_GETFL) & os.O_ACCMODE) in (os.O_WRONLY, os.O_RDWR)
    except OSError:
        writable = False
    if not writable:
        _to_devnull(2)
    if sys.stderr is None:  # Python found fd 2 closed at start: messages would go to standard output instead
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (the process's stderr, kept to exit)


class _DroppingErrors:
    """Standard error whose writes that fail (``2>/dev/full``, a closed pipe) are dropped: a message that cannot be
    shown must not turn a command's work into exit 1. Everything else is the wrapped stream's."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError:
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError:
            pass

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def forgive_stderr() -> None:
    """Wrap standard error in ``_DroppingErrors`` (once)."""
    if sys.stderr is not None and not isinstance(sys.stderr, _DroppingErrors):
        sys.stderr = _DroppingErrors(sys.stderr)


def reader_went_away() -> int:
    """Standard output's reader closed the pipe (``... | head -1``): normal use, so no error line. Later writes
    (the flush at exit too) go to /dev/null; the exit code is a SIGPIPE death's, 141, as for other Unix tools."""
    try:
        _to_devnull(sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        pass
    return 128 + 13


def standard_output_failed(e: OSError) -> bool:
    """Whether an OSError that names no file was standard output's: "No space left on device" where standard output
    is /dev/full or a file on a full file system, "File too large" where it is a file at the ``ulimit -f`` size.
    Its later writes (the flush at exit too) then go to /dev/null."""
    if e.filename is not None or e.errno not in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        return False
    try:
        fd = sys.stdout.fileno()
        st = os.fstat(fd)
        if e.errno == errno.EFBIG:
            limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
            failed = stat.S_ISREG(st.st_mode) and limit != resource.RLIM_INFINITY and st.st_size >= limit
        elif stat.S_ISCHR(st.st_mode):
            failed = os.path.exists("/dev/full") and st.st_rdev == os.stat("/dev/full").st_rdev
        else:
            failed = stat.S_ISREG(st.st_mode) and os.fstatvfs(fd).f_bavail == 0
    except (AttributeError, OSError, ValueError):  # no usable standard output: not it
        return False
    if failed:
        with suppress(OSError):
            _to_devnull(fd)
    return failed


def prints_result(args) -> bool:
    """The command's result goes to standard output: the listings, eval-bilm, and predict / configs show / wsd tag
    without --out."""
    command = getattr(args, "command", None)
    action = getattr(args, f"{command}_command", None) if command else None
    if command == "components" or action == "list":
        return True
    return (command in ("predict", "eval-bilm") or action in ("show", "tag")) and getattr(args, "out", None) is None


def check_stdout(args) -> None:
    """A closed standard output (``>&-``) for a command whose result goes there: one PathError (else the result
    would be lost and the exit code 0)."""
    if prints_result(args) and (sys.stdout is None or getattr(sys.stdout, "closed", False)):
        hint = "give --out FILE, or " if getattr(args, "out", False) is None else ""
        raise PathError(f"standard output is closed (>&-), and this command prints its result there; {hint}"
                        "redirect it to a file (> FILE)")


def unicode_message(e: UnicodeError) -> str:
    """One line for text that could not be encoded or decoded."""
    if not isinstance(e, UnicodeEncodeError):
        return f"{e}; give UTF-8 text"
    bad = e.object[e.start:e.end]
    byte = undecodable_byte(bad)
    if byte is not None:
        return (f"'{show_bytes(e.object[max(0, e.start - 60):e.end + 20])}' holds byte 0x{byte:02x}, which is not "
                "valid UTF-8 (a file name or argument in another encoding?), and cannot be written to a UTF-8 file; "
                "give UTF-8 names and text")
    if sys.stdout is not None and _encoding(sys.stdout) == _codec(e.encoding) != "utf-8":
        return (f"standard output cannot encode {bad!r} (its encoding is {e.encoding}, from PYTHONIOENCODING or the "
                "locale); write to a file with --out (UTF-8), or set PYTHONIOENCODING=utf-8 or a UTF-8 locale")
    return f"cannot encode {bad!r} as {e.encoding} ({e.reason}); give text that encoding can hold"

"""The project's error classes: every expected user error is an ``ElmoTasksError``.

The ``elmo-tasks`` command catches ``ElmoTasksError`` once (``tasks/cli/__init__.py``) and prints
``error: <message>`` with exit code 2; ``--debug`` or ``ELMO_TASKS_DEBUG=1`` shows the traceback instead.
A message is one line that says what is wrong, where (file, key, line) and what to do.

Subclasses also inherit the built-in exception they replace (ValueError, FileNotFoundError, ...), so
code that caught the built-in keeps working. Errors defined in other modules (WeightFileError, VectorFileError,
DownloadError, tasks' DataFormatError, ...) derive from ``ElmoTasksError`` too.
"""
from __future__ import annotations


class ElmoTasksError(Exception):
    """Base class of every expected, user-facing error of elmo_features and tasks."""


class UsageError(ElmoTasksError, ValueError):
    """Command-line arguments that do not fit together (e.g. --options without --weights)."""


class ConfigError(ElmoTasksError, ValueError):
    """A config is unreadable or breaks its schema (``elmo_features.util.schema``): an unknown key, a missing key, a
    value of the wrong type or out of range, keys that do not fit together. The one class of every config: a biLM
    options.json, a train-bilm config, a task run or WSD config, reader options, a ``--set`` override; the message
    names the file and the key path."""


class PathError(ElmoTasksError, ValueError):
    """An input or output path is unusable (a folder where a file is expected, an unwritable parent, ...)."""


class MissingPathError(PathError, FileNotFoundError):
    """An input file or folder does not exist."""

    def __str__(self) -> str:  # OSError would format "[Errno ...]" when given several args
        return str(self.args[0]) if self.args else ""


class OutputExistsError(PathError, FileExistsError):
    """An output exists and would be overwritten (e.g. a training run without --resume)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class TextInputError(ElmoTasksError, ValueError):
    """A text input file breaks the text policy (invalid UTF-8, NUL byte, blank line, empty file)."""


class CheckpointError(ElmoTasksError, ValueError):
    """A checkpoint or run folder is damaged, foreign or incomplete."""


class StaleCacheError(ElmoTasksError, ValueError):
    """A cache on disk was built from other inputs or settings than the current run's."""


class DamagedCacheError(ElmoTasksError, ValueError):
    """A cache entry on disk is damaged (e.g. holds NaN/Inf values) and cannot be recomputed where it is read."""


class LockError(ElmoTasksError, RuntimeError):
    """Another process is writing the same output or cache."""


class DivergedError(ElmoTasksError, ArithmeticError):
    """Training produced a NaN/Inf loss or parameters: stopped, with no finished run or export; or a model gives
    NaN/Inf features where vectors are built from them (``wsd senses``: nothing written)."""


def first_line(e: BaseException) -> str:
    """An exception's message cut to its first line (200 characters at most), or its class's name."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]

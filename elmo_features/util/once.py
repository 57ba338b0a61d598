"""Messages said once per command: a warning that every run of a comparison (or every row of a table) would repeat
is printed the first time only, also when the runs are spread over worker processes (``shared_by_workers``)."""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from contextlib import contextmanager
from typing import Hashable, Iterator

ENV = "ELMO_TASKS_SAID_DIR"  # a folder of one empty file per message said, shared by a command's processes
_SAID: set[str] = set()  # the keys this process said


def _key(what: Hashable) -> str:
    return hashlib.sha256(repr(what).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def first_time(what: Hashable) -> bool:
    """True the first time ``what`` (a tuple naming the message and its values) is asked about in this command."""
    key = _key(what)
    if key in _SAID:
        return False
    _SAID.add(key)
    folder = os.environ.get(ENV)
    if not folder:
        return True
    try:  # O_EXCL: of two workers asking at once, one creates the file
        os.close(os.open(os.path.join(folder, key), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return False
    except OSError:  # (the folder is gone: say it rather than lose it)
        return True
    return True


def new_command() -> None:
    """Forget what was said: a command starts (``elmo_tasks.cli.main``; a worker process shares its parent's folder)."""
    if not os.environ.get(ENV):
        _SAID.clear()


@contextmanager
def shared_by_workers() -> Iterator[None]:
    """While inside, worker processes started from here (they inherit the environment) and this one share what was
    said: a private temporary folder named in ``ENV``, holding what this process said before; removed at exit."""
    if os.environ.get(ENV):  # (nested: the outer folder serves)
        yield
        return
    folder = tempfile.mkdtemp(prefix="elmo-tasks-said-")
    for key in _SAID:
        open(os.path.join(folder, key), "w").close()
    os.environ[ENV] = folder
    try:
        yield
    finally:
        os.environ.pop(ENV, None)
        try:
            _SAID.update(os.listdir(folder))  # what the workers said is said for the rest of the command too
        except OSError:
            pass
        shutil.rmtree(folder, ignore_errors=True)

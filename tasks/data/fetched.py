"""The one discipline of every ``data get`` (the PyPI data sets and the WSD framework alike) for its folder DEST/NAME.

* A fetched folder is what its SOURCE.md's files table records; ``data get`` and ``data list`` say the same thing
  about it (present, or damaged and why), and ``data get`` without ``--force`` refuses a damaged one.
* ``--force`` replaces only what a fetch wrote: files or folders of the user's inside are named and the fetch is
  refused, as is an input (``--from``) that lies inside the folder it would replace.
* The new folder is built elsewhere and put in place with one rename that replaces only the folder checked before
  the long work: anything made or changed there meanwhile is kept, and the fetch is refused.
"""
from __future__ import annotations

import os
from pathlib import Path

from elmo_features.encoders.packaged import VERIFIED, folder_problem, recorded_files
from elmo_features.formats.download import DownloadError, check_replaceable
from elmo_features.util.errors import PathError
from elmo_features.util.wording import first_few

FETCH_OWN = ("SOURCE.md", VERIFIED)  # written by the fetch (and its checks) beside the recorded files


def not_fetched(folder: Path) -> list[str] | None:
    """The entries of a fetched folder that no fetch wrote (top-most only, folders ending in '/'), sorted; None when
    its SOURCE.md records no files (then nothing in it can be told from the user's own)."""
    try:
        recorded = set(recorded_files(folder))
    except (OSError, UnicodeDecodeError):
        return None
    if not recorded:
        return None
    parents = {p.as_posix() for r in recorded for p in Path(r).parents if p != Path(".")}
    found = []
    for root, dirs, files in os.walk(folder):
        rel = Path(root).relative_to(folder)
        for d in list(dirs):
            r = (rel / d).as_posix()
            if r not in parents or os.path.islink(os.path.join(root, d)):
                found.append(r + "/")
                dirs.remove(d)  # the user's whole folder: named once
        for f in files:
            r = (rel / f).as_posix()
            own = r in recorded or (rel == Path(".") and f in FETCH_OWN)
            if not own or os.path.islink(os.path.join(root, f)):
                found.append(r)
    return sorted(found)


def fetched_state(folder: Path) -> str:
    """'missing', 'present', or 'damaged: what to do (what differs)' -- what ``data list`` shows and ``data get``
    refuses (files unchanged in size and time since the last check are not hashed again)."""
    if not (folder / "SOURCE.md").is_file():
        return "missing"
    problem = _problem(folder)
    return f"damaged: {problem[1]} ({problem[0]})" if problem else "present"


def _problem(folder: Path) -> tuple[str, str] | None:
    """None for a whole fetched folder, else (what differs, what to do)."""
    extra = not_fetched(folder)
    if extra is None:
        return (folder_problem(folder) or "SOURCE.md lists no files",
                "its files cannot be told from yours: move the folder away and fetch again")
    if extra:
        return (f"files not fetched: {first_few(extra)}",
                f"move them out of {folder} (--force replaces only what was fetched)")
    problem = folder_problem(folder)
    return (problem, "use --force") if problem else None


def check_fetched(name: str, folder: Path) -> None:
    """A fetched data set is as its SOURCE.md records it, else one DownloadError line: what differs, what to do."""
    problem = _problem(folder)
    if problem is not None:
        todo = (f"use --force to fetch it again (elmo-tasks data get {name} --force)" if problem[1] == "use --force"
                else problem[1])
        raise DownloadError(f"{name} in {folder} is damaged ({problem[0]}): {todo}")


def already_fetched(name: str, final: Path, force: bool) -> bool:
    """True (and said) when ``final`` holds the fetched data set and ``force`` is off; a damaged one is refused."""
    if force or not (final / "SOURCE.md").is_file():
        return False
    check_fetched(name, final)
    print(f"{name}: already present in {final} (use --force to fetch again)")
    return True


def claim(name: str, final: Path, given: str | Path | None = None, given_flag: str = "--from") -> tuple | None:
    """Check that ``data get NAME`` may replace ``final`` and return its state for ``put_in_place``: absent, or a
    folder a fetch made that holds nothing else, and not holding the input ``given``. Else one PathError line."""
    if given is not None and (final.exists() or final.is_symlink()):
        real, inp = os.path.realpath(final), os.path.realpath(Path(given).expanduser())
        if inp == real or inp.startswith(real.rstrip(os.sep) + os.sep):
            raise PathError(f"{given_flag} {given}: it lies inside {final}, which `data get {name}` replaces; move "
                            "it out of that folder and give its new path")
    check_replaceable(final, "data get", "fetch into another folder with --data-dir")
    if (final / "SOURCE.md").is_file():
        extra = not_fetched(final)
        if extra is None:
            raise PathError(f"{final}: {folder_problem(final) or 'SOURCE.md lists no files'}, so `data get {name}` "
                            "cannot tell what it fetched from your own files; move the folder away and rerun")
        if extra:
            raise PathError(f"{final} holds {len(extra)} file(s) or folder(s) that `data get` did not fetch: "
                            f"{first_few(extra)}; --force replaces the whole folder, so move them out of it and rerun")
    return folder_state(final)


def folder_state(folder: Path) -> tuple | None:
    """What ``folder`` is now (None: absent): its identity and every entry under it with its size and time."""
    if not folder.exists() and not folder.is_symlink():
        return None
    st = folder.lstat()
    entries = []
    if folder.is_dir() and not folder.is_symlink():
        for root, dirs, files in os.walk(folder):
            for n in dirs + files:
                p = Path(root, n)
                s = p.lstat()
                entries.append((p.relative_to(folder).as_posix(), s.st_size, s.st_mtime_ns))
    return st.st_dev, st.st_ino, tuple(sorted(entries))


def put_in_place(new: Path, final: Path, previous: Path, verified: tuple | None) -> None:
    """Rename ``new`` to ``final``, replacing only the folder checked before the long work (``verified``, from
    ``claim``; moved to ``previous``, which the caller deletes): anything made or changed there since is kept,
    and the fetch is refused (PathError)."""
    changed = PathError(f"{final} was created or changed while `data get` ran; it is kept as it is. Move it away "
                        "and rerun, or fetch into another folder with --data-dir")
    if verified is None:
        if final.exists() or final.is_symlink():
            raise changed
        try:
            os.rename(new, final)  # (fails onto a folder filled in the meantime: nothing is replaced)
        except OSError:
            raise changed from None
        return
    try:
        os.rename(final, previous)  # moved aside, then compared with what was checked
    except OSError:
        raise changed from None
    if folder_state(previous) != verified:
        os.rename(previous, final)
        raise changed
    os.rename(new, final)

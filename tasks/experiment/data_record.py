"""A comparison's record of what its runs were trained on (``.data_sha256.json`` in its runs folder): the data
files' sha256 and the fold cut, checked when the comparison is resumed."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from elmo_features.formats.download import file_sha256
from elmo_features.util.errors import ConfigError, PathError
from elmo_features.util.provenance import write_text_atomic

from elmo_tasks.data.registry import reader_path_kind
from elmo_tasks.experiment.config import RunConfig

DATA_RECORD = ".data_sha256.json"  # in a comparison's runs folder: the data files its runs were trained on


def data_fingerprints(cfg: RunConfig) -> dict[str, dict]:
    """data.SPLIT -> {path, sha256 of the file's bytes (a folder: of its files' names and bytes)}; hub data sets are
    not fingerprinted."""
    out = {}
    for split in ("train", "dev", "test"):
        path = getattr(cfg.data, split)
        if path is None or reader_path_kind(cfg.data.reader) not in ("file", "folder"):
            continue
        p = Path(path).expanduser()
        files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
        digest = hashlib.sha256()
        for f in files:
            digest.update(f"{f.relative_to(p) if p.is_dir() else ''}\0{file_sha256(f)}\0".encode())
        out[f"data.{split}"] = {"path": str(path), "sha256": digest.hexdigest()}
    return out


def check_data_unchanged(cfg: RunConfig, grid_dir: Path, folds: int | None, resuming: bool,
                         reusing: bool = True) -> None:
    """Record the data files' fingerprints and the fold cut (folds, fold_seed) in ``grid_dir`` (new comparison), or
    refuse to resume one whose data files or cut changed since (ConfigError naming it): old and new runs would mix
    two data sets. A resumed folder without a readable record is warned about, and recorded now. A resumed folder
    that holds no finished run (``reusing`` False) mixes nothing: the record is written anew."""
    if resuming and not reusing and (grid_dir / DATA_RECORD).is_file() and not (grid_dir / DATA_RECORD).is_symlink():
        (grid_dir / DATA_RECORD).unlink()  # (nothing has finished, so nothing can mix)
        resuming = False
    now, record = data_fingerprints(cfg), grid_dir / DATA_RECORD
    if record.is_symlink() or (record.exists() and not record.is_file()):  # written in place: never through a link
        raise PathError(f"{record}: is a {'link' if record.is_symlink() else 'folder'}, not the comparison's own "
                        "record of its data files; remove it (a resume then refuses to reuse fold runs)")
    now["folds"] = {"folds": folds, "fold_seed": cfg.compare.fold_seed if folds else None}
    try:
        saved = json.loads(record.read_text(encoding="utf-8")) if record.is_file() else None
    except (OSError, ValueError):
        saved = None
    if isinstance(saved, dict) and all(_digest_entry(saved.get(k)) for k in now if k != "folds"):
        changed = [k for k in now if k != "folds" and saved[k]["sha256"] != now[k]["sha256"]]
        if changed:
            raise ConfigError(f"--resume {grid_dir}: {changed[0]} {now[changed[0]]['path']} changed since its finished "
                              "runs were trained (sha256 differs); their results would mix two data sets: drop "
                              "--resume to run the comparison again")
        if not _cut_entry(saved.get("folds")):  # recorded before the cut was (or damaged): tell it from the runs
            _check_unrecorded_cut(grid_dir, now["folds"])
            write_text_atomic(record, json.dumps(saved | {"folds": now["folds"]}, indent=1) + "\n")
        elif saved["folds"] != now["folds"]:
            cut = lambda d: (f"{d['folds']} folds (fold_seed {d['fold_seed']})" if d["folds"] else "the fixed split")
            raise ConfigError(f"--resume {grid_dir}: its runs were made on {cut(saved['folds'])}, this command asks "
                              f"for {cut(now['folds'])}; their folds would not match: resume with the same --folds "
                              "and compare.fold_seed, or drop --resume")
        return
    if resuming and any(grid_dir.iterdir()):
        _check_unrecorded_cut(grid_dir, now["folds"])  # fold runs of an unknown cut are never reused
        print(f"warning: --resume {grid_dir}: its record of the data files ({DATA_RECORD}) is missing or damaged, so "
              "the finished runs' data cannot be checked; recording the current files now", file=sys.stderr)
    grid_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(record, json.dumps(now, indent=1) + "\n")


def _digest_entry(entry) -> bool:
    """A record's entry for one data file as written: {path, sha256}."""
    return isinstance(entry, dict) and isinstance(entry.get("sha256"), str) and isinstance(entry.get("path"), str)


def _cut_entry(entry) -> bool:
    """A record's fold cut as written: {"folds": None, "fold_seed": None} (the fixed split) or {"folds": k >= 2,
    "fold_seed": an int}."""
    if not isinstance(entry, dict) or set(entry) != {"folds", "fold_seed"}:
        return False
    k, seed = entry["folds"], entry["fold_seed"]
    is_int = lambda x: isinstance(x, int) and not isinstance(x, bool)
    return (k is None and seed is None) or (is_int(k) and k >= 2 and is_int(seed))


def _check_unrecorded_cut(grid_dir: Path, now: dict) -> None:
    """A comparison whose record holds no usable fold cut (lost, damaged or an older version's): its fixed-split runs
    resume on the fixed split; fold runs cannot be vouched for (neither their number of folds nor their fold_seed is
    in them), so a resume that would reuse them is refused."""
    fold_runs = sorted(grid_dir.glob("*/fold*/metrics.json"))
    fixed_runs = sorted(grid_dir.glob("*/metrics.json"))
    asked = f"{now['folds']} folds" if now["folds"] else "the fixed split"
    if fold_runs:
        raise ConfigError(f"--resume {grid_dir}: its record ({DATA_RECORD}) is missing, damaged or from an older "
                          "version: it does not say which fold cut its fold runs were made on, so they cannot be "
                          f"reused for {asked}: drop --resume to run the comparison again")
    if now["folds"] and fixed_runs:
        raise ConfigError(f"--resume {grid_dir}: its runs were made on the fixed split, this command asks for {asked}; "
                          "their folds would not match: resume without --folds, or drop --resume")

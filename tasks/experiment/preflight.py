"""Checks run before any work: every data file, vector file and frozen model a config names, and the output folders.

``run``, ``compare``, ``predict`` and ``wsd`` call these first, so that a missing GloVe folder or an
unwritable results folder is reported at once, not after minutes of training. What a features section reads
is declared by its source class (``FeatureSource.input_paths`` / ``check_inputs``), and whether a data path is
a file, a folder or a hub name by its reader (``path_kind``): a component registered from a user's package is
checked the same way as the built-in ones.
"""
from __future__ import annotations

import filecmp
import hashlib
import json
import re
import shlex
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

import torch

from elmo_features.encoders.packaged import packaged_names
from elmo_features.util.paths import (CACHE_DIR_FORBIDDEN, INPUT_FOLDERS, RUN_FOLDER_FILES, RUN_MODEL_FILES,
                                      beside_config_hint, check_input_dir, check_input_file, check_input_path,
                                      check_output_dir, folder_kind)
from elmo_features.util.errors import CheckpointError, ConfigError, MissingPathError, OutputExistsError, PathError
from elmo_features.util.locking import OutputLock, lock_holder
from elmo_features.util.once import first_time

from elmo_tasks.experiment.config import RunConfig, check_reader_fits_head
from elmo_tasks.experiment.records import read_metrics
from elmo_tasks.data.fetch import fetch_hint
from elmo_tasks.data.registry import reader_path_kind
from elmo_tasks.features.base import check_section_inputs, section_input_paths, section_storage_keys
from elmo_tasks.plugins import changed_plugin, plugin_digests

CHECKPOINT_FORMAT = 1  # of a run's model.pt


def check_feature_paths(section: Any, where: str, config_file: str | None = None) -> None:
    """Every input file/folder and frozen model a resolved features section names exists (a relative one missing
    here that exists next to ``config_file`` is said so: ``beside_config_hint``)."""
    if isinstance(section, dict) and "name" in section:
        try:
            check_section_inputs(section, where)
        except MissingPathError as e:
            named = feature_input_paths(section) + [v for k in section_storage_keys(section)
                                                    if isinstance(v := section.get(k), str)]  # (a model: folder)
            hints = [h for p in named if p in str(e) and (h := beside_config_hint(p, config_file))]
            if hints:
                raise MissingPathError(f"{e}; {hints[0]}") from None
            raise
        for key in section_storage_keys(section):  # a bare name that passed as a hub id, and is a folder beside the
            value = section.get(key)  # config: the user meant that folder
            hint = beside_config_hint(value, config_file) if isinstance(value, str) else ""
            if hint and value not in packaged_names():
                raise MissingPathError(f"{where}.{key}: {value} is not a folder here (it would be looked up as a "
                                       f"Hugging Face hub id); {hint}")


def feature_input_paths(section: Any) -> list[str]:
    """The file/folder paths a resolved features section names ([] for a section this version cannot read)."""
    if not isinstance(section, dict) or "name" not in section:
        return []
    try:
        return [p.path for p in section_input_paths(section)]
    except (ConfigError, KeyError, TypeError):  # a section this version cannot read: nothing to say about it
        return []


def relative_paths(section: Any) -> list[str]:
    """The relative file/folder paths a resolved features section names (resolved against the current folder)."""
    return [p for p in feature_input_paths(section) if not Path(p).expanduser().is_absolute()]


def check_given_once(values: Iterable[Any], where: str, what: str, key=lambda v: v) -> None:
    """No value of a list given twice (``key``: what makes two the same, e.g. a resolved path): ConfigError naming
    it, before any work (the second copy would be refused or counted twice only after the first ran)."""
    seen: dict = {}
    for v in values:
        k = key(v)
        if k in seen:
            same = f" (the same as {seen[k]})" if str(seen[k]) != str(v) else ""
            raise ConfigError(f"{where}: {what} {v} is given twice{same}; each runs once: drop the repeat")
        seen[k] = v


def check_data_path(reader: str, path: str, where: str, config_file: str | None = None) -> None:
    """A data file (or folder, for folder readers) named in a config exists; a hub name is not checked."""
    if path == "-":
        raise ConfigError(f"{where}: '-' (standard input) cannot be a data split, which is read more than once; give "
                          "a file")
    kind = reader_path_kind(reader)
    hint = fetch_hint(path) or beside_config_hint(path, config_file)
    if kind == "folder":
        check_input_dir(path, where, hint=hint)
    elif kind == "file":
        check_input_file(path, where, hint, regular=True)


SHARED_FILE_NOTES = {  # (split, later split naming the same file) -> what it means for the scores
    ("train", "test"): "test scores measure fit to the training data, not generalisation",
    ("dev", "test"): "early stopping and the best epoch are chosen on the test set, so test scores are optimistic",
}


def same_content(a: str | Path, b: str | Path) -> bool:
    """Two regular files with the same bytes (a copy); folders and hub names are not compared."""
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    try:
        return pa.is_file() and pb.is_file() and filecmp.cmp(pa, pb, shallow=False)
    except OSError:
        return False


def warn_shared_files(cfg: RunConfig, data: dict[str, list] | None = None) -> None:
    """One warning line when data.test is data.train's file, or data.dev is data.test's, or a byte copy of it, or
    (``data``: split -> examples) every test example's tokens occur in the training examples (e.g. reordered).
    Said once per command (every run of a comparison checks it)."""
    pairs = cfg.data.same_files()
    for (a, b), meaning in SHARED_FILE_NOTES.items():
        pa, pb = getattr(cfg.data, a), getattr(cfg.data, b)
        if (a, b) in pairs:
            _say_once(f"warning: data.{a} and data.{b} are the same file ({pb}): {meaning}")
            return
        if pa is not None and pb is not None and same_content(pa, pb):
            _say_once(f"warning: data.{b} {pb} has the same content as data.{a} {pa}: {meaning}")
            return
    train, test = (data or {}).get("train"), (data or {}).get("test")
    if train and test:
        seen = {json.dumps(ex.tokens, default=str) for ex in train}
        if all(json.dumps(ex.tokens, default=str) in seen for ex in test):
            _say_once(f"warning: data.test {cfg.data.test}: all {len(test)} of its examples also occur in data.train "
                      f"{cfg.data.train} (the same sentences, e.g. in another order): "
                      f"{SHARED_FILE_NOTES[('train', 'test')]}")


def _say_once(message: str) -> None:
    if first_time(("preflight", message)):
        print(message, file=sys.stderr, flush=True)


NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def check_config_name(name: str, source: str) -> None:
    """A config name is one plain folder name (runs/NAME, results/NAME): letters, digits and ``._-``, no path."""
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(f"{source}: name {name!r} is not a plain name (it names the folders runs/NAME and "
                          "results/NAME); use letters, digits and . _ - only, e.g. my_ner; choose where outputs go "
                          "with --out / --runs-dir / --results-dir")


def check_run_inputs(cfg: RunConfig, source: str, splits: Iterable[str] = ("train", "dev", "test"),
                     features: dict[str, Any] | None = None) -> None:
    """The config's name (a folder name), the data files of ``splits`` and every path of the features sections
    (name -> section; default: ``{"features": cfg.features}``)."""
    check_config_name(cfg.name, source)
    check_reader_fits_head(cfg.data.reader, cfg.head["name"], source)  # the reader is used: its examples fit?
    for split in splits:
        path = getattr(cfg.data, split)
        if path is not None:
            check_data_path(cfg.data.reader, path, f"{source}: data.{split}", source)
    wordnet = cfg.data.reader_options.get("wordnet")
    if isinstance(wordnet, str):
        check_input_path(wordnet, f"{source}: data.reader_options.wordnet",
                         fetch_hint(wordnet) or beside_config_hint(wordnet, source))
    for name, section in (features if features is not None else {"features": cfg.features}).items():
        check_feature_paths(section, f"{source}: {name}", source)
    warn_training(cfg, source)


def warn_training(cfg: RunConfig, source: str) -> None:
    """One warning line for valid training settings that cannot take effect: a learning-rate reduction that needs
    more epochs without improvement than early stopping allows (it stops after patience + 1 of them)."""
    t = cfg.training
    if t.lr_reduce_factor < 1 and t.lr_reduce_patience > t.patience:
        print(f"warning: {source}: training.lr_reduce_patience {t.lr_reduce_patience} > patience {t.patience}: early "
              f"stopping ends the run after {t.patience + 1} epochs without improvement, before any learning-rate "
              "reduction (lr_reduce_factor does nothing); lower lr_reduce_patience or raise patience", file=sys.stderr)


# the config keys that decide what a trained model means: the reader and its options (the gold label set, e.g. the
# tag scheme), the features section and the head; not the data paths, the training loop or a frozen input's path
# (its content is fingerprinted: elmo_tasks.experiment.run.frozen_change)
PATH_KEYS = frozenset({"path", "words_path", "options_file", "weights_file", "bilm", "model"})


def _without_paths(node: Any) -> Any:
    if isinstance(node, dict):
        return {str(k): _without_paths(v) for k, v in node.items() if not (k in PATH_KEYS and isinstance(v, str))}
    if isinstance(node, (list, tuple)):
        return [_without_paths(v) for v in node]
    return node


def config_digests(config: dict) -> dict[str, str]:
    """sha256 per part of a run config (as config.yaml holds it) that decides the trained model (model.pt records
    them): ``reader`` (data.reader and reader_options), ``features`` (paths left out) and ``head``."""
    data = config.get("data") if isinstance(config.get("data"), dict) else {}
    parts = {"reader": {"reader": data.get("reader"), "reader_options": data.get("reader_options") or {}},
             "features": _without_paths(config.get("features")), "head": config.get("head")}
    return {k: hashlib.sha256(json.dumps(v, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
            .hexdigest() for k, v in parts.items()}


PART_KEYS = {"reader": "data.reader / data.reader_options", "features": "features", "head": "head"}


def check_config_digest(run_dir: Path, raw: dict, ckpt: dict) -> None:
    """config.yaml still says what model.pt was trained with (its recorded digests; runs saved before them:
    unchecked): CheckpointError naming the edited part."""
    recorded = ckpt.get("config_sha256")
    if not isinstance(recorded, dict):
        return
    now = config_digests(raw if isinstance(raw, dict) else {})
    changed = [PART_KEYS[k] for k in PART_KEYS if k in recorded and recorded[k] != now[k]]
    if changed:
        raise CheckpointError(f"{run_dir / 'config.yaml'} and {run_dir / 'model.pt'} disagree on "
                              f"{', '.join(changed)} (config.yaml edited after training, e.g. the tag scheme, or "
                              "model.pt copied from another run): restore the run's own files, or rerun the run with "
                              "the new settings")


def check_plugin_versions(run_dir: Path, config: dict) -> None:
    """The plugin modules a run was trained with (metrics.json's ``plugin_modules`` sha256s) have the same source
    now: else one ConfigError naming the module (the plugin's code is part of the model)."""
    path = run_dir / "metrics.json"
    saved = read_metrics(path).get("plugin_modules") if path.is_file() else None
    changed = changed_plugin(saved, plugin_digests(config))
    if changed:
        raise ConfigError(f"{run_dir} was trained with {changed}; its predictions would differ from the run's: "
                          "restore the module as it was (and --include it), or rerun the run with the new code")


RESULTS_LOCK = ".writer.lock"  # inside a results folder while a command writes it


def claim_results_folder(folder: str | Path, marker: str, name: str, flag: str) -> OutputLock:
    """Take ``folder`` for this process: its lock (a second writer is refused with LockError) and a check that it is
    absent, empty, or a folder this command made for the same config (its ``marker`` JSON file, e.g. summary.json,
    names ``name``: rewriting it is how results are refreshed); anything else is one OutputExistsError line.
    Returns the held lock: release it when the results are written."""
    folder = Path(folder)
    lock = OutputLock(folder / RESULTS_LOCK, f"the results folder {folder}").acquire()
    try:
        entries = [p for p in folder.iterdir() if not p.name.startswith(".")]  # (the lock, a command's partial files)
        if entries:
            try:
                made = json.loads((folder / marker).read_text(encoding="utf-8")).get("name")
            except (OSError, ValueError, AttributeError):
                made = None
            if made is None:
                raise OutputExistsError(f"{flag} {folder}: the folder is not empty and holds no {marker} of this "
                                        "command; its files would mix with these results: choose a new folder or "
                                        "empty it")
            if made != name:
                raise OutputExistsError(f"{flag} {folder}: holds the results of another config ({made!r}, this one "
                                        f"is {name!r}); choose another folder")
    except BaseException:
        lock.release()
        raise
    return lock


def check_no_finished_runs(folder: str | Path, flag: str) -> None:
    """A folder of run folders that this command would train into holds no finished run (metrics.json): one
    would be overwritten. OutputExistsError naming it."""
    folder = Path(folder)
    done = sorted(p.parent.name for p in folder.glob("*/metrics.json")) if folder.is_dir() else []
    if done:
        raise OutputExistsError(f"{flag} {folder}: holds finished runs ({', '.join(done[:3])}) that this command would "
                                "replace; give another folder, or delete them")


def check_output_dirs(*, flags: dict[str, str] | None = None, **dirs: str | Path | None) -> None:
    """Each named output folder (``--name=path``) exists writable or can be created; None = not used. ``flags``:
    how the user gave a folder, where that is not ``--name`` (``$ELMO_TASKS_FEATURE_CACHE``)."""
    for name, path in dirs.items():
        if path is not None:
            flag = (flags or {}).get(name) or f"--{name.replace('_', '-')}"
            check_output_dir(path, flag)
            if name == "runs_dir":  # new run folders are made inside it: never inside one run's folder, nor among
                check_not_a_run_folder(path, flag, results=INPUT_FOLDERS)  # the files of a model or data set
            if name == "cache_dir":  # cache files are written into it: never into a run's or a table's folder
                check_not_a_run_folder(path, flag, "the cache files", CACHE_DIR_FORBIDDEN)


def check_not_a_run_folder(folder: str | Path, flag: str, what: str = "the new runs",
                           results: tuple[str, ...] = ()) -> None:
    """``folder``, where this command writes ``what``, is not itself a run folder (of ``run --out``: its .unfinished
    marker, or two of its files), nor a results folder holding one of ``results``: PathError naming the files."""
    folder = Path(folder)
    found = [n for n in (UNFINISHED, *RUN_FOLDER_FILES) if (folder / n).exists()]
    if UNFINISHED in found or len(found) >= 2:
        raise PathError(f"{flag} {folder}: is a run folder ({', '.join(found)}); {what} would be written into "
                        "another run's folder: give another folder")
    found = folder_kind(folder, results)
    if found:
        raise PathError(f"{flag} {folder}: holds {found[0]}, so it is {found[1]}; {what} would be written among its "
                        "files: give another folder")


def check_run_folder(run_dir: str | Path) -> Path:
    """A finished run folder for ``predict``: its files exist, vocab.json is a JSON object and model.pt is a
    checkpoint of this project (loaded with ``weights_only=True``); metrics.json (written last) exists."""
    hint = "give a run folder (elmo-tasks run prints the folder it writes)"
    holder = lock_holder(Path(run_dir).expanduser() / "run.lock")
    if holder is not None:  # (its files appear as it trains: model.pt, then metrics.json last)
        raise CheckpointError(f"run folder: {run_dir} is a run still in progress ({holder} is writing it); wait "
                              "until it has finished (it prints its metrics), then predict")
    run_dir = check_input_dir(run_dir, "run folder", needs=RUN_MODEL_FILES, hint=hint)
    if not (run_dir / "metrics.json").exists():
        raise CheckpointError(f"{run_dir}: the run never finished (no metrics.json: it was interrupted, killed or "
                              f"failed); train it again with `elmo-tasks run CONFIG --out {shlex.quote(str(run_dir))}` "
                              "and the config it ran with (it clears the unfinished folder), or use another run folder")
    try:
        vocab = json.loads((run_dir / "vocab.json").read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{run_dir / 'vocab.json'}: damaged ({e}); rerun the run") from None
    if not isinstance(vocab, dict):
        raise CheckpointError(f"{run_dir / 'vocab.json'}: expected a JSON object, got {type(vocab).__name__}")
    ckpt_path = run_dir / "model.pt"
    try:
        ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated zip, a pickle with foreign objects, not a torch file at all, ...
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"{ckpt_path}: not a readable checkpoint of this project ({msg[:200]}); "
                              "the file is truncated or foreign: rerun the run") from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        found = ckpt.get("format") if isinstance(ckpt, dict) else type(ckpt).__name__
        raise CheckpointError(f"{ckpt_path}: not a run checkpoint of this project (format {found!r}, expected "
                              f"{CHECKPOINT_FORMAT})")
    sd = ckpt.get("state_dict")
    if not isinstance(sd, dict) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
        raise CheckpointError(f"{ckpt_path}: has no state_dict of tensors; the file is damaged: rerun the run")
    bad = [k for k, v in sd.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:
        raise CheckpointError(f"{ckpt_path}: parameter(s) {', '.join(bad[:3])} hold NaN or Inf values; the "
                              "training diverged or the file is damaged")
    return run_dir


# ---------------------------------------------------------------- run folders

UNFINISHED = ".unfinished"  # in a run folder from a run's start until its metrics.json is written


def new_run_dir(cfg: RunConfig, runs_dir: str | Path = "runs") -> Path:
    """A new, empty default run folder RUNS_DIR/NAME/TIMESTAMP-HASH[-N], made now: two runs of one config started in
    the same second get one each (as ``compare``'s compare-STAMP-N)."""
    digest = hashlib.sha256(json.dumps(cfg.to_dict(), sort_keys=True).encode()).hexdigest()[:8]
    base = Path(runs_dir) / cfg.name / f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{digest}"
    base.parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10000):
        path = base.with_name(base.name + (f"-{n}" if n > 1 else ""))
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise PathError(f"--runs-dir {runs_dir}: 9999 run folders of {cfg.name} named {base.name}[-N] exist; "
                    "give another --runs-dir")


def _own_leftover(name: str) -> bool:
    """A file a run writes (``RUN_FOLDER_FILES``), its marker or lock, or the temporary file of one that a killed run
    left (``.model.pt.XXXX.tmp``, ``elmo_features.util.provenance.atomic_path``)."""
    return name in (*RUN_FOLDER_FILES, UNFINISHED, "run.lock") or (
        name.startswith(".") and name.endswith(".tmp") and any(name.startswith(f".{f}.") for f in RUN_FOLDER_FILES))


def is_unfinished_run(folder: str | Path) -> bool:
    """``folder`` is a run folder that a run marked as its own (``UNFINISHED``) and never finished (no metrics.json):
    ``run --out`` into it trains again (``clear_unfinished_run`` says what it removes)."""
    folder = Path(folder)
    return (folder / UNFINISHED).is_file() and not (folder / "metrics.json").exists()


def clear_unfinished_run(out_dir: Path) -> None:
    """Remove the files an earlier, unfinished run left in ``out_dir`` (a comparison re-running an interrupted
    cell, ``run --out`` after a killed run), saying so: a run folder never mixes two runs' files. Only a folder
    that a run marked as its own (``UNFINISHED``) and that holds nothing else is cleared; any other non-empty
    folder is refused (PathError), as ``run --out`` does; a finished run (metrics.json) is never deleted."""
    if (out_dir / "metrics.json").exists():  # never delete a finished run (metrics.json is written last)
        raise OutputExistsError(f"{out_dir}: holds a finished run (metrics.json); give another folder, or delete it")
    names = [p.name for p in out_dir.iterdir()] if out_dir.is_dir() else []
    others = [n for n in names if n not in (UNFINISHED, "run.lock")]
    foreign = [n for n in names if not _own_leftover(n)]
    if foreign or (others and not (out_dir / UNFINISHED).exists()):
        raise PathError(f"{out_dir}: the folder is not empty ({', '.join(sorted(foreign or others)[:3])}; a run "
                        "folder holds one run, and its files would mix with this one's); choose a new folder or "
                        "remove it")
    stale = [out_dir / n for n in others]
    if stale:
        print(f"{out_dir}: removing an earlier unfinished run's {', '.join(p.name for p in stale)} before this run",
              file=sys.stderr)
        for p in stale:
            p.unlink()
    (out_dir / UNFINISHED).touch()

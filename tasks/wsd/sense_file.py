"""Sense files (written by ``elmo-tasks wsd senses``, read by ``wsd tag`` and ``SenseTagger``): their path, format,
checksums and shapes checked, their meta read, the WordNet they are read with.

The file is HDF5: ``keys`` (every WordNet sense key), ``context`` and ``gloss`` (S, D) float32, ``step`` (S,) int8
(where each context vector came from: ``senses.STEPS``), ``counts`` (S,) (SemCor instances), and a ``meta`` JSON
attribute: the feature source's section and frozen-model fingerprints, the layer weights, the gloss pooling and w
per part of speech with what the held-out sentences measured, WordNet's folder and fingerprint, the training set,
the command and commit. A tagger refuses a file made with another source or another WordNet, naming both
fingerprints.
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
from collections import Counter
from pathlib import Path

import h5py
import numpy as np

from elmo_features.util.errors import ElmoTasksError, PathError, StaleCacheError, UsageError
from elmo_features.util.paths import check_input_file
from elmo_features.util.wording import counted

from elmo_tasks.wsd.config import WsdConfig
from elmo_tasks.wsd.data.inventory import InventoryError

FORMAT = "elmo-tasks-senses-1"


def check_sense_path(path, what: str = "sense file") -> Path:
    """A sense file's path: not empty, found and not a folder (one clear error naming ``what``)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what} must be a str or a path, got {type(path).__name__}: {path!r}")
    if not str(path).strip():
        raise PathError(f"{what}: {str(path)!r} is empty (an unset variable?); give the senses .h5 file written by "
                        "elmo-tasks wsd senses")
    p = Path(path).expanduser()
    if p.is_dir():
        raise PathError(f"{what}: {p} is a folder; give the senses .h5 file (written by elmo-tasks wsd senses)")
    return check_input_file(p, what, f"make it with `elmo-tasks wsd senses --source minilm --out {shlex.quote(str(p))}`", regular=True)  # a pipe would block


SENSE_ARRAYS = ("context", "gloss", "step", "counts")  # a sense file's arrays, one row per sense key


def sense_digest(keys: list[str], *arrays: np.ndarray) -> str:
    """sha256 of a sense file's keys and arrays (``SENSE_ARRAYS``, as stored): an edit of any, even a reordering of
    the keys alone, changes it."""
    h = hashlib.sha256("\n".join(keys).encode("utf-8"))
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"|{a.dtype.str}|{a.shape}|".encode() + a.tobytes())
    return h.hexdigest()


def non_finite_senses(context: np.ndarray, gloss: np.ndarray | None) -> tuple[int, int, int]:
    """How many senses hold a NaN or an infinity: (in either vector, in ``context`` (S, D), in ``gloss`` (S, D))."""
    c = ~np.isfinite(context).all(axis=1)  # (S,)
    g = ~np.isfinite(gloss).all(axis=1) if gloss is not None else np.zeros_like(c)  # (S,)
    return int((c | g).sum()), int(c.sum()), int(g.sum())


def open_sense_file(path: str | Path, what: str = "sense file") -> h5py.File:
    """The sense file open for reading; a missing path, a folder or a file that is not HDF5 is one error naming it."""
    check_sense_path(path, what)
    try:
        return h5py.File(path, "r")
    except OSError as e:
        raise StaleCacheError(f"{path}: not a sense file (not HDF5: {' '.join(str(e).split())[:120]}); give a file "
                              "written by elmo-tasks wsd senses, or make one with "
                              "`elmo-tasks wsd senses --source SOURCE --out FILE`") from None


def check_shapes(path, keys: list[str], context: np.ndarray, gloss: np.ndarray, has: np.ndarray,
                  counts: np.ndarray) -> None:
    """The datasets of a sense file agree: ``n`` distinct keys, context and gloss (n, D) alike, step and counts (n,)."""
    fix = "the file is damaged: make it again with `elmo-tasks wsd senses --source SOURCE --out FILE`"
    n = len(keys)
    if len(set(keys)) != n:
        twice = next(k for k, c in Counter(keys).items() if c > 1)
        raise StaleCacheError(f"{path}: dataset keys lists {twice} more than once; " + fix)
    for name, a in (("step", has), ("counts", counts)):
        if a.shape != (n,):
            raise StaleCacheError(f"{path}: dataset {name} has shape {a.shape}, expected ({n},) (one per sense key); "
                                  + fix)
    if context.ndim != 2 or context.shape != gloss.shape or context.shape[0] != n or context.shape[1] < 1:
        raise StaleCacheError(f"{path}: datasets context and gloss have shapes {context.shape} and {gloss.shape}, "
                              f"expected both ({n}, D) (one vector per sense key); " + fix)


def _sense_meta(f: h5py.File, path: str | Path) -> dict:
    try:
        meta = json.loads(f.attrs["meta"])
    except (KeyError, TypeError, ValueError):
        meta = {}
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        if found is None:  # (no sense file at all: an HDF5 file of another kind, e.g. embed's output)
            raise StaleCacheError(f"{path}: an HDF5 file, but not a sense file (it has no sense-file meta); give a "
                                  "file written by elmo-tasks wsd senses")
        raise StaleCacheError(f"{path}: not a sense file of this version (format {found!r}); make it again with "
                              "`elmo-tasks wsd senses --source SOURCE --out FILE`")
    return meta


def read_sense_file(path) -> tuple[dict, list[str], dict, str | None, str | None, bool]:
    """A sense file's meta, keys, arrays, recorded checksums (arrays, meta) and whether its meta was edited; a file
    h5py cannot read (damaged) is one StaleCacheError naming it."""
    try:
        with open_sense_file(path, "SenseTagger: path") as f:
            meta = _sense_meta(f, path)
            missing = [n for n in ("keys", *SENSE_ARRAYS) if not isinstance(f.get(n), h5py.Dataset)]
            if missing:
                raise StaleCacheError(f"{path}: dataset {missing[0]} is missing; the file is damaged: make it "
                                      "again with `elmo-tasks wsd senses --source SOURCE --out FILE`")
            keys = [k.decode() if isinstance(k, bytes) else k for k in f["keys"][()]]
            raw = {n: f[n][()] for n in SENSE_ARRAYS}
            recorded = f.attrs.get("sha256")  # (files written before it was recorded have none)
            meta_recorded = f.attrs.get("meta_sha256")  # (nor this)
            meta_edited = meta_recorded is not None and meta_recorded != hashlib.sha256(
                str(f.attrs["meta"]).encode("utf-8")).hexdigest()
    except (OSError, RuntimeError, KeyError) as e:  # h5py: a damaged file (a bad heap, a checksum)
        if isinstance(e, ElmoTasksError):
            raise
        raise StaleCacheError(f"{path}: unreadable sense file ({' '.join(str(e).split())[:160]}); the file is "
                              "damaged: make it again with `elmo-tasks wsd senses --source SOURCE --out FILE`") from None
    return meta, keys, raw, recorded, meta_recorded, meta_edited


def is_sense_file(path: str | Path) -> bool:
    """An HDF5 file written by ``wsd senses`` (its ``keys`` and ``meta``): what ``wsd senses --out`` may replace."""
    try:
        with h5py.File(path, "r") as f:
            return "keys" in f and "meta" in f.attrs
    except OSError:
        return False


def sense_file_summary(path: str | Path) -> str:
    """What a sense file holds, for a message: "22 senses of 8 lemmas, source elmo" (its keys and meta read; what
    cannot be read is left out)."""
    with h5py.File(path, "r") as f:
        keys = [k.decode() if isinstance(k, bytes) else str(k) for k in f["keys"][()]]
        try:
            source = json.loads(f.attrs["meta"]).get("source")
        except (KeyError, TypeError, ValueError, AttributeError):
            source = None
    lemmas = {k.partition("%")[0] for k in keys}
    return (f"{counted(len(keys), 'sense')} of {counted(len(lemmas), 'lemma')}" +
            (f", source {source}" if isinstance(source, str) and source else ""))


def read_sense_meta(path: str | Path) -> dict:
    """The ``meta`` of a sense file (checked: HDF5, this version's format)."""
    with open_sense_file(path) as f:
        return _sense_meta(f, path)


def prior_weight(meta: dict, path: str | Path, flag: str = "--prior") -> float:
    """The first-sense prior weight the file chose; UsageError when it holds none (``flag``, how the prior was asked
    for, would change nothing)."""
    weight = float(meta.get("prior") or 0.0)
    if weight == 0.0:
        why = ("weight 0 was best on its held-out SemCor sentences" if "prior" in (meta.get("held_out") or {}) else
               "none was tuned when it was made")
        raise UsageError(f"{flag}: {path} holds no first-sense prior ({why}), so {flag} would change nothing; "
                         f"drop {flag}")
    return weight


def wordnet_folder(path, meta: dict, wordnet) -> Path:
    """The WordNet a sense file is read with: ``wordnet`` when given, else the folder the file names, else the
    default (``$ELMO_TASKS_WORDNET``, data/wordnet-3.0); none found: one error saying how to get it."""
    if wordnet:
        return Path(wordnet).expanduser()
    recorded, default = Path(str(meta.get("wordnet") or "")), Path(WsdConfig().wordnet).expanduser()
    for folder in (recorded, default):
        if str(folder) not in ("", ".") and folder.exists():
            return folder
    raise InventoryError(f"{path}: no WordNet 3.0 at {recorded} (where the sense file was made) nor at {default}; run "
                         "`elmo-tasks data get wordnet-3.0`, or give the WordNet folder (--wordnet DIR)")


def check_recipe(path, meta: dict, source) -> None:
    """A sense file's query recipe fits its source: one finite layer weight per layer the source gives (one word is
    embedded to count them), not all zero; gloss weights and prior finite and >= 0 (files from before the meta
    checksum)."""
    L = source.word_layers([["the"]], "check")[0].shape[0]
    layers = meta.get("layers")
    fix = "the file is damaged or edited: make it again with `elmo-tasks wsd senses --source SOURCE --out FILE`"
    number = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and bool(np.isfinite(x))
    if not isinstance(layers, list) or len(layers) != L or not all(map(number, layers)) or not any(layers):
        raise StaleCacheError(f"{path}: meta layers {layers!r} are not {L} finite weights, one per layer of its "
                              f"feature source, not all zero; " + fix)
    w, prior = meta.get("w") or {}, meta.get("prior") or 0.0
    if (not isinstance(w, dict) or not all(number(x) and x >= 0 for x in w.values())
            or not number(prior) or prior < 0):
        raise StaleCacheError(f"{path}: meta w {w!r} or prior {prior!r} is not finite numbers >= 0; " + fix)

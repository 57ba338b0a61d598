"""The project's own default biLM and one resolver for every way a config can name a biLM."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

from elmo_features.model.bilm import BiLM
from elmo_features.model.precision import check_float32
from elmo_features.formats import download
from elmo_features.util.errors import MissingPathError, UsageError
from elmo_features.util.wording import did_you_mean
from elmo_features.formats.presets import PRESETS
from elmo_features.formats.weights import load_bilm

DEFAULT_MODEL_DIR = Path(__file__).resolve().parents[1] / "models" / "default"  # elmo_features/models/default
OPTIONS_NAME = "options.json"
WEIGHTS_NAME = "weights.hdf5"
SPEC_KEYS = ("options", "weights")


def embedded_models() -> dict[str, Path]:
    """Name -> folder of every biLM shipped in the package (``default``, ``default_charonly``, ...)."""
    root = DEFAULT_MODEL_DIR.parent
    return {p.parent.name: p.parent for p in sorted(root.glob(f"*/{OPTIONS_NAME}"))}


def default_model_paths() -> tuple[Path, Path]:
    """(options.json, weights.hdf5) of the default model (they may not exist)."""
    return DEFAULT_MODEL_DIR / OPTIONS_NAME, DEFAULT_MODEL_DIR / WEIGHTS_NAME


def bilm_folder(spec: str, cache_dir: str | Path | None = None) -> Path:
    """The folder whose files ``resolve_bilm(spec)`` reads for a name or folder (nothing is loaded or downloaded)."""
    s = str(spec)
    if s == "default":
        return DEFAULT_MODEL_DIR
    embedded = embedded_models()
    if s in embedded and s not in PRESETS:
        return embedded[s]
    if s in PRESETS:
        cache = Path(cache_dir).expanduser() if cache_dir is not None else download.default_cache_dir()
        return cache / download.get_preset(s).stem
    return Path(s).expanduser()


def load_default_bilm(**kw: Any) -> BiLM:
    """load_bilm on the default model's files (kw: stateful, keep_sentence_boundaries)."""
    options, weights = default_model_paths()
    missing = [str(p) for p in (options, weights) if not p.exists()]
    if missing:
        raise MissingPathError(
            f"the default biLM is missing ({', '.join(missing)}). Train it (elmo-tasks train-bilm), or name "
            f"another biLM: a preset ({', '.join(PRESETS)}), a folder with {OPTIONS_NAME} + {WEIGHTS_NAME}, "
            f"or {{'options': ..., 'weights': ...}}"
        )
    return load_bilm(options, weights, **kw)


BILM_SPEC_FORMS = (f"\"default\", a preset ({', '.join(PRESETS)}), a folder with {OPTIONS_NAME} + {WEIGHTS_NAME}, or "
                   "{'options': path, 'weights': path}")


def empty_spec_problem(spec: Any, what: str, forms: str) -> str | None:
    """The one-line refusal of an empty or blank spec (an unset variable), which would read as the current folder;
    None for any other spec. The caller raises it as its own error: a command-line argument's, a config key's."""
    if isinstance(spec, (str, Path)) and not str(spec).strip():
        return f"{what} spec {str(spec)!r} is empty (an unset variable?); give {forms}"
    return None


URL = re.compile(r"(https?|s3|gs|ftp):/", re.IGNORECASE)  # (one slash: a URL that went through Path)


def check_one_model_argument(who: str, model: Any, second: Any) -> None:
    """AllenNLP's ``Elmo(options_file, weight_file, ...)`` form given to ``who``, which takes one model: a TypeError
    that shows the form to use (rather than one about the second parameter)."""
    if isinstance(second, (str, os.PathLike)) and str(second).lower().endswith((".hdf5", ".h5")):
        if URL.match(str(model)):
            raise TypeError(f"{who} takes one model, and reads no URL: for AllenNLP's published ELMo give a preset's "
                            f"name ({', '.join(PRESETS)}: downloaded once and cached), or download the two files and "
                            "give {'options': path, 'weights': path}")
        raise TypeError(f"{who} takes one model: its folder, a preset's name, or {{'options': {str(model)!r}, "
                        f"'weights': {str(second)!r}}} (not AllenNLP's Elmo(options_file, weight_file) form)")


def _refuse_url(*paths: Any) -> None:
    """A biLM file or folder given as a URL, as one UsageError: the runtime reads local files only."""
    for p in paths:
        if isinstance(p, (str, os.PathLike)) and URL.match(str(p)):
            raise UsageError(f"biLM {p}: no biLM is read from a URL; give a preset's name ({', '.join(PRESETS)}: "
                             "downloaded once and cached), or download the files and give their folder")


def resolve_bilm(spec: Any, cache_dir: str | Path | None = None, **kw: Any) -> BiLM:
    """A BiLM from a spec: "default" | another embedded model's name | a preset name | a folder holding options.json + weights.hdf5 |
    {"options": path, "weights": path} | a BiLM (returned as is). kw go to ``load_bilm``."""
    if isinstance(spec, BiLM):
        check_float32(spec, "the biLM")
        return spec
    if isinstance(spec, Mapping):
        unknown = sorted(set(spec) - set(SPEC_KEYS))
        absent = [k for k in SPEC_KEYS if k not in spec]
        if unknown or absent:
            raise UsageError(f"biLM spec with the keys {', '.join(map(str, spec)) or '(none)'}: needs exactly the keys "
                             f"{' and '.join(SPEC_KEYS)}" + (f"; unknown: {', '.join(map(str, unknown))}" if unknown else "")
                             + (f"; missing: {', '.join(absent)}" if absent else ""))
        _refuse_url(*(spec[k] for k in SPEC_KEYS))
        return load_bilm(spec["options"], spec["weights"], **kw)
    if isinstance(spec, (str, Path)):
        s = str(spec)
        if problem := empty_spec_problem(s, "biLM", BILM_SPEC_FORMS):
            raise UsageError(problem)
        if s == "default":
            return load_default_bilm(**kw)
        embedded = embedded_models()
        if s in embedded and s not in PRESETS:
            return load_bilm(embedded[s] / OPTIONS_NAME, embedded[s] / WEIGHTS_NAME, **kw)
        if s in PRESETS:
            options, weights = download.fetch_preset(s, cache_dir=cache_dir)  # module attribute: tests fake it
            return load_bilm(options, weights, **kw)
        _refuse_url(spec)
        folder = Path(s).expanduser()
        if folder.is_dir():
            if not (folder / OPTIONS_NAME).exists() or not (folder / WEIGHTS_NAME).exists():
                raise MissingPathError(f"biLM folder {folder} must hold {OPTIONS_NAME} and {WEIGHTS_NAME}")
            return load_bilm(folder / OPTIONS_NAME, folder / WEIGHTS_NAME, **kw)
        if folder.is_file():
            raise UsageError(f"biLM {folder}: is a file; give its folder {folder.parent} (with {OPTIONS_NAME} + "
                             f"{WEIGHTS_NAME}), or {{'options': path, 'weights': path}}")
        if "/" in s or "\\" in s:
            raise MissingPathError(f"biLM folder {folder} not found (a folder with {OPTIONS_NAME} + {WEIGHTS_NAME})")
    raise UsageError(
        f"unknown biLM spec {spec!r}{did_you_mean(spec, [*embedded_models(), *PRESETS])}; valid: an embedded model ({', '.join(embedded_models()) or 'none'}), a preset ({', '.join(PRESETS)}), a folder with "
        f"{OPTIONS_NAME} + {WEIGHTS_NAME}, or {{'options': path, 'weights': path}}"
    )

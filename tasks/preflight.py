"""Checks run before any work: every data file, vector file and biLM a config names, and the output folders.

``run``, ``compare``, ``predict`` and ``wsd`` call these first, so that a missing GloVe folder or an
unwritable results folder is reported at once, not after minutes of training. Paths are found in a
resolved features section by key: ``path``, ``words_path``, ``options_file``, ``weights_file`` (inputs)
and ``bilm`` (``default``, a preset name or a folder), in nested sections (``concat``) too.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

import torch

from elmo_features.formats.default_model import OPTIONS_NAME, WEIGHTS_NAME, default_model_paths, embedded_models
from elmo_features.util.paths import check_input_dir, check_input_file, check_input_path, check_output_dir
from elmo_features.util.errors import CheckpointError
from elmo_features.formats.presets import PRESETS

from .config import RunConfig
from .data.sources import SOURCES
from .experiment import CHECKPOINT_FORMAT

INPUT_KEYS = ("path", "words_path", "options_file", "weights_file")
FOLDER_READERS = ("raganato",)  # readers whose path is a folder
UNCHECKED_READERS = ("hf",)  # the path may be a hub name


def fetch_hint(path: str | Path) -> str:
    """'run `elmo-tasks data get NAME`' when ``path`` lies in a public data set's folder, else ''."""
    for part in Path(path).parts:
        if part in SOURCES:
            return f"run `elmo-tasks data get {part}`"
    return ""


def check_feature_paths(section: Any, where: str) -> None:
    """Every input file/folder and biLM a (resolved) features section names exists."""
    if isinstance(section, list):
        for i, s in enumerate(section):
            check_feature_paths(s, f"{where}[{i}]")
        return
    if not isinstance(section, dict):
        return
    for key, value in section.items():
        if key in INPUT_KEYS and isinstance(value, str):
            check_input_path(value, f"{where}.{key}", fetch_hint(value))
        elif key == "bilm" and isinstance(value, str):
            check_bilm_spec(value, f"{where}.bilm")
        elif key == "model" and section.get("name") == "transformer" and isinstance(value, str):
            check_encoder_spec(value, f"{where}.model")
        elif isinstance(value, (dict, list)):
            check_feature_paths(value, f"{where}.{key}")


def check_encoder_spec(spec: str, where: str) -> None:
    """A Transformer encoder named as a packaged name (fetched on first use), a folder, or a hub id (owner/name)."""
    from elmo_features.encoders.loading import is_hub_id
    from elmo_features.encoders.packaged import PACKAGED

    if spec in PACKAGED or Path(spec).expanduser().is_dir():
        return
    if is_hub_id(spec) and not Path(spec).exists():
        return  # a hub id: resolved when the model loads (one error line when offline)
    check_input_dir(spec, where, hint=f"give a packaged name ({', '.join(PACKAGED)}), a Hugging Face model folder "
                                      "or a hub id (owner/name)")


def relative_paths(section: Any) -> list[str]:
    """The relative file/folder paths a features section names (resolved against the current folder)."""
    if isinstance(section, list):
        return [p for s in section for p in relative_paths(s)]
    if not isinstance(section, dict):
        return []
    out = []
    for key, value in section.items():
        pathlike = key in INPUT_KEYS or (key == "bilm" and isinstance(value, str) and (
            "/" in value or Path(value).is_dir())) or (key == "model" and section.get("name") == "transformer"
                                                       and isinstance(value, str) and Path(value).is_dir())
        if pathlike and isinstance(value, str) and not Path(value).expanduser().is_absolute():
            out.append(value)
        elif isinstance(value, (dict, list)):
            out.extend(relative_paths(value))
    return out


def check_bilm_spec(spec: str, where: str) -> None:
    """A biLM named as "default", a preset or a folder with options.json + weights.hdf5 is there."""
    if spec in PRESETS:
        return  # downloaded on first use
    if spec == "default":
        for p in default_model_paths():
            check_input_file(p, f"{where} (the default biLM)", "train it with `elmo-tasks train-bilm` or name "
                                                               "another biLM")
        return
    if spec in embedded_models():
        return  # shipped inside the package
    check_input_dir(spec, where, needs=(OPTIONS_NAME, WEIGHTS_NAME),
                    hint=f"valid: an embedded model ({', '.join(embedded_models())}), a preset ({', '.join(PRESETS)}) or a folder with {OPTIONS_NAME} + "
                         f"{WEIGHTS_NAME}")


def check_data_path(reader: str, path: str, where: str) -> None:
    """A data file (or folder, for folder readers) named in a config exists."""
    if reader in UNCHECKED_READERS:
        return
    if reader in FOLDER_READERS:
        check_input_dir(path, where, hint=fetch_hint(path))
    else:
        check_input_file(path, where, fetch_hint(path))


def check_run_inputs(cfg: RunConfig, source: str, splits: Iterable[str] = ("train", "dev", "test"),
                     features: dict[str, Any] | None = None) -> None:
    """The data files of ``splits`` and every path of the features sections (name -> section; default:
    ``{"features": cfg.features}``)."""
    for split in splits:
        path = getattr(cfg.data, split)
        if path is not None:
            check_data_path(cfg.data.reader, path, f"{source}: data.{split}")
    wordnet = cfg.data.reader_options.get("wordnet")
    if isinstance(wordnet, str):
        check_input_path(wordnet, f"{source}: data.reader_options.wordnet", fetch_hint(wordnet))
    for name, section in (features if features is not None else {"features": cfg.features}).items():
        check_feature_paths(section, f"{source}: {name}")


def check_output_dirs(**dirs: str | Path | None) -> None:
    """Each named output folder (``--name=path``) exists writable or can be created; None = not used."""
    for name, path in dirs.items():
        if path is not None:
            check_output_dir(path, f"--{name.replace('_', '-')}")


RUN_FILES = ("config.yaml", "vocab.json", "model.pt")


def check_run_folder(run_dir: str | Path) -> Path:
    """A finished run folder for ``predict``: its files exist, vocab.json is a JSON object and model.pt is a
    checkpoint of this project (loaded with ``weights_only=True``); metrics.json (written last) exists."""
    hint = "give a folder written by `elmo-tasks run` (it prints the folder)"
    run_dir = check_input_dir(run_dir, "run folder", needs=RUN_FILES, hint=hint)
    if not (run_dir / "metrics.json").exists():
        raise CheckpointError(f"{run_dir}: the run never finished (no metrics.json); rerun it with the command in "
                              "its config, or use another run folder")
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

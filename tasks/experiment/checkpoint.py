"""A run's ``model.pt``: the trainable mix + head's state_dict with the sha256 of its weights, of the head's vocab
and of the parts of config.yaml that decide the model, each checked when the run is loaded (``load_run``)."""
from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from elmo_features.util.errors import CheckpointError
from elmo_features.util.provenance import write_bytes_atomic
from elmo_features.util.tensor_digest import update_with_tensor

from elmo_tasks.experiment.preflight import CHECKPOINT_FORMAT

if TYPE_CHECKING:
    from elmo_tasks.experiment.training import TaskModel


def vocab_digest(vocab: dict) -> str:
    """sha256 of the head's vocab as vocab.json stores it (label order included), recorded in model.pt."""
    return hashlib.sha256(json.dumps(vocab, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def weights_digest(state_dict: dict) -> str:
    """sha256 over a state_dict's names, dtypes, shapes and values (model.pt records it: a damaged file is told)."""
    h = hashlib.sha256()
    for name in sorted(state_dict):
        update_with_tensor(h, name, state_dict[name])
    return h.hexdigest()


def check_weights_digest(run_dir: Path, ckpt: dict) -> None:
    """model.pt's weights are the ones it was saved with (its recorded digest; runs saved before it: unchecked)."""
    recorded = ckpt.get("weights_sha256")
    if recorded is not None and recorded != weights_digest(ckpt.get("state_dict") or {}):
        raise CheckpointError(f"{run_dir / 'model.pt'}: its weights do not match the checksum they were saved with "
                              "(the file is damaged, or was edited): restore it from a copy, or rerun the run")


def save_state(model: TaskModel, path: Path, config_sha256: dict | None = None) -> None:
    buf = io.BytesIO()
    vocab = json.loads(json.dumps(model.head.vocab))  # as vocab.json holds it (tuples as lists, keys as strings)
    weights = model.state_dict()
    state = {"format": CHECKPOINT_FORMAT, "state_dict": weights, "vocab_sha256": vocab_digest(vocab),
             "weights_sha256": weights_digest(weights)}
    if config_sha256:  # what of config.yaml decides the model (load_run: check_config_digest)
        state["config_sha256"] = config_sha256
    torch.save(state, buf)
    write_bytes_atomic(path, buf.getvalue())


def check_vocab_digest(run_dir: Path, vocab: dict, ckpt: dict) -> None:
    """vocab.json is the vocab model.pt was trained with (its recorded digest; runs saved before it: unchecked)."""
    recorded = ckpt.get("vocab_sha256")
    if recorded is not None and recorded != vocab_digest(vocab):
        raise CheckpointError(f"{run_dir / 'vocab.json'}: not the label vocabulary model.pt was trained with "
                              f"(sha256 {vocab_digest(vocab)[:12]}, model.pt records {str(recorded)[:12]}: labels "
                              "edited, reordered or copied from another run); restore the run's vocab.json, or "
                              "rerun the run")

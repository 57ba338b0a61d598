"""Warnings about an encoder folder whose files may not belong together: a tokenizer of another model family, and
two weights files (transformers reads one of them). Each is said once per command (``elmo_features.util.once``)."""
from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import torch

from elmo_features.util.once import first_time


def warn_tokenizer_family(config: Any, folder: Path) -> None:
    """One warning line when tokenizer_config.json names a tokenizer class that is not the one transformers pairs
    with config.json's model_type (a config.json of another family over these weights and tokenizer: its position
    ids or layer norms may differ, and the features with them)."""
    import json

    from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES

    try:
        named = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")).get("tokenizer_class")
    except (OSError, ValueError, AttributeError):
        return
    mt = getattr(config, "model_type", None)
    pair = TOKENIZER_MAPPING_NAMES.get(mt) if mt else None
    pair = (pair,) if isinstance(pair, str) else tuple(p for p in (pair or ()) if p)
    base = lambda name: str(name).removesuffix("Fast")
    known = {base(p) for v in TOKENIZER_MAPPING_NAMES.values() for p in ((v,) if isinstance(v, str) else v or ()) if p}
    # (only a class transformers pairs with some model type says another family: DistilBertTokenizer, ElectraTokenizer
    # or PreTrainedTokenizerFast over their own configs are fine)
    if isinstance(named, str) and pair and base(named) in known and base(named) not in {base(p) for p in pair} and \
            first_time(("tokenizer family", str(folder), mt, named)):
        print(f"warning: {folder}: config.json's model_type {mt} goes with {base(pair[0])}, but tokenizer_config.json "
              f"names {named}: check that config.json belongs to these weights and tokenizer", file=sys.stderr)


@functools.cache
def warn_both_weights(folder: Path) -> None:
    """Once per folder, when they differ: transformers reads model.safetensors and never the pytorch_model.bin beside
    it, which may hold other weights (re-saved after fine-tuning)."""
    same = _same_weights(folder / "model.safetensors", folder / "pytorch_model.bin")
    if same:
        return
    how = "with other weights" if same is False else "not compared: sharded, or not a plain state dict"
    if not first_time(("two weights files", str(folder))):  # (said by another worker of the same command)
        return
    print(f"warning: {folder} holds both model.safetensors and pytorch_model.bin ({how}): model.safetensors is used "
          "(as transformers does); remove the one that is not this model", file=sys.stderr, flush=True)


def _same_weights(safetensors_file: Path, bin_file: Path) -> bool | None:
    """Whether the two files hold the same tensors; None when that cannot be told (a sharded pair, a pickled whole
    model, a damaged file)."""
    try:
        from safetensors.torch import load_file

        a = load_file(str(safetensors_file))
        b = torch.load(bin_file, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # (no single file of either kind, or not a plain state dict)
        return None
    if not isinstance(b, dict):
        return None
    return a.keys() == b.keys() and all(
        isinstance(b[k], torch.Tensor) and a[k].shape == b[k].shape and torch.equal(a[k], b[k]) for k in a)

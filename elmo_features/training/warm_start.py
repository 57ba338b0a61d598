"""A run's output vocabulary (built, cached or given) and the warm start from an exported biLM."""
from __future__ import annotations

from pathlib import Path

import h5py
import torch

from elmo_features.util.errors import ConfigError, StaleCacheError
from elmo_features.model.options import BiLMOptions
from elmo_features.formats.weights import load_weights_into
from elmo_features.training.config import TRANSFORMER_KEYS, TrainConfig
from elmo_features.training.data import SPECIALS, Corpus, build_vocab, read_vocab, write_vocab
from elmo_features.training.prep_cache import check_vocab_key, update_prep_key


def resolve_vocab(cfg: TrainConfig, corpus: Corpus, out: Path, has_checkpoint: bool) -> list[str]:
    """The config's vocab_file; else out/vocab.txt when it was built with this vocab_size from this corpus;
    else built from the corpus. Saved as out/vocab.txt; a checkpoint's vocabulary may not change."""
    path = out / "vocab.txt"
    if cfg.vocab_file:
        vocab = read_vocab(cfg.vocab_file)
        if len(vocab) - len(SPECIALS) != cfg.vocab_size:
            raise ConfigError(f"vocab_file {cfg.vocab_file} holds {len(vocab) - len(SPECIALS)} words after "
                              f"{SPECIALS}, vocab_size says {cfg.vocab_size}; set vocab_size to match")
    elif path.exists() and check_vocab_key(cfg, out):
        return read_vocab(path)
    else:
        vocab = build_vocab(corpus, cfg.vocab_size)
    if len(vocab) - len(SPECIALS) < 2:  # a language model over one word predicts nothing: its perplexity is ~1
        raise ConfigError(f"the vocabulary holds {len(vocab) - len(SPECIALS)} word(s) besides {SPECIALS} "
                          f"(vocab_size {cfg.vocab_size}, {len(corpus.types) - 2} distinct training words): its "
                          "perplexity would measure nothing; give more text or a larger vocab_size")
    if path.exists() and has_checkpoint and read_vocab(path) != vocab:
        raise StaleCacheError(f"{path}: the checkpoint's vocabulary differs from the one the training files "
                              "(or vocab_file) now give; choose another out_dir")
    write_vocab(vocab, path)
    update_prep_key(out, vocab_size=cfg.vocab_size, vocab_file=cfg.vocab_file)
    return vocab


# each options.json key that defines the model and the train-bilm config key that gives it
CONFIG_KEY = {"char_cnn.embedding.dim": "char_embedding_dim", "char_cnn.filters": "filters",
              "char_cnn.n_highway": "n_highway", "lstm.dim": "lstm_dim", "lstm.projection_dim": "projection_dim",
              "lstm.n_layers": "n_layers", "lstm.cell_clip": "cell_clip", "lstm.proj_clip": "proj_clip",
              "backbone": "backbone", "token_vectors": "token_vectors", "token_vectors.dim": "token_vectors_dim",
              "token_vectors.lowercase": "token_vectors_lowercase", "token_vectors.n_words": "token_vectors",
              "token_vectors.source": "token_vectors", **{f"transformer.{k}": v for k, v in TRANSFORMER_KEYS.items()}}


def _model_keys(options: BiLMOptions) -> dict:
    """The options' model-defining values by dotted key (``backbone``, ``lstm.dim``, ...; not the free-form extras)."""
    d = options.to_dict()
    out = {"backbone": options.backbone, "token_vectors": "yes" if options.token_vectors else "none"}
    for block in ("char_cnn", "lstm", "transformer", "token_vectors"):
        for k, v in (d.get(block) or {}).items():
            for k2, v2 in (v.items() if isinstance(v, dict) else [(None, v)]):
                out[f"{block}.{k}" + (f".{k2}" if k2 else "")] = v2
    return out


def options_mismatch(have: BiLMOptions, want: BiLMOptions) -> str:
    """One line naming only the keys in which an exported model's options (``have``) differ from a config's
    (``want``), with both values, and what to do."""
    a, b = _model_keys(have), _model_keys(want)
    if a["backbone"] != b["backbone"]:  # then every block differs: the backbone says it all
        keys = ["backbone"]
    elif a["token_vectors"] != b["token_vectors"]:
        keys = ["token_vectors"]
    else:
        keys = [k for k in a if k in b and a[k] != b[k]]
    shown = "; ".join(f"{k} {a.get(k)!r} in the file, {CONFIG_KEY.get(k, k)} {b.get(k)!r} in the config"
                      for k in keys) or f"file: {have}; config: {want}"
    return (f"its options.json describes another model than this config ({shown}); set the config's keys to the "
            "file's values, or warm-start from a model of this config's shape (or --set init_from=null)")


def check_init_from(cfg: TrainConfig, source: str) -> None:
    """Before any work: the options of the init_from export describe this config's model (the size of a static-vector
    block is known once the vocabulary is: ``warm_start`` checks the whole block)."""
    have = BiLMOptions.from_file(Path(cfg.init_from).expanduser() / "options.json")
    block = None
    if cfg.token_vectors:  # the file's block, with what the config fixes of it
        t = have.token_vectors
        block = {"dim": cfg.token_vectors_dim or (t.dim if t else 1), "n_words": t.n_words if t else 1,
                 "lowercase": cfg.token_vectors_lowercase, "source": t.source if t else ""}
    want = BiLMOptions.from_dict(cfg.elmo_options(block), source=f"{source}: the model")
    if have != want:
        raise ConfigError(f"{source}: init_from {cfg.init_from}: {options_mismatch(have, want)}")


def warm_start(model, folder: Path, vocab: list[str], token_vectors=None, target_counts=None) -> bool:
    """Load an exported biLM (``folder``/options.json + weights.hdf5) into ``model`` (a BiLanguageModel): the
    same model options are required; the softmax too when the file has one (then its vocab.txt must be
    ``vocab``). ``token_vectors``: the run's own frozen table, put back after loading. Without a softmax in
    the file, the fresh softmax's bias starts at the log unigram probabilities of ``target_counts`` (V,), the
    training frequency of each output word, when given. Returns whether the file had a softmax."""
    opts, weights = folder / "options.json", folder / "weights.hdf5"
    if not opts.exists() or not weights.exists():
        raise FileNotFoundError(f"init_from: {folder} needs options.json and weights.hdf5")
    have, want = BiLMOptions.from_file(opts), model.bilm.options
    if have != want:  # every field that defines the model (the free-form extra keys are not compared)
        raise ConfigError(f"init_from {folder}: {options_mismatch(have, want)}")
    load_weights_into(model.bilm, weights)
    if token_vectors is not None:  # the loaded table must be the one this run selected
        model.bilm.char_cnn.token_vectors = token_vectors
    with h5py.File(weights, "r") as f:
        if "softmax/W" in f:
            vocab_file = folder / "vocab.txt"
            if not vocab_file.exists() or vocab_file.read_text(encoding="utf-8").split("\n")[:-1] != vocab:
                raise ConfigError(f"init_from: {folder} has a softmax but its vocab.txt differs from this run's; "
                                  f"--set vocab_file={vocab_file} (and its vocab_size) to continue that softmax")
            model.softmax_w.data.copy_(torch.from_numpy(f["softmax/W"][...].astype("float32")))  # (V, D)
            model.softmax_b.data.copy_(torch.from_numpy(f["softmax/b"][...].astype("float32")))  # (V,)
            return True
    if target_counts is not None:  # a fresh softmax predicts the unigram distribution from the first step
        counts = torch.as_tensor(target_counts, dtype=torch.float64) + 1.0  # (V,) add-one: no -inf
        model.softmax_b.data.copy_((counts / counts.sum()).log().float())
    return False

"""A run's output vocabulary (built, cached or given) and the warm start from an exported biLM."""
from __future__ import annotations

from pathlib import Path

import h5py
import torch

from elmo_features.util.errors import ConfigError, StaleCacheError
from elmo_features.model.options import BiLMOptions
from elmo_features.formats.weights import load_weights_into
from elmo_features.training.config import TrainConfig
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
        raise ValueError(f"init_from: {opts} describes another model than this config (file: {have}; config: {want})")
    load_weights_into(model.bilm, weights)
    if token_vectors is not None:  # the loaded table must be the one this run selected
        model.bilm.char_cnn.token_vectors = token_vectors
    with h5py.File(weights, "r") as f:
        if "softmax/W" in f:
            vocab_file = folder / "vocab.txt"
            if not vocab_file.exists() or vocab_file.read_text(encoding="utf-8").split("\n")[:-1] != vocab:
                raise ValueError(f"init_from: {folder} has a softmax but its vocab.txt differs from this run's")
            model.softmax_w.data.copy_(torch.from_numpy(f["softmax/W"][...].astype("float32")))  # (V, D)
            model.softmax_b.data.copy_(torch.from_numpy(f["softmax/b"][...].astype("float32")))  # (V,)
            return True
    if target_counts is not None:  # a fresh softmax predicts the unigram distribution from the first step
        counts = torch.as_tensor(target_counts, dtype=torch.float64) + 1.0  # (V,) add-one: no -inf
        model.softmax_b.data.copy_((counts / counts.sum()).log().float())
    return False

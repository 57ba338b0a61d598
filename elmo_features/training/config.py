"""The biLM training config (YAML). Each key is declared once, with its type, range and default (``key``);
unknown keys are errors that list the valid keys; every problem is one ``ConfigError`` line naming this config's
own key."""
from __future__ import annotations

import os
import sys

from dataclasses import dataclass, asdict
from pathlib import Path
from typing import Any


import yaml

from elmo_features.util.errors import CheckpointError, ConfigError
from elmo_features.model.char_ids import MAX_WORD_LENGTH as MAX_CHARACTERS
from elmo_features.model.options import BACKBONES, TransformerOptions
from elmo_features.util.config_files import read_config_file
from elmo_features.util.schema import Bool, Int, List, Num, Str, build, join_key, key
from elmo_features.util.threads import threads_problem

# each key of the options' transformer block and the key of this config that gives its value (``transformer_block``):
# the names ``TransformerOptions.check`` gives in its messages, so that they name the keys the user wrote
TRANSFORMER_KEYS = {"dim": "projection_dim", "n_layers": "n_layers", "n_heads": "transformer_heads",
                    "ff_dim": "transformer_ff_dim", "max_positions": "transformer_max_positions",
                    "chunk_overlap": "transformer_chunk_overlap"}


# the keys a resumed run may change: how long, where and how fast it runs, and input paths whose content the resume
# checks by digest (train_files: the prep key and corpus digest; heldout_file, vocab_file: their sha256; token_vectors:
# the table digest; init_from is read before the first step only). Every other key decides the model or its training.
RESUME_FREE = ("out_dir", "max_train_tokens", "eval_every_tokens", "checkpoint_minutes", "threads", "train_files",
               "heldout_file", "vocab_file", "token_vectors", "init_from")


@dataclass
class TrainConfig:
    """Hyperparameters of one biLM training run (see docs/training.md for the reasoning)."""

    train_files: list[str] = key(List(Str(), min_len=1), factory=list,
                                 doc="plain or .gz, one tokenized sentence per line")
    heldout_file: str | None = key(Str(nullable=True), None, doc="used for the learning curve")
    out_dir: str = key(Str(), "runs/bilm/default")
    # model (ELMo options)
    char_embedding_dim: int = key(Int(min=1), 16)
    filters: list[list[int]] = key(List(List(Int(min=1), min_len=2, max_len=2), min_len=1),
                                   factory=lambda: [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256]])
    n_highway: int = key(Int(min=0), 1)
    lstm_dim: int = key(Int(min=1), 512)
    projection_dim: int = key(Int(min=1), 128)
    n_layers: int = key(Int(min=1), 2)
    cell_clip: float = key(Num(min=0), 3.0)
    proj_clip: float = key(Num(min=0), 3.0)
    # backbone (docs/weights_format.md): "lstm" (ELMo; lstm_dim, cell_clip, proj_clip) or "transformer"
    # (Peters et al. 2018: per-direction causal stacks of n_layers pre-LN blocks of width projection_dim)
    backbone: str = key(Str(choices=BACKBONES), "lstm")
    transformer_heads: int = key(Int(min=1), 4)
    transformer_ff_dim: int = key(Int(min=1), 512)
    transformer_max_positions: int = key(Int(min=3), 256,
                                         doc="attention window (<S> and </S> included); longer sentences run in "
                                             "overlapping windows")
    transformer_chunk_overlap: int = key(Int(min=0), 128)
    # static-vector prior (extension, docs/weights_format.md): frozen pretrained word vectors for the
    # output vocabulary's words, concatenated to the char-CNN output before the highway layers
    token_vectors: str | None = key(Str(nullable=True), None,
                                    doc="folder with vectors.npy + words.txt, or a GloVe text file")
    token_vectors_dim: int | None = key(Int(min=1, nullable=True), None,
                                        doc="when set, the file's dimension must match")
    token_vectors_lowercase: bool = key(Bool(), True, doc="look words up lower-cased (GloVe 6B is lower-cased)")
    # warm start: continue a trained biLM (a folder with options.json + weights.hdf5, e.g. the shipped
    # default); its options must equal this config's model. Without softmax/W in the file the softmax starts
    # fresh and is trained alone (biLM frozen) for ``init_freeze_steps`` steps first.
    init_from: str | None = key(Str(nullable=True), None)
    init_freeze_steps: int = key(Int(min=0), 0)
    skip_batches: int = key(Int(min=0), 0,
                            doc="epoch 0 starts at this batch (the batches a warm-started model already saw)")
    # output vocabulary and softmax
    vocab_size: int = key(Int(min=1), 50000, doc="most frequent training words, plus <S>, </S>, <UNK>")
    # a given output vocabulary instead of one built from train_files (e.g. the init_from export's vocab.txt,
    # to continue its softmax on other text); it must hold exactly vocab_size words after the three specials
    vocab_file: str | None = key(Str(nullable=True), None)
    n_negative_samples: int = key(Int(min=1), 4096, doc="sampled softmax candidates per batch (shared by all tokens)")
    # optimisation
    batch_tokens: int = key(Int(min=1), 4000, doc="tokens per batch (whole sentences, bucketed by length)")
    max_sentence_length: int = key(Int(min=1), 100, doc="longer sentences are cut into pieces of this length")
    max_train_tokens: int = key(Int(min=1), 20_000_000, doc="the run (and its learning-rate schedule) stops here")
    lr: float = key(Num(gt=0, max=10), 2e-3, doc="peak learning rate (a loss that turns NaN/Inf stops the run)")
    warmup_steps: int = key(Int(min=0), 200)
    min_lr_ratio: float = key(Num(min=0, max=1), 0.1, doc="cosine decay to lr * min_lr_ratio at max_train_tokens")
    weight_decay: float = key(Num(min=0, max=1), 0.0)
    dropout: float = key(Num(min=0, lt=1), 0.05)
    clip_norm: float = key(Num(gt=0), 1.0)
    seed: int = key(Int(min=0), 1)
    threads: int | None = key(Int(min=1, nullable=True), None,
                              doc="torch CPU threads (null: the cores of the process, shared among torchrun's local "
                                  "ranks; --threads overrides)")
    # "bf16": the forward pass and loss under torch.autocast (bf16 matmuls with fp32 accumulation; fp32 master
    # weights, optimizer state, cell state and held-out evaluation). Only on CPUs with AVX512-BF16/AMX or CUDA.
    precision: str = key(Str(choices=("fp32", "bf16")), "fp32")
    # bookkeeping
    checkpoint_minutes: float = key(Num(gt=0), 5.0)
    eval_every_tokens: int = key(Int(min=1), 1_000_000)
    eval_sentences: int = key(Int(min=1), 500, doc="held-out sentences for the learning curve (full softmax)")

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "config") -> "TrainConfig":
        """A checked config (unknown keys, types and ranges, then the backbone keys)."""
        if not isinstance(d, dict):
            raise ConfigError(f"{source}: expected a mapping of keys to values, got {type(d).__name__}")
        return build(cls, d, f"{source}:")

    def check(self, where: str) -> None:
        """The keys together (run by ``build`` after each key is checked): the filter widths, the Transformer
        block's rules across keys (``TransformerOptions.check``) named by this config's keys, and threads against
        this machine's CPUs."""
        for i, (width, _) in enumerate(self.filters):
            if width > MAX_CHARACTERS:  # the convolution runs over the 50 character ids of a token
                raise ConfigError(f"{join_key(where, f'filters[{i}]')}: width {width} > {MAX_CHARACTERS} characters "
                                  f"per token; use widths of at most {MAX_CHARACTERS}")
        if self.backbone == "transformer":
            TransformerOptions(**self.transformer_block()).check(where, TRANSFORMER_KEYS)
        self._check_paths(where)
        if self.skip_batches and not self.init_from:
            raise ConfigError(f"{join_key(where, 'skip_batches')}: {self.skip_batches} applies to a warm start "
                              "(init_from) only, and this config has none; drop skip_batches or set init_from")
        if self.token_vectors is None and self.token_vectors_dim is not None:
            print(f"warning: {join_key(where, 'token_vectors_dim')} {self.token_vectors_dim} sizes the vectors of "
                  "token_vectors, and this config has none: it has no effect", file=sys.stderr)
        problem = self.threads and threads_problem(self.threads)
        if problem:
            raise ConfigError(f"{join_key(where, 'threads')}: {problem} (or null: the cores of the process)")

    def _check_paths(self, where: str) -> None:
        """An empty or blank path (an unset variable) would read as the current folder, or switch a file off."""
        paths = [(f"train_files[{i}]", f, "a file") for i, f in enumerate(self.train_files)]
        paths += [("out_dir", self.out_dir, "a folder"), ("heldout_file", self.heldout_file, "a file or null"),
                  ("token_vectors", self.token_vectors, "a vectors file or folder, or null"),
                  ("init_from", self.init_from, "a biLM folder or null"), ("vocab_file", self.vocab_file,
                                                                              "a file or null")]
        for name, value, forms in paths:
            if value is not None and not value.strip():
                raise ConfigError(f"{join_key(where, name)}: empty path {value!r} (an unset variable?); give {forms}")
            if value is not None and value.startswith("~") and os.path.expanduser(value).startswith("~"):
                raise ConfigError(f"{join_key(where, name)}: {value}: no such user's home folder; give the full path")
        self._expand_home()
        seen: dict = {}  # one file named twice (or through a symlink / hard link) would double the corpus
        for i, f in enumerate(self.train_files):
            path = Path(f).expanduser()
            try:
                st = path.stat()
                ident: Any = (st.st_dev, st.st_ino)
            except OSError:  # (a missing file is reported by the input checks)
                ident = str(path.resolve())
            if ident in seen:
                first = seen[ident]
                raise ConfigError(f"{join_key(where, f'train_files[{i}]')}: {f} is train_files[{first}] "
                                  f"({self.train_files[first]}) again; list each file once")
            seen[ident] = i

    def _expand_home(self) -> None:
        """``~`` in every path, expanded once (the run's config.yaml records the paths read and written)."""
        home = lambda v: os.path.expanduser(v) if isinstance(v, str) else v
        self.train_files = [home(f) for f in self.train_files]
        for name in ("out_dir", "heldout_file", "token_vectors", "init_from", "vocab_file"):
            setattr(self, name, home(getattr(self, name)))

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: dict[str, Any] | None = None) -> "TrainConfig":
        path = Path(path)
        d = read_config_file(path) or {}
        if not isinstance(d, dict):
            raise ConfigError(f"{path}: expected a mapping of keys to values, got {type(d).__name__}")
        d.update(overrides or {})
        return cls.from_dict(d, source=str(path))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def transformer_block(self) -> dict[str, Any]:
        """The options' ``transformer`` block this config gives (its keys named as in options.json; this config's
        names: ``TRANSFORMER_KEYS``)."""
        return {"dim": self.projection_dim, "n_layers": self.n_layers, "n_heads": self.transformer_heads,
                "ff_dim": self.transformer_ff_dim, "max_positions": self.transformer_max_positions,
                "chunk_overlap": self.transformer_chunk_overlap, "positions": "sinusoidal"}

    def elmo_options(self, token_vectors: dict[str, Any] | None = None) -> dict[str, Any]:
        """The ELMo options.json content of this model (``token_vectors``: the extension block, if any)."""
        d = {
            "char_cnn": {
                "activation": "relu",
                "embedding": {"dim": self.char_embedding_dim},
                "filters": [list(f) for f in self.filters],
                "max_characters_per_token": 50,
                "n_characters": 262,
                "n_highway": self.n_highway,
            },
            "lstm": {
                "cell_clip": self.cell_clip,
                "dim": self.lstm_dim,
                "n_layers": self.n_layers,
                "proj_clip": self.proj_clip,
                "projection_dim": self.projection_dim,
                "use_skip_connections": True,
            },
            "bidirectional": True,
            "dropout": self.dropout,
            "n_tokens_vocab": self.vocab_size + 3,
            "n_negative_samples_batch": self.n_negative_samples,
        }
        if token_vectors is not None:
            d["token_vectors"] = token_vectors
        if self.backbone == "transformer":
            del d["lstm"]
            d["backbone"] = "transformer"
            d["transformer"] = self.transformer_block()
        return d


NULL_FIXED = ("token_vectors",)  # free to name another path (its digest is checked), not to appear or go: the
# model's input width changes with it


def resume_changes(saved: Any, cfg: TrainConfig) -> list[str]:
    """Each key outside ``RESUME_FREE`` whose value differs between a run's saved config (a checkpoint's or its
    config.yaml; keys it lacks had their default) and ``cfg``, and each ``NULL_FIXED`` key switched on or off, as
    "key old -> new"."""
    if not isinstance(saved, dict):
        return []
    defaults, now = TrainConfig().to_dict(), cfg.to_dict()
    home = lambda v: (os.path.expanduser(v) if isinstance(v, str) and v.startswith("~") else
                      [home(x) for x in v] if isinstance(v, list) else v)  # (a run saved before ~ was expanded)
    was = {k: home(saved.get(k, defaults[k])) for k in now}
    return [f"{k} {was[k]!r} -> {now[k]!r}" for k in now
            if (k not in RESUME_FREE and was[k] != now[k])
            or (k in NULL_FIXED and (was[k] is None) != (now[k] is None))]


def check_resume_config(saved, cfg: TrainConfig, ckpt: Path) -> None:
    """Refuse a resume whose config differs from the run's in a key it cannot change (``resume_changes``); another
    backbone is named alone (every backbone key differs with it)."""
    was = saved.get("backbone", "lstm") if isinstance(saved, dict) else cfg.backbone
    if was != cfg.backbone:
        raise CheckpointError(f"{ckpt}: was trained with backbone '{was}', but the config says '{cfg.backbone}'; "
                              "resume with the same backbone, or start a new out_dir")
    changed = resume_changes(saved, cfg)
    if changed:
        raise CheckpointError(f"{ckpt}: the config changed since this run started ({'; '.join(changed)}); put the "
                              "run's values back (its config.yaml) to resume, or start a new out_dir")
    was = saved.get("init_from") if isinstance(saved, dict) else cfg.init_from
    if was != cfg.init_from:  # read at a fresh start only: the run's record keeps what it started from
        print(f"warning: init_from is read at a fresh start only; this run started from {was!r}, which its "
              f"config.yaml keeps ({cfg.init_from!r} is ignored)", file=sys.stderr)
        cfg.init_from = was


def check_resume_length(tokens: int, saved: Any, cfg: TrainConfig, ckpt: Path) -> None:
    """Refuse a resume that shortens the run (``max_train_tokens`` below the saved config's) to fewer tokens than it
    has trained (``tokens``): nothing could be done, and its record would claim a shorter run."""
    was = saved.get("max_train_tokens") if isinstance(saved, dict) else None
    if isinstance(was, int) and cfg.max_train_tokens < was and cfg.max_train_tokens < tokens:
        raise CheckpointError(f"{ckpt}: this run has trained {tokens:,} tokens already, more than max_train_tokens "
                              f"{cfg.max_train_tokens:,}; resume with at least {tokens:,} (its config.yaml says "
                              f"{was:,}), or start a new out_dir for a shorter run")


def saved_config(out: Path):
    """out/config.yaml as written by the run (None when absent or unreadable)."""
    try:
        return yaml.safe_load((out / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None

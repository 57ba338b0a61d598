"""The TF-Hub ELMo module's calls and output dictionary, in PyTorch (``hub.Module("https://tfhub.dev/google/elmo/2")``).

    elmo = ElmoHub("original", trainable=True)         # or "default", a preset, a folder, a BiLM
    out = elmo(["the cat is on the mat", "dogs are in the fog"], signature="default", as_dict=True)
    out = elmo({"tokens": tokens, "sequence_len": lengths}, signature="tokens", as_dict=True)
    out["elmo"]  # (batch, max_length, D)

Outputs (D = the biLM's output size, 1024 for ``original``; P = D / 2, its token-representation size):

* ``word_emb`` (batch, max_length, P): the character-based token representations (our layer 0 is this vector
  repeated twice, [t; t], to D dims, as in bilm-tf and AllenNLP; ``word_emb`` is its first half);
* ``lstm_outputs1``, ``lstm_outputs2`` (batch, max_length, D): the two biLSTM layers (our layers 1 and 2);
* ``elmo`` (batch, max_length, D): gamma * sum_k softmax(w)_k * layer_k over the 3 layers, with layer 0 the
  D-dim [t; t]: 4 scalars, w initialised to 0 and gamma to 1, as bilm-tf's ``weight_layers`` (which adds 1/3 to
  every w before the softmax, a constant that changes nothing);
* ``default`` (batch, D): the mean over each sentence's real tokens of the softmax-weighted layer sum *before*
  gamma (sum_k softmax(w)_k * layer_k), as DeepPavlov's ``elmo2tfhub`` export, which writes modules in this
  format, computes it; with the scalars at their initial values it is the mean of the plain average of the 3
  layers. A sentence with no token gets zeros.

Every position past a sentence's length is zero in every output. ``trainable=True`` makes the 4 scalars (a
``ScalarMix``) trainable, as the module's ``trainable=True`` does; the biLM itself always stays frozen (eval mode,
no gradients). Unlike the module, which is built on bilm-tf's graph and carries LSTM states from one batch to the
next, this runs the biLM stateless: a sentence gets the same vectors whatever batch it is in.
"""
from __future__ import annotations

import numbers
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from torch import nn

from elmo_features.model.bilm import BiLM
from elmo_features.model.char_ids import checked_batch_to_ids
from elmo_features.util.arguments import check_bool, check_sentences
from elmo_features.util.errors import UsageError
from elmo_features.model.scalar_mix import ScalarMix

SIGNATURES = ("default", "tokens")
OUTPUTS = ("word_emb", "lstm_outputs1", "lstm_outputs2", "elmo", "default")


class ElmoHub(nn.Module):
    """A frozen 2-layer biLM behind TF-Hub ELMo's two signatures and output dictionary (see the module docstring)."""

    def __init__(self, model: str | Path | BiLM = "original", trainable: bool = False,
                 cache_dir: str | Path | None = None):
        super().__init__()
        from elmo_features.formats.default_model import check_one_model_argument, resolve_bilm

        check_one_model_argument("ElmoHub", model, trainable)
        trainable = check_bool(trainable, "trainable")
        bilm = resolve_bilm(model, cache_dir=cache_dir)
        if bilm.num_output_layers != 3:
            raise UsageError(f"ElmoHub needs a biLM with 3 output layers (token layer + 2 LSTM layers), like TF-Hub's; "
                             f"this one has {bilm.num_output_layers}")
        bilm.eval()
        for p in bilm.parameters():
            p.requires_grad_(False)
        self.bilm = bilm
        self.mix = ScalarMix(3, trainable=trainable)  # the 4 scalars: w (3,) and gamma

    def train(self, mode: bool = True) -> "ElmoHub":
        super().train(mode)
        self.bilm.eval()  # the biLM stays in eval mode (it has no dropout, but a subclass might)
        return self

    @property
    def output_dim(self) -> int:
        return self.bilm.output_dim

    def forward(self, inputs: Any, signature: str = "default", as_dict: bool = False):
        """``signature="default"``: a 1-D list of untokenized strings, each split on spaces; ``"tokens"``: a mapping
        with ``tokens`` [batch][max_length] strings (padded with "") and ``sequence_len`` [batch] ints.
        Returns the dict of outputs with ``as_dict=True``, else the ``default`` output, as the module does."""
        as_dict = check_bool(as_dict, "as_dict")
        if getattr(self.bilm, "keep_sentence_boundaries", False):  # (switched on after the module was built)
            raise ValueError("ElmoHub needs a BiLM with keep_sentence_boundaries=False (its outputs would include <S> "
                             "and </S>, shifting every word by one); set it back to False")
        sentences, width = _sentences(inputs, signature)
        out = self._outputs(sentences, width)
        return out if as_dict else out["default"]

    def _outputs(self, sentences: list[list[str]], width: int) -> dict[str, torch.Tensor]:
        device = next(self.bilm.parameters()).device
        B = len(sentences)
        D = self.bilm.output_dim
        layers = torch.zeros(3, B, width, D, device=device)  # (L, B, T, D)
        if any(sentences):
            with torch.no_grad():
                res = self.bilm(checked_batch_to_ids(sentences).to(device))
            T = res.layers.shape[2]
            layers[:, :, :T] = res.layers.float()  # zero past each sentence (the biLM zeroes its padding)
        lengths = torch.tensor([len(s) for s in sentences], device=device)  # (B,)
        mask = torch.arange(width, device=device)[None] < lengths[:, None]  # (B, T)
        weighted = torch.tensordot(self.mix.normalized_weights(), layers, dims=([0], [0]))  # (B, T, D) before gamma
        weighted = weighted * mask[..., None]
        mean = weighted.sum(1) / lengths.clamp(min=1)[:, None].to(weighted.dtype)  # (B, D)
        return {"word_emb": layers[0, :, :, : D // 2], "lstm_outputs1": layers[1], "lstm_outputs2": layers[2],
                "elmo": self.mix.gamma * weighted, "default": mean}


def _sentences(inputs: Any, signature: str) -> tuple[list[list[str]], int]:
    """Token lists and the output width (max_length) for either signature; checks the inputs."""
    if signature == "default":
        if isinstance(inputs, str) or not isinstance(inputs, Sequence):
            raise UsageError("signature 'default' takes a 1-D list of untokenized strings, e.g. ['the cat sat']")
        if not all(isinstance(s, str) for s in inputs):
            raise UsageError("signature 'default' takes strings; for token lists use signature='tokens'")
        sentences = [[t for t in s.split(" ") if t] for s in inputs]  # split on spaces, as the module
        return sentences, max((len(s) for s in sentences), default=0)
    if signature == "tokens":
        if not isinstance(inputs, Mapping) or set(inputs) != {"tokens", "sequence_len"}:
            raise UsageError("signature 'tokens' takes {'tokens': [batch][max_length] strings, 'sequence_len': [batch]}")
        tokens, lengths = inputs["tokens"], inputs["sequence_len"]
        lengths = lengths.tolist() if hasattr(lengths, "tolist") else list(lengths)
        if len(tokens) != len(lengths):
            raise UsageError(f"tokens has {len(tokens)} rows but sequence_len has {len(lengths)} values")
        width = max((len(row) for row in tokens), default=0)
        sentences = []
        for i, (row, n) in enumerate(zip(tokens, lengths)):
            row = row.tolist() if hasattr(row, "tolist") else row  # a NumPy row of a [batch][max_length] array
            if isinstance(row, (str, bytes)) or not isinstance(row, Sequence):  # a string would give one token a char
                raise UsageError(f"tokens[{i}] is {type(row).__name__} {str(row)[:40]!r}, not a list of tokens; the "
                                 "'tokens' signature takes [batch][max_length] token strings (untokenized sentences: "
                                 "signature 'default')")
            row = [t.decode("utf-8") if isinstance(t, bytes) else t for t in row]
            if isinstance(n, bool) or not isinstance(n, numbers.Integral):
                raise UsageError(f"sequence_len[{i}] = {n!r} is not an integer")
            n = int(n)  # NumPy integers included
            if not 0 <= n <= len(row):
                raise UsageError(f"sequence_len[{i}] = {n} is not between 0 and the row's length {len(row)}")
            sentences.append(list(row[:n]))
        return check_sentences(sentences, row="tokens[{}]"), width  # within each sequence_len
    raise UsageError(f"unknown signature {signature!r}; valid: {', '.join(SIGNATURES)}")

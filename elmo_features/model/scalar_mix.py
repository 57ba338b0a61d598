"""ELMo's task-specific scalar mix (Peters et al. 2018, eq. 1): gamma * sum_k softmax(w)_k * h_k.

Several mixes can share one biLM pass: run the biLM once and call each mix on the same
``out.layers`` (e.g. one mix for the input and one for the output of a task model, as in the
ELMo paper's SNLI/SQuAD setups); each mix owns only its L + 1 scalars::

    out = bilm(char_ids)
    x_in, x_out = mix_in(out.layers, out.mask), mix_out(out.layers, out.mask)
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from elmo_features.util.arguments import check_bool, check_float, check_int, check_mask

LAYER_NORMS = (None, "batch", "token")
BATCH_NORM_EPS = 1e-12  # AllenNLP ScalarMix._do_layer_norm
TOKEN_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default


class ScalarMix(nn.Module):
    """A learned softmax-weighted sum of the L biLM layers, scaled by gamma.

    initial: raw pre-softmax weights (L floats; default zeros = equal weights); gamma starts at 1.
    trainable=False freezes both. layer_norm: None; "batch" = AllenNLP's ``do_layer_norm`` (each
    layer normalised by one mean/variance over all unmasked positions of the batch and all D);
    "token" = each token vector normalised over its D values (independent of the batch).
    l2_coef: ``regularization()`` returns l2_coef * sum(w**2) (bilm-tf's weight penalty).
    """

    def __init__(self, num_layers: int, initial: Sequence[float] | None = None, trainable: bool = True,
                 layer_norm: str | None = None, l2_coef: float = 0.0):
        super().__init__()
        num_layers = check_int(num_layers, "ScalarMix num_layers")
        trainable = check_bool(trainable, "ScalarMix trainable")
        if layer_norm not in LAYER_NORMS:
            raise ValueError(f"unknown layer_norm {layer_norm!r}; valid: {LAYER_NORMS}")
        initial = _initial_weights(initial, num_layers)
        self.num_layers = num_layers
        self.layer_norm = layer_norm
        self.l2_coef = check_float(l2_coef, "ScalarMix l2_coef", minimum=0.0)
        self.weights = nn.Parameter(torch.tensor(initial), requires_grad=trainable)  # (L,)
        self.gamma = nn.Parameter(torch.tensor(1.0), requires_grad=trainable)  # ()

    def extra_repr(self) -> str:
        return f"num_layers={self.num_layers}, layer_norm={self.layer_norm!r}, l2_coef={self.l2_coef}"

    def normalized_weights(self) -> torch.Tensor:
        """softmax(w): (L,)"""
        return torch.softmax(self.weights, dim=0)

    def regularization(self) -> torch.Tensor:
        """l2_coef * sum(w**2) on the raw weights (a scalar to add to the loss)."""
        return self.l2_coef * (self.weights**2).sum()

    def forward(self, layers: torch.Tensor | Sequence[torch.Tensor], mask: torch.Tensor | None = None) -> torch.Tensor:
        """layers: (L, B, T, D) (or a list of L tensors (B, T, D)); mask: (B, T) bool (or only 0/1) -> (B, T, D).

        Padded positions (mask False) hold unspecified values with layer_norm="batch" (as in AllenNLP).
        """
        if not torch.is_tensor(layers):
            layers = list(layers)
            if len(layers) != self.num_layers:  # (torch.stack would fail on an empty list with its own words)
                raise ValueError(f"ScalarMix got {len(layers)} layers, but was built for {self.num_layers}")
            for k, t in enumerate(layers):
                if not torch.is_tensor(t):
                    raise TypeError(f"ScalarMix: layer {k} is a {type(t).__name__}, not a torch tensor; give (B, T, D) "
                                    "tensors (torch.from_numpy for NumPy arrays)")
                if t.shape != layers[0].shape:
                    raise ValueError(f"ScalarMix: layer {k} is {tuple(t.shape)}, but layer 0 is "
                                     f"{tuple(layers[0].shape)}; every layer must be a (B, T, D) tensor of one shape")
            layers = torch.stack(layers)
        if not layers.is_floating_point():
            raise TypeError(f"ScalarMix layers must be floating-point tensors, got {layers.dtype}")
        if layers.device.type == "meta":  # (shapes without values: the mix would read uninitialised memory)
            raise ValueError("ScalarMix: the layers are on the meta device (shapes, no values); give tensors that "
                             "hold data (e.g. on cpu)")
        if layers.shape[0] != self.num_layers:
            raise ValueError(f"ScalarMix got {layers.shape[0]} layers, but was built for {self.num_layers}")
        if mask is not None:
            mask = check_mask(mask, "ScalarMix mask", shape=layers.shape[1:3], like="the layers'")  # (B, T) bool
        if self.layer_norm == "batch":
            if mask is None:
                raise ValueError('ScalarMix(layer_norm="batch") needs the (B, T) mask')
            layers = _batch_norm(layers, mask)
        elif self.layer_norm == "token":
            layers = _token_norm(layers)
        w = self.normalized_weights().to(layers.dtype)  # (L,)
        mixed = torch.tensordot(w, layers, dims=([0], [0]))  # (B, T, D)
        return self.gamma.to(layers.dtype) * mixed


def _initial_weights(initial: Sequence[float] | None, num_layers: int) -> list[float]:
    """The L raw weights as floats: zeros by default; each a finite number (NaN or Inf would make every output NaN)."""
    if initial is None:
        return [0.0] * num_layers
    if hasattr(initial, "tolist"):  # a NumPy array or a tensor
        initial = initial.tolist()
    if isinstance(initial, (str, bytes)) or not hasattr(initial, "__len__"):
        raise TypeError(f"ScalarMix initial must be a list of {num_layers} numbers, got {type(initial).__name__}: "
                        f"{repr(initial)[:40]}")
    if len(initial) != num_layers:
        raise ValueError(f"ScalarMix: initial has {len(initial)} weights, but num_layers is {num_layers}")
    return [check_float(x, f"ScalarMix initial[{k}]") for k, x in enumerate(initial)]


def _batch_norm(layers: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """AllenNLP's per-layer norm: one mean/var per layer over unmasked positions x D. (L,B,T,D)->(L,B,T,D)"""
    m = mask.to(layers.dtype).unsqueeze(-1)  # (B, T, 1)
    n = m.sum() * layers.shape[-1]  # number of unmasked scalars per layer
    if float(n) == 0:
        raise ValueError('ScalarMix(layer_norm="batch") got a batch with no unmasked positions')
    masked = layers * m  # (L, B, T, D)
    mean = masked.sum(dim=(1, 2, 3), keepdim=True) / n  # (L, 1, 1, 1)
    var = (((masked - mean) * m) ** 2).sum(dim=(1, 2, 3), keepdim=True) / n  # (L, 1, 1, 1)
    return (layers - mean) / torch.sqrt(var + BATCH_NORM_EPS)


def _token_norm(layers: torch.Tensor) -> torch.Tensor:
    """Normalise every token vector over D (no learned affine). (L,B,T,D)->(L,B,T,D)"""
    mean = layers.mean(dim=-1, keepdim=True)  # (L, B, T, 1)
    var = layers.var(dim=-1, unbiased=False, keepdim=True)  # (L, B, T, 1)
    return (layers - mean) / torch.sqrt(var + TOKEN_NORM_EPS)

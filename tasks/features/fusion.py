"""Layer fusions: L stacked layers (L, B, T, D) + mask (B, T) -> features (B, T, D'), trained with the head.

Registered in ``elmo_tasks.registry.FUSIONS`` (configs name them under ``mix:``; see docs/fusion.md) and built by
``build_fusion(section, num_layers, dim)``: the feature source that owns the layers gives L and D, the
config gives the rest. Each learned fusion starts as the plain average of the layers (scalar: unless
``initial`` says otherwise; concat_project: when D' = D), and ``l2_coef`` is an L2 pull of its parameters
toward that uniform average (ELMo's lambda).

* ``scalar`` (the default): gamma * sum_l softmax(w)_l h_l (ELMo eq. 1). L + 1 parameters.
* ``average``: mean_l h_l, fixed. 0 parameters.
* ``layer_attention``: gamma * sum_l a_tl h_tl with a_t = softmax_l(q . h_tl / sqrt(D) + b_l), a learned
  query q, so each token picks its layers. D + L + 1 parameters.
* ``gated``: gamma * (2/L) * sum_l sigmoid(g_l) * h_l, per-dimension gates g (L, D). L * D + 1 parameters.
* ``concat_project``: W [h_1; ...; h_L] + c, one linear map of the concatenated layers to D' (default D).
  L * D * D' + D' parameters.

``scalar`` and ``average`` live in ``elmo_tasks.features.mix`` (unchanged ELMo scalar mix); the others here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import torch
from torch import nn

from elmo_features.util.errors import ConfigError
from elmo_features.util.devices import module_device
from elmo_features.model.scalar_mix import _batch_norm, _token_norm
from elmo_features.util.arguments import check_mask
from elmo_features.util.schema import Int, Num, key

from elmo_tasks.components import MAX_UNITS, component_config
from elmo_tasks.registry import FUSIONS, class_contract


def normalize_layers(layers: torch.Tensor, mask: torch.Tensor, layer_norm: str | None) -> torch.Tensor:
    """The ScalarMix layer norms (None | "batch" | "token") for any fusion. (L, B, T, D) -> (L, B, T, D)."""
    mask = check_mask(mask, "fusion mask", shape=layers.shape[1:3], like="the layers'")  # (B, T) bool
    if layer_norm == "batch":
        return _batch_norm(layers, mask)
    if layer_norm == "token":
        return _token_norm(layers)
    return layers


# a fusion is a module built as cls(config, num_layers, dim) with a Config dataclass: (L, B, T, D) -> (B, T, D')
FUSIONS.set_contract(class_contract(nn.Module))


def build_fusion(section: dict, num_layers: int, dim: int, where: str = "mix") -> nn.Module:
    """A fusion from a resolved ``{name: ..., **hparams}`` section, for ``num_layers`` layers of size ``dim``; a
    fusion class's optional ``check_layers(config, num_layers, where)`` refuses settings that do not fit them."""
    cls, config = FUSIONS.get(section["name"]), component_config(FUSIONS, section)
    if hasattr(cls, "check_layers"):
        cls.check_layers(config, num_layers, where)
    return cls(config, num_layers, dim)


class Fusion(nn.Module):
    """Base class of the fusions defined here: (L, B, T, D) + (B, T) -> (B, T, output_dim)."""

    Config: ClassVar[type]

    def __init__(self, config: Any, num_layers: int, dim: int):
        super().__init__()
        if num_layers < 1 or dim < 1:
            raise ValueError(f"{type(self).__name__} needs num_layers >= 1 and dim >= 1, got {num_layers}, {dim}")
        self.config = config
        self.num_layers = num_layers
        self.dim = dim
        self.output_dim = dim

    @classmethod
    def parameter_count(cls, config: Any, num_layers: int, dim: int) -> int:
        """The documented number of trainable scalars (tests check it against the module)."""
        raise NotImplementedError

    def _check(self, layers: torch.Tensor) -> None:
        if layers.dim() != 4 or layers.shape[0] != self.num_layers or layers.shape[-1] != self.dim:
            raise ValueError(f"{type(self).__name__} was built for ({self.num_layers}, B, T, {self.dim}) layers, "
                             f"got {tuple(layers.shape)}")

    def regularization(self) -> torch.Tensor:
        """l2_coef * squared distance of the parameters from the uniform average (0 without l2_coef)."""
        return torch.zeros((), device=module_device(self))

    def report(self) -> dict:
        """JSON-able learned weights; ``layer_weights`` (L values summing to 1) is each layer's share."""
        return {}


def _r(values: torch.Tensor) -> list[float]:
    return [round(float(v), 6) for v in values.detach().reshape(-1)]


# ---------------------------------------------------------------- layer_attention

@dataclass
class LayerAttentionConfig:
    layer_norm: Literal["batch", "token"] | None = key(default=None, doc="normalise each layer first (see ScalarMix)")
    l2_coef: float = key(Num(min=0), 0.0, doc="l2_coef * (|q|^2 + |b|^2): pulls every token toward equal layer weights")


@FUSIONS.register("layer_attention")
class LayerAttention(Fusion):
    """Each token picks its own layer weights: a_t = softmax_l(q . h_tl / sqrt(D) + b_l) from a learned query q.

    Parameters: q (D,), b (L,), gamma: D + L + 1. q = b = 0 at init: every token starts at equal weights.
    ``report()`` gives the mean attention per layer and its mean entropy over the unpadded tokens seen in
    evaluation since the weights last changed (a training step or a state load).
    """

    Config = LayerAttentionConfig

    def __init__(self, config: LayerAttentionConfig, num_layers: int, dim: int):
        super().__init__(config, num_layers, dim)
        self.query = nn.Parameter(torch.zeros(dim))  # (D,)
        self.bias = nn.Parameter(torch.zeros(num_layers))  # (L,)
        self.gamma = nn.Parameter(torch.tensor(1.0))  # ()
        self.register_buffer("_att_sum", torch.zeros(num_layers, dtype=torch.float64), persistent=False)  # (L,)
        self.register_buffer("_ent_sum", torch.zeros((), dtype=torch.float64), persistent=False)
        self.register_buffer("_tokens", torch.zeros((), dtype=torch.float64), persistent=False)

    @classmethod
    def parameter_count(cls, config: LayerAttentionConfig, num_layers: int, dim: int) -> int:
        return dim + num_layers + 1

    def attention(self, layers: torch.Tensor) -> torch.Tensor:
        """Per-token layer weights of (already normalised) layers (L, B, T, D) -> (B, T, L)."""
        scores = torch.einsum("lbtd,d->btl", layers, self.query.to(layers.dtype)) / math.sqrt(self.dim)  # (B, T, L)
        return torch.softmax(scores + self.bias.to(layers.dtype), dim=-1)  # (B, T, L)

    def forward(self, layers: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(L, B, T, D), (B, T) -> (B, T, D)."""
        self._check(layers)
        mask = check_mask(mask, f"{type(self).__name__} mask", shape=layers.shape[1:3], like="the layers'")  # (B, T)
        h = normalize_layers(layers, mask, self.config.layer_norm)  # (L, B, T, D)
        a = self.attention(h)  # (B, T, L)
        if self.training:
            self.reset_stats()
        else:
            self._observe(a.detach(), mask)
        return self.gamma.to(h.dtype) * torch.einsum("btl,lbtd->btd", a, h)  # (B, T, D)

    def _observe(self, a: torch.Tensor, mask: torch.Tensor) -> None:
        """Add the attention of the unpadded tokens (B, T, L) to the report statistics."""
        a = a[mask].to(torch.float64)  # (N, L)
        self._att_sum += a.sum(0)
        self._ent_sum += -(a * torch.log(a.clamp_min(1e-12))).sum()
        self._tokens += a.shape[0]

    def reset_stats(self) -> None:
        self._att_sum.zero_()
        self._ent_sum.zero_()
        self._tokens.zero_()

    def _load_from_state_dict(self, *args, **kwargs) -> None:
        self.reset_stats()  # statistics of other weights no longer describe this fusion
        super()._load_from_state_dict(*args, **kwargs)

    def regularization(self) -> torch.Tensor:
        return self.config.l2_coef * ((self.query**2).sum() + (self.bias**2).sum())

    def report(self) -> dict:
        out = {"gamma": round(float(self.gamma.detach()), 6), "bias_weights": _r(torch.softmax(self.bias, 0)),
               "query_norm": round(float(self.query.detach().norm()), 6), "tokens": int(self._tokens)}
        if self._tokens > 0:
            mean = self._att_sum / self._tokens  # (L,)
            out.update(layer_weights=_r(mean), mean_attention=_r(mean),
                       mean_entropy=round(float(self._ent_sum / self._tokens), 6),
                       uniform_entropy=round(math.log(self.num_layers), 6))
        return out


# ---------------------------------------------------------------- gated

@dataclass
class GatedConfig:
    layer_norm: Literal["batch", "token"] | None = None
    l2_coef: float = key(Num(min=0), 0.0, doc="l2_coef * |g|^2 on the gate logits: pulls toward the average (g = 0)")


@FUSIONS.register("gated")
class GatedFusion(Fusion):
    """Per-dimension sigmoid gates over layers: gamma * (2/L) * sum_l sigmoid(g_l) ⊙ h_l, g (L, D).

    Parameters: g (L, D) and gamma: L * D + 1. g = 0 at init (every gate 1/2): the plain average. A gate
    can close a dimension of one layer (down to 0) or pass it at up to twice the average's weight.
    """

    Config = GatedConfig

    def __init__(self, config: GatedConfig, num_layers: int, dim: int):
        super().__init__(config, num_layers, dim)
        self.gates = nn.Parameter(torch.zeros(num_layers, dim))  # (L, D) logits
        self.gamma = nn.Parameter(torch.tensor(1.0))  # ()

    @classmethod
    def parameter_count(cls, config: GatedConfig, num_layers: int, dim: int) -> int:
        return num_layers * dim + 1

    def gate_values(self) -> torch.Tensor:
        """sigmoid(g): (L, D)."""
        return torch.sigmoid(self.gates)

    def forward(self, layers: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(L, B, T, D), (B, T) -> (B, T, D)."""
        self._check(layers)
        h = normalize_layers(layers, mask, self.config.layer_norm)  # (L, B, T, D)
        g = self.gate_values().to(h.dtype)[:, None, None, :]  # (L, 1, 1, D)
        scale = self.gamma.to(h.dtype) * (2.0 / self.num_layers)
        return scale * (g * h).sum(0)  # (B, T, D)

    def regularization(self) -> torch.Tensor:
        return self.config.l2_coef * (self.gates**2).sum()

    def report(self) -> dict:
        mean = self.gate_values().detach().mean(1)  # (L,)
        return {"gamma": round(float(self.gamma.detach()), 6), "mean_gates": _r(mean),
                "layer_weights": _r(mean / mean.sum()),
                "closed_fraction": _r((self.gate_values().detach() < 0.1).double().mean(1))}


# ---------------------------------------------------------------- concat_project

@dataclass
class ConcatProjectConfig:
    layer_norm: Literal["batch", "token"] | None = None
    output_dim: int | None = key(Int(min=1, max=MAX_UNITS, nullable=True), None, doc="D' (default: the layer size D)")
    l2_coef: float = key(Num(min=0), 0.0,
                         doc="l2_coef * (|W - W_avg|^2 + |c|^2) (only with D' = D: W_avg is the average's map)")


@FUSIONS.register("concat_project")
class ConcatProject(Fusion):
    """All layers concatenated, then one linear map: W [h_1; ...; h_L] + c, W (D', L * D).

    Parameters: W and c: L * D * D' + D'. With D' = D, W starts as [I/L ... I/L] and c = 0 (the plain
    average) and l2_coef pulls (W, c) back toward that; with another D', W has torch's default (seeded) init and
    l2_coef must be 0.
    """

    Config = ConcatProjectConfig

    def __init__(self, config: ConcatProjectConfig, num_layers: int, dim: int):
        super().__init__(config, num_layers, dim)
        self.output_dim = config.output_dim or dim
        self.proj = nn.Linear(num_layers * dim, self.output_dim)  # weight (D', L * D)
        self.from_average = self.output_dim == dim
        if self.from_average:
            with torch.no_grad():
                self.proj.weight.copy_(self._average_map())
                self.proj.bias.zero_()
        elif config.l2_coef:
            raise ConfigError(f"mix (concat_project): l2_coef pulls toward the layer average, which needs "
                              f"output_dim = the layer size {dim} (got {self.output_dim}); set l2_coef: 0 or "
                              f"output_dim: null")

    @classmethod
    def parameter_count(cls, config: ConcatProjectConfig, num_layers: int, dim: int) -> int:
        out = config.output_dim or dim
        return num_layers * dim * out + out

    def _average_map(self) -> torch.Tensor:
        """[I/L ... I/L]: (D, L * D)."""
        eye = torch.eye(self.dim, device=self.proj.weight.device) / self.num_layers  # (D, D)
        return eye.repeat(1, self.num_layers)  # (D, L * D)

    def forward(self, layers: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(L, B, T, D), (B, T) -> (B, T, D')."""
        self._check(layers)
        h = normalize_layers(layers, mask, self.config.layer_norm)  # (L, B, T, D)
        w = self.proj.weight.to(h.dtype).view(self.output_dim, self.num_layers, self.dim)  # (D', L, D)
        return torch.einsum("lbtd,old->bto", h, w) + self.proj.bias.to(h.dtype)  # (B, T, D')

    def regularization(self) -> torch.Tensor:
        if not self.config.l2_coef:
            return torch.zeros((), device=module_device(self))
        dist = ((self.proj.weight - self._average_map()) ** 2).sum() + (self.proj.bias**2).sum()
        return self.config.l2_coef * dist

    def report(self) -> dict:
        w = self.proj.weight.detach().view(self.output_dim, self.num_layers, self.dim)  # (D', L, D)
        norms = w.pow(2).sum(dim=(0, 2)).sqrt()  # (L,) Frobenius norm of each layer's block
        return {"block_norms": _r(norms), "layer_weights": _r(norms / norms.sum())}

"""Variational (locked) dropout and a stacked BiLSTM that uses it between layers (``variational_dropout: true``).

Gal & Ghahramani (2016); as used for sequence tagging by Reimers & Gurevych (2017): one dropout mask per
sequence and feature, shared by all time steps, on the BiLSTM input, between layers and on its output.
(The recurrent connections themselves are not dropped: that would need a hand-written LSTM cell, far slower
on CPU than torch's fused one.)
"""
from __future__ import annotations

import torch
from torch import nn

from elmo_features.util.arguments import check_mask

from elmo_tasks.heads.base import BiLSTMEncoder, run_packed


class LockedDropout(nn.Module):
    """Dropout with one mask per sequence, the same at every time step: (B, T, D) -> (B, T, D)."""

    def __init__(self, p: float):
        super().__init__()
        self.p = float(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = torch.empty(x.shape[0], 1, x.shape[2], device=x.device, dtype=x.dtype).bernoulli_(1 - self.p)
        return x * keep / (1 - self.p)  # (B, 1, D) broadcast over T


class VariationalBiLSTMEncoder(nn.Module):
    """Locked dropout -> [BiLSTM layer -> locked dropout] x num_layers (packed). hidden_dim 0 = dropout only."""

    def __init__(self, input_dim: int, hidden_dim: int, num_layers: int = 1, dropout: float = 0.0):
        super().__init__()
        self.drop = LockedDropout(dropout)
        self.layers = nn.ModuleList()
        self.output_dim = input_dim
        if hidden_dim > 0:
            for i in range(num_layers):
                self.layers.append(nn.LSTM(input_dim if i == 0 else 2 * hidden_dim, hidden_dim, batch_first=True,
                                           bidirectional=True))
            self.output_dim = 2 * hidden_dim

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T, D), (B, T) -> (B, T, output_dim), zero at padding."""
        mask = check_mask(mask, "VariationalBiLSTMEncoder mask", prefix=True, shape=x.shape[:2])  # (B, T) bool, left-aligned
        x = self.drop(x)
        lengths = mask.sum(1)  # (B,)
        for lstm in self.layers:
            x = self.drop(run_packed(lstm, x, lengths))  # (B, T, 2H); a row of padding only: zeros
        return x * mask.unsqueeze(-1).to(x.dtype)


def make_encoder(input_dim: int, hidden_dim: int, num_layers: int, dropout: float, variational: bool) -> nn.Module:
    """The head's BiLSTM: the plain ``BiLSTMEncoder`` (unchanged default) or the variational one."""
    cls = VariationalBiLSTMEncoder if variational else BiLSTMEncoder
    return cls(input_dim, hidden_dim, num_layers, dropout)

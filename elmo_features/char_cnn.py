"""Context-independent token encoder: character embedding, CNN, highway layers, projection."""
from __future__ import annotations

import torch
from torch import nn
import torch.nn.functional as F

from .options import CharCNNOptions


class Highway(nn.Module):
    """Highway layers: y = g * x + (1 - g) * relu(W_h x), g = sigmoid(W_g x) (AllenNLP layout)."""

    def __init__(self, dim: int, n_layers: int):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, 2 * dim) for _ in range(n_layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (N, dim)
        for layer in self.layers:
            nonlinear, gate = layer(x).chunk(2, dim=-1)  # (N, dim) each
            gate = torch.sigmoid(gate)
            x = gate * x + (1 - gate) * F.relu(nonlinear)
        return x


class CharCNN(nn.Module):
    """Maps character ids (N, 50) of N real tokens to token embeddings (N, projection_dim)."""

    def __init__(self, opts: CharCNNOptions, projection_dim: int):
        super().__init__()
        self.opts = opts
        # row 0 is the padding character (always zero), as in AllenNLP
        self.char_embedding = nn.Embedding(opts.n_characters, opts.embedding_dim, padding_idx=0)
        self.convs = nn.ModuleList(
            nn.Conv1d(opts.embedding_dim, n, kernel_size=w, bias=True) for w, n in opts.filters
        )
        self.highway = Highway(opts.n_filters, opts.n_highway)
        self.projection = nn.Linear(opts.n_filters, projection_dim, bias=True)
        self._act = torch.tanh if opts.activation == "tanh" else F.relu

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        # char_ids: (N, C=50)
        x = self.char_embedding(char_ids).transpose(1, 2)  # (N, E, C)
        pooled = []
        for conv in self.convs:
            h = conv(x)  # (N, n_filters_w, C - w + 1)
            pooled.append(self._act(h.amax(dim=-1)))  # (N, n_filters_w)
        h = torch.cat(pooled, dim=-1)  # (N, F)
        h = self.highway(h)  # (N, F)
        return self.projection(h)  # (N, P)

    def flops_per_token(self) -> int:
        """Multiply-adds x 2 of one token through CNN, highway and projection."""
        C, E = self.opts.max_characters_per_token, self.opts.embedding_dim
        f = sum(2 * (C - w + 1) * w * E * n for w, n in self.opts.filters)
        nf = self.opts.n_filters
        f += self.opts.n_highway * 2 * nf * 2 * nf
        f += 2 * nf * self.projection.out_features
        return f

"""Context-independent token encoder: character embedding, CNN, highway layers, projection."""
from __future__ import annotations

import torch
from torch import nn
import torch.nn.functional as F

from elmo_features.model.onednn import PackedLinear, param_key
from elmo_features.model.options import CharCNNOptions
from elmo_features.model.precision import linear_for, precision_of
from elmo_features.model.token_vectors import TokenVectors


SERIAL_ELEMENTS = 32767  # below ATen's parallel grain size (32768): an elementwise op runs on one thread


def serial_sigmoid_(x: torch.Tensor) -> torch.Tensor:
    """``x.sigmoid_()`` on blocks of rows small enough for ATen to run each on one thread, so the result does not
    depend on the torch thread count. x: (N, D), in place. (With several threads ATen splits an elementwise op at
    arbitrary element positions, and the vectorised sigmoid rounds differently from the scalar one it uses for a
    split's leftover elements; on one thread every row is handled whole, as here.)"""
    rows = max(1, SERIAL_ELEMENTS // max(1, x.shape[-1]))
    for start in range(0, x.shape[0], rows):
        x[start:start + rows].sigmoid_()  # (rows, D)
    return x


class Highway(nn.Module):
    """Highway layers: y = g * x + (1 - g) * relu(W_h x), g = sigmoid(W_g x) (AllenNLP layout)."""

    def __init__(self, dim: int, n_layers: int):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, 2 * dim) for _ in range(n_layers))
        self._fast: tuple | None = None  # inference-only packed copies of the layers

    def _packed(self) -> list[PackedLinear]:
        key = param_key(self)
        if self._fast is None or self._fast[0] != key:
            self._fast = (key, [linear_for(self, layer.weight, layer.bias) for layer in self.layers])
        return self._fast[1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (N, dim)
        fast = not (torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in self.parameters())))
        fast = fast and precision_of(self) != "reference"  # reference: AllenNLP's operations (the autograd path's)
        for k, layer in enumerate(self.layers):
            nonlinear, gate = (self._packed()[k](x) if fast else layer(x)).chunk(2, dim=-1)  # (N, dim) each
            if fast:  # the same arithmetic in place: fewer large allocations
                serial_sigmoid_(gate)
                y = torch.mul(gate, x)
                y.add_(gate.neg_().add_(1.0).mul_(nonlinear.relu_()))
                x = y
            else:
                gate = torch.sigmoid(gate)
                x = gate * x + (1 - gate) * F.relu(nonlinear)
        return x


class CharCNN(nn.Module):
    """Maps character ids (N, 50) of N real tokens to token embeddings (N, projection_dim).

    Without autograd a faster, equivalent path runs (``_pooled_fast``): all filter widths in one
    matmul over character windows, and only the windows that can differ. A token's characters end
    in a run of one repeated id (the padding character), and every window lying inside that run
    gives the same convolution output, so one such window stands in for all of them in the max.
    """

    def __init__(self, opts: CharCNNOptions, projection_dim: int, vector_dim: int = 0):
        super().__init__()
        self.opts = opts
        self.vector_dim = vector_dim  # > 0: frozen word vectors are concatenated before the highway layers
        self.token_vectors: TokenVectors | None = None  # set by the weight loader or the trainer
        # row 0 is the padding character (always zero), as in AllenNLP
        self.char_embedding = nn.Embedding(opts.n_characters, opts.embedding_dim, padding_idx=0)
        self.convs = nn.ModuleList(
            nn.Conv1d(opts.embedding_dim, n, kernel_size=w, bias=True) for w, n in opts.filters
        )
        self.highway = Highway(opts.n_filters + vector_dim, opts.n_highway)
        self.projection = nn.Linear(opts.n_filters + vector_dim, projection_dim, bias=True)
        self._act = torch.tanh if opts.activation == "tanh" else F.relu
        self._fast_weights: tuple | None = None  # inference-only copies, see _window_weights
        self.group_size = 64  # inference path: tokens per window matmul

    def forward(self, char_ids: torch.Tensor, vector_rows: torch.Tensor | None = None) -> torch.Tensor:
        """(N, C=50) character ids -> (N, P). ``vector_rows`` (N,): known token-vector rows (training)."""
        if (torch.is_grad_enabled() and any(p.requires_grad for p in self.parameters())) or (
                precision_of(self) == "reference"):  # AllenNLP's operations: a conv1d per width, max, activation
            pooled = self._with_vectors(self._pooled_conv(char_ids), char_ids, vector_rows)  # (N, F [+ d])
            return self.projection(self.highway(pooled))  # (N, P)
        h = self.highway(self._with_vectors(self._pooled_fast(char_ids), char_ids, vector_rows))  # (N, F [+ d])
        return self._window_weights()[2](h)  # projection: (N, P)

    def _with_vectors(self, pooled: torch.Tensor, char_ids: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
        """Append the frozen word vectors (N, d) to the pooled CNN features (N, F) when configured."""
        if self.vector_dim == 0:
            return pooled
        if self.token_vectors is None:
            raise RuntimeError("this biLM's options declare token_vectors, but no vectors were loaded "
                               "(load it with load_bilm / load_weights_into)")
        return torch.cat([pooled, self.token_vectors(char_ids, rows).to(pooled.dtype)], dim=-1)  # (N, F + d)

    def _pooled_conv(self, char_ids: torch.Tensor) -> torch.Tensor:
        """Convolutions, max over positions, activation: (N, C) -> (N, F). Autograd-safe."""
        x = self.char_embedding(char_ids).transpose(1, 2)  # (N, E, C)
        pooled = []
        for conv in self.convs:
            h = conv(x)  # (N, n_filters_w, C - w + 1)
            pooled.append(self._act(h.amax(dim=-1)))  # (N, n_filters_w)
        return torch.cat(pooled, dim=-1)  # (N, F)

    def _window_weights(self) -> tuple[PackedLinear, torch.Tensor, PackedLinear]:
        """Inference copies: all conv filters as one linear map of a (w_max * E) window to F outputs
        (inputs past a filter's width get zero weights), the conv biases (F,), and the projection."""
        key = param_key(self.convs) + param_key(self.projection)
        if self._fast_weights is not None and self._fast_weights[0] == key:
            return self._fast_weights[1]
        E, w_max = self.opts.embedding_dim, max(w for w, _ in self.opts.filters)
        with torch.no_grad():
            W = self.convs[0].weight.new_zeros(self.opts.n_filters, w_max * E)  # (F, w_max * E)
            col = 0
            for conv in self.convs:
                n, _, w = conv.weight.shape  # (n, E, w)
                W[col : col + n, : w * E] = conv.weight.permute(0, 2, 1).reshape(n, w * E)  # input j*E+e = (offset j, dim e)
                col += n
            b = torch.cat([conv.bias for conv in self.convs])  # (F,)
            fast = (linear_for(self, W), b, linear_for(self, self.projection.weight, self.projection.bias))
        self._fast_weights = (key, fast)
        return fast

    def _pooled_fast(self, char_ids: torch.Tensor) -> torch.Tensor:
        """Same result as ``_pooled_conv`` without autograd: (N, C) -> (N, F).

        Tokens are sorted by k, the number of characters before their final run of one repeated id;
        a group of tokens evaluates window starts 0..min(k_max, C - w) only (start k_max is a window
        inside the run when it fits), as rows of one (n * n_pos, w_max * E) @ (w_max * E, F) matmul.
        """
        N, C = char_ids.shape
        E, Fn = self.opts.embedding_dim, self.opts.n_filters
        w_max = max(w for w, _ in self.opts.filters)
        windows, b, _ = self._window_weights()
        group = self.group_size
        out = b.new_empty(N, Fn)
        if N == 0:
            return out
        run = (char_ids == char_ids[:, -1:]).flip(1).cumprod(1).sum(1)  # (N,) length of the final run
        k_sorted, order = torch.sort(C - run)  # (N,)
        ids = F.pad(char_ids[order], (0, w_max - 1))  # (N, C + w_max - 1); id 0 embeds to zeros
        ks = k_sorted.tolist()
        Cp = C + w_max - 1
        for s in range(0, N, group):
            e = min(s + group, N)
            n, n_pos = e - s, min(ks[e - 1] + 1, C)
            emb = self.char_embedding(ids[s:e])  # (n, Cp, E)
            X = emb.as_strided((n, n_pos, w_max * E), (Cp * E, E, 1))  # windows (n, n_pos, w_max * E)
            Y = windows(X.reshape(n * n_pos, w_max * E)).view(n, n_pos, Fn)  # (n, n_pos, F)
            if n_pos <= C - w_max + 1:  # every start is valid for every width
                out[s:e] = Y.amax(dim=1)
            else:
                col = 0
                for w, nf in self.opts.filters:
                    out[s:e, col : col + nf] = Y[:, : min(n_pos, C - w + 1), col : col + nf].amax(dim=1)
                    col += nf
        out = self._act(out.add_(b))  # act(max_p y_p + b) = act(max_p (y_p + b))
        return out.index_select(0, torch.argsort(order))  # back to input order

    def flops_per_token(self) -> int:
        """Multiply-adds x 2 of one token through CNN, highway and projection."""
        C, E = self.opts.max_characters_per_token, self.opts.embedding_dim
        f = sum(2 * (C - w + 1) * w * E * n for w, n in self.opts.filters)
        nf = self.opts.n_filters + self.vector_dim
        f += self.opts.n_highway * 2 * nf * 2 * nf
        f += 2 * nf * self.projection.out_features
        return f

"""A Transformer biLM encoder (Peters et al. 2018, "Dissecting Contextual Word Embeddings").

Two separate stacks of pre-LayerNorm Transformer blocks: a forward stack with causal self-attention
(position t sees 0..t) and a backward stack with anti-causal self-attention (t sees t..n-1), so each
direction is a true language model. The backward stack runs as causal attention over the reversed
sentence, which is exactly anti-causal attention with positions counted from the sentence end (</S> is
its position 0, as <S> is the forward stack's). Positions are fixed sinusoids (Vaswani et al. 2017)
added to the token embedding; no position parameters.

Each direction's layer k output is the residual stream after block k (width P); the top layer goes
through a final LayerNorm (it feeds the softmax). Rows are left-aligned, so causal attention never
reaches padding. Only real tokens are computed (packed row by row); attention runs over each row's own
length (one call per distinct length in the batch), because the CPU kernel's result depends on the padded
length in the last bits; and without autograd the linear layers run through oneDNN with packed weights
(``onednn.py``), whose rows do not depend on how many rows are computed together (MKL's do, by ~1e-6). So a
sentence gets the same vectors in any batch.

Long sentences (docs/weights_format.md): a direction never attends over more than ``max_positions``
tokens. A longer sentence is cut, in each direction's reading order, into windows of W = max_positions
tokens starting every S = W - chunk_overlap tokens; each window runs on its own (positions 0..W-1), and
token t takes its vectors from the first window holding it, so it sees all its left (forward) or right
(backward) context up to W - 1 tokens and never fewer than chunk_overlap tokens. Time and memory grow
linearly with sentence length; the windows are processed ``max_tokens_per_call`` tokens at a time.
"""
from __future__ import annotations

import math

import torch
from torch import nn
import torch.nn.functional as F

from elmo_features.model.lstm import reverse_padded
from elmo_features.model.onednn import PackedLinear, param_key
from elmo_features.model.options import TransformerOptions
from elmo_features.model.precision import linear_for


def sinusoidal_positions(n: int, dim: int, device: torch.device) -> torch.Tensor:
    """(n, dim) position table: sin at even features, cos at odd ones, wavelengths up to 10000 * 2 pi."""
    pos = torch.arange(n, dtype=torch.float64, device=device).unsqueeze(1)  # (n, 1)
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim)
    angle = pos * freq  # (n, ceil(dim / 2))
    pe = torch.zeros(n, dim, dtype=torch.float64, device=device)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : dim // 2])
    return pe.float()


class RowLayout:
    """Where the real tokens of a padded (N, W) batch sit once packed row by row into (M, ...) rows.

    ``mask`` (N, W) marks real tokens (rows are left-aligned, ``lengths`` (N,) long); ``groups`` lists, per
    distinct row length n, (n, c rows, their packed positions (c * n,)); ``inverse`` maps the groups'
    concatenated order back to packed order.
    """

    def __init__(self, lengths: torch.Tensor, W: int):
        device = lengths.device
        self.mask = torch.arange(W, device=device).unsqueeze(0) < lengths.unsqueeze(1)  # (N, W)
        offsets = torch.cumsum(lengths, 0) - lengths  # (N,) first packed row of each batch row
        order = torch.argsort(lengths, stable=True)
        uniq, counts = torch.unique_consecutive(lengths[order], return_counts=True)
        self.groups, positions, start = [], [], 0
        for n, c in zip(uniq.tolist(), counts.tolist()):
            idx = order[start : start + c]
            start += c
            if n > 0:
                pos = (offsets[idx].unsqueeze(1) + torch.arange(n, device=device)).reshape(-1)  # (c * n,)
                self.groups.append((n, c, pos))
                positions.append(pos)
        self.inverse = torch.argsort(torch.cat(positions)) if positions else torch.zeros(0, dtype=torch.long,
                                                                                         device=device)


def causal_attention(qkv: torch.Tensor, layout: RowLayout, n_heads: int) -> torch.Tensor:
    """Causal multi-head SDPA over packed tokens: qkv (M, 3P) -> (M, P).

    One call per distinct row length, over exactly that length: the CPU kernel's result depends on the
    padded length in the last bits, so this keeps a sentence's vectors independent of its batch.
    """
    M, P3 = qkv.shape
    P, H = P3 // 3, n_heads
    parts = []
    for n, c, pos in layout.groups:
        q, k, v = qkv[pos].view(c, n, 3, H, P // H).permute(2, 0, 3, 1, 4)  # (c, H, n, P/H) each
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (c, H, n, P/H)
        parts.append(o.transpose(1, 2).reshape(c * n, P))
    return torch.cat(parts)[layout.inverse] if parts else qkv.new_zeros(0, P)  # (M, P) in packed order


class TransformerBlock(nn.Module):
    """Pre-LN block: x + Attn(LN(x)), then x + FF(LN(x)); causal multi-head attention, GELU feed-forward."""

    def __init__(self, dim: int, n_heads: int, ff_dim: int):
        super().__init__()
        self.n_heads = n_heads
        self._fast: tuple | None = None  # inference-only packed copies of the four linear layers
        self.ln_attn = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.ln_ff = nn.LayerNorm(dim)
        self.ff1 = nn.Linear(dim, ff_dim)
        self.ff2 = nn.Linear(ff_dim, dim)

    def forward(self, h: torch.Tensor, layout: RowLayout, dropout: float = 0.0) -> torch.Tensor:
        """h: (M, P) packed real tokens of the rows in ``layout`` -> (M, P)."""
        fast = not (torch.is_grad_enabled() and (h.requires_grad or any(p.requires_grad for p in self.parameters())))
        qkv, out, ff1, ff2 = self._packed() if fast else (self.qkv, self.out, self.ff1, self.ff2)
        a = out(causal_attention(qkv(self.ln_attn(h)), layout, self.n_heads))  # (M, P)
        h = h + F.dropout(a, dropout, self.training)
        f = ff2(F.gelu(ff1(self.ln_ff(h))))  # (M, P)
        return h + F.dropout(f, dropout, self.training)

    def _packed(self) -> tuple[PackedLinear, ...]:
        """oneDNN copies of qkv, out, ff1, ff2 (cached while the parameters are unchanged); no autograd."""
        key = param_key(self)
        if self._fast is None or self._fast[0] != key:
            self._fast = (key, tuple(linear_for(self, m.weight, m.bias) for m in (self.qkv, self.out, self.ff1, self.ff2)))
        return self._fast[1]


class CausalStack(nn.Module):
    """One direction: positions, n_layers blocks, a final LayerNorm on the top layer."""

    def __init__(self, opts: TransformerOptions):
        super().__init__()
        self.layers = nn.ModuleList(TransformerBlock(opts.dim, opts.n_heads, opts.ff_dim) for _ in range(opts.n_layers))
        self.norm = nn.LayerNorm(opts.dim)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor, dropout: float = 0.0) -> list[torch.Tensor]:
        """x: (N, W, P) token embeddings in reading order, lengths (N,) -> [layer outputs (N, W, P)] * n_layers.

        Only real tokens are computed (packed to (M, P)); outputs are zero at padding.
        """
        N, W, P = x.shape
        layout = RowLayout(lengths, W)
        h = (x + sinusoidal_positions(W, P, x.device))[layout.mask]  # (M, P)
        h = F.dropout(h, dropout, self.training)
        outs = []
        for block in self.layers:
            h = block(h, layout, dropout)
            outs.append(h)
        outs[-1] = self.norm(outs[-1])
        return [x.new_zeros(N, W, P).index_put((layout.mask,), o) for o in outs]  # (N, W, P) each


class TransformerBiEncoder(nn.Module):
    """Forward and backward causal stacks with ElmoLstm's call contract (stateless).

    ``forward(inputs (B, T, P), lengths (B,), initial_state=None, dropout=0.0)`` returns
    ([layer outputs (B, T, 2P) = [forward; backward], zeros at padding] * n_layers, None).
    """

    def __init__(self, opts: TransformerOptions):
        super().__init__()
        self.opts = opts
        self.max_tokens_per_call = 16384  # windows are run in groups of at most this many tokens
        self.forward_stack = CausalStack(opts)
        self.backward_stack = CausalStack(opts)

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor, initial_state=None,
                dropout: float = 0.0) -> tuple[list[torch.Tensor], None]:
        """inputs: (B, T, P) left-aligned, lengths: (B,) long. See the class docstring."""
        if initial_state is not None:
            raise ValueError("the transformer backbone is stateless: initial_state must be None")
        B, T, P = inputs.shape
        if T == 0 or self.opts.n_layers == 0:
            return [inputs.new_zeros(B, T, 2 * P) for _ in range(self.opts.n_layers)], None
        lengths = lengths.to(inputs.device)
        mask = (torch.arange(T, device=inputs.device).unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(-1)  # (B, T, 1)
        fwd = self._direction(self.forward_stack, inputs, lengths, dropout)  # [(B, T, P)]
        bwd = self._direction(self.backward_stack, reverse_padded(inputs, lengths), lengths, dropout)
        outputs = [torch.cat([f, reverse_padded(b, lengths)], dim=-1).masked_fill(~mask, 0.0)  # (B, T, 2P)
                   for f, b in zip(fwd, bwd)]
        return outputs, None

    def _direction(self, stack: CausalStack, x: torch.Tensor, lengths: torch.Tensor, dropout: float):
        """One direction over left-aligned x (B, T, P) in its reading order -> [(B, T, P)] * n_layers."""
        B, T, P = x.shape
        W = self.opts.max_positions
        if T <= W:
            return self._grouped(stack, x, lengths, dropout)
        S = W - self.opts.chunk_overlap
        K = 1 + math.ceil((T - W) / S)  # windows start at 0, S, 2S, ...; the last one reaches T
        xp = F.pad(x, (0, 0, 0, (K - 1) * S + W - T))  # (B, (K-1)S + W, P)
        win = xp.unfold(1, W, S).permute(0, 1, 3, 2)  # (B, K, W, P)
        k = torch.arange(K, device=x.device)
        need = (k == 0) | (lengths.unsqueeze(1) > W + (k - 1) * S)  # (B, K): window holds a token it serves
        slot = torch.zeros(B, K, dtype=torch.long, device=x.device)
        slot[need] = torch.arange(int(need.sum()), device=x.device)
        win_len = (lengths.unsqueeze(1) - k * S).clamp(0, W)  # (B, K) real tokens per window
        outs = self._grouped(stack, win[need], win_len[need], dropout)  # [(N_w, W, P)]
        t = torch.arange(T, device=x.device)
        kt = torch.where(t < W, 0, torch.div(t - W, S, rounding_mode="floor") + 1)  # (T,) first window holding t
        rows = slot[:, kt]  # (B, T)
        offs = (t - kt * S).unsqueeze(0).expand(B, T)  # (B, T)
        return [o[rows, offs] for o in outs]  # (B, T, P); padding positions read some window, masked later

    def _grouped(self, stack: CausalStack, x: torch.Tensor, lengths: torch.Tensor, dropout: float):
        """Run ``stack`` on x (N, W, P) with row lengths (N,), at most ``max_tokens_per_call`` tokens at a time."""
        N, W, _ = x.shape
        rows = max(1, self.max_tokens_per_call // W)
        if N <= rows:
            return stack(x, lengths, dropout)
        parts = [stack(x[i : i + rows], lengths[i : i + rows], dropout) for i in range(0, N, rows)]
        return [torch.cat(layer) for layer in zip(*parts)]

    def flops_per_token(self, context: float = 25.0) -> int:
        """Model FLOPs (2 x multiply-adds) per token, both directions, with ``context`` attended keys on average."""
        P, F_, L = self.opts.dim, self.opts.ff_dim, self.opts.n_layers
        per_layer = 2 * (4 * P * P + 2 * P * F_) + 2 * 2 * P * context
        return int(2 * L * per_layer)

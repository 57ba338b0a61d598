"""ELMo's bidirectional LSTM stack with projection, cell/projection clipping and residual layers.

Each layer holds a forward and a backward ``LstmCellWithProjection`` in AllenNLP's layout
(gate order input, forget, cell candidate, output). At run time both directions of a layer
advance together: one batched matmul per timestep for the recurrence, and the input
projections of all timesteps are computed up front in one matmul.
"""
from __future__ import annotations

import torch
from torch import nn

from .options import LstmOptions


class LstmCellWithProjection(nn.Module):
    """The parameters of one direction of one layer (AllenNLP names)."""

    def __init__(self, input_size: int, cell_size: int, hidden_size: int):
        super().__init__()
        self.input_size, self.cell_size, self.hidden_size = input_size, cell_size, hidden_size
        self.input_linearity = nn.Linear(input_size, 4 * cell_size, bias=False)
        self.state_linearity = nn.Linear(hidden_size, 4 * cell_size, bias=True)
        self.state_projection = nn.Linear(cell_size, hidden_size, bias=False)


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each row's first lengths[b] steps along dim 1, leaving padding in place.

    x: (B, T, ...), lengths: (B,) -> (B, T, ...)
    """
    B, T = x.shape[:2]
    t = torch.arange(T, device=x.device).unsqueeze(0)  # (1, T)
    ln = lengths.unsqueeze(1)  # (B, 1)
    idx = torch.where(t < ln, ln - 1 - t, t)  # (B, T)
    idx = idx.view(B, T, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, idx)


class ElmoLstm(nn.Module):
    """n_layers of (forward, backward) LSTMs with projection; returns every layer's output."""

    def __init__(self, input_size: int, opts: LstmOptions):
        super().__init__()
        self.opts = opts
        self.forward_layers = nn.ModuleList()
        self.backward_layers = nn.ModuleList()
        size = input_size
        for _ in range(opts.n_layers):
            self.forward_layers.append(LstmCellWithProjection(size, opts.dim, opts.projection_dim))
            self.backward_layers.append(LstmCellWithProjection(size, opts.dim, opts.projection_dim))
            size = opts.projection_dim

    def _stacked(self, k: int):
        f, b = self.forward_layers[k], self.backward_layers[k]
        w_in = torch.stack([f.input_linearity.weight.t(), b.input_linearity.weight.t()])  # (2, Din, 4C)
        w_state = torch.stack([f.state_linearity.weight.t(), b.state_linearity.weight.t()])  # (2, P, 4C)
        bias = torch.stack([f.state_linearity.bias, b.state_linearity.bias]).unsqueeze(1)  # (2, 1, 4C)
        w_proj = torch.stack([f.state_projection.weight.t(), b.state_projection.weight.t()])  # (2, C, P)
        return w_in, w_state, bias, w_proj

    def forward(
        self,
        inputs: torch.Tensor,
        lengths: torch.Tensor,
        initial_state: tuple[torch.Tensor, torch.Tensor] | None = None,
        dropout: float = 0.0,
    ) -> tuple[list[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
        """Run the stack.

        inputs: (B, T, Din) with zeros at padding; lengths: (B,) long, sequences are left-aligned.
        initial_state: (h, c) with h (n_layers, 2, B, P) and c (n_layers, 2, B, C), or None for zeros.
        dropout: applied to each layer's input when training (bilm-tf's input_keep_prob = 1 - dropout).
        Returns ([layer outputs (B, T, 2P)] * n_layers, final (h, c) of the same shapes as above).
        """
        B, T, _ = inputs.shape
        C, P = self.opts.dim, self.opts.projection_dim
        mask = (torch.arange(T, device=inputs.device).unsqueeze(0) < lengths.unsqueeze(1))  # (B, T)
        mask_f = mask.to(inputs.dtype)
        # direction inputs, each left-aligned in its own reading order: (2, B, T, Din)
        x = torch.stack([inputs, reverse_padded(inputs, lengths)])
        outputs, final_h, final_c = [], [], []
        for k in range(self.opts.n_layers):
            w_in, w_state, bias, w_proj = self._stacked(k)
            Din = x.shape[-1]
            x_in = torch.nn.functional.dropout(x, dropout, self.training) if dropout > 0 else x
            # all input projections in one matmul: (2, B*T, Din) @ (2, Din, 4C) -> (2, B, T, 4C)
            xproj = torch.baddbmm(bias, x_in.reshape(2, B * T, Din), w_in).view(2, B, T, 4 * C)
            if initial_state is None:
                h = inputs.new_zeros(2, B, P)
                c = inputs.new_zeros(2, B, C)
            else:
                h = initial_state[0][k].clone()
                c = initial_state[1][k].clone()
            steps = []
            for t in range(T):
                gates = torch.baddbmm(xproj[:, :, t], h, w_state)  # (2, B, 4C)
                i, f, g, o = gates.chunk(4, dim=-1)  # (2, B, C) each
                c_new = torch.sigmoid(i) * torch.tanh(g) + torch.sigmoid(f) * c
                if self.opts.cell_clip:
                    c_new = c_new.clamp(-self.opts.cell_clip, self.opts.cell_clip)
                h_new = torch.bmm(torch.sigmoid(o) * torch.tanh(c_new), w_proj)  # (2, B, P)
                if self.opts.proj_clip:
                    h_new = h_new.clamp(-self.opts.proj_clip, self.opts.proj_clip)
                m = mask[:, t].view(1, B, 1)
                if bool(m.all()):
                    c, h = c_new, h_new
                else:
                    c = torch.where(m, c_new, c)
                    h = torch.where(m, h_new, h)
                steps.append(h_new * mask_f[:, t].view(1, B, 1))
            out = torch.stack(steps, dim=2) if steps else inputs.new_zeros(2, B, 0, P)  # (2, B, T, P)
            if self.opts.use_skip_connections and k > 0:
                out = out + x
            x = out
            final_h.append(h)
            final_c.append(c)
            # back to reading order for the output: (B, T, 2P)
            outputs.append(torch.cat([out[0], reverse_padded(out[1], lengths)], dim=-1))
        return outputs, (torch.stack(final_h), torch.stack(final_c))

    def flops_per_token(self) -> int:
        """Multiply-adds x 2 per token per direction summed over layers and directions."""
        C, P = self.opts.dim, self.opts.projection_dim
        total = 0
        for layer in self.forward_layers:
            total += 2 * (2 * layer.input_size * 4 * C + 2 * P * 4 * C + 2 * C * P)
        return total

"""ELMo's bidirectional LSTM stack with projection, cell/projection clipping and residual layers.

Each layer holds a forward and a backward ``LstmCellWithProjection`` in AllenNLP's layout
(gate order input, forget, cell candidate, output). At run time both directions of a layer
advance together: one batched matmul per timestep for the recurrence, and the input
projections of all timesteps are computed up front in one matmul.

Without autograd (``torch.no_grad()`` / ``torch.inference_mode()``, or nothing requiring grad) a
faster path with the same arithmetic runs: rows sorted by length and packed time-major, so step t
touches only the rows still running and no padding is ever computed; gate math in place.
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
        self._fast_weights: dict[int, tuple] = {}  # inference-only copies, see _inference_weights
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
        if (dropout == 0.0 or not self.training) and not self._needs_autograd(inputs, initial_state):
            return self._forward_packed(inputs, lengths, initial_state)
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
            xs = xproj.unbind(dim=2)  # T x (2, B, 4C); unbind keeps autograd cheap (no per-step full-size grads)
            for t in range(T):
                gates = torch.baddbmm(xs[t], h, w_state)  # (2, B, 4C)
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

    def _needs_autograd(self, inputs, initial_state) -> bool:
        if not torch.is_grad_enabled():
            return False
        tensors = [inputs, *(initial_state or ())]
        return any(t.requires_grad for t in tensors) or any(p.requires_grad for p in self.parameters())

    def _inference_weights(self, k: int):
        """Stacked (forward, backward) weights of layer k with gates reordered to (i, f, o, g).

        Cached while the parameters are unchanged (same storage and version); never used with autograd.
        """
        f, b = self.forward_layers[k], self.backward_layers[k]
        params = [p for m in (f, b) for p in m.parameters()]
        key = tuple((p.data_ptr(), p._version) for p in params)
        hit = self._fast_weights.get(k)
        if hit is not None and hit[0] == key:
            return hit[1]
        C = self.opts.dim
        perm = torch.cat([torch.arange(0, 2 * C), torch.arange(3 * C, 4 * C), torch.arange(2 * C, 3 * C)])
        with torch.no_grad():
            w_in, w_state, bias, w_proj = self._stacked(k)
            w_in = w_in[:, :, perm].contiguous()  # (2, Din, 4C)
            w_state = w_state[:, :, perm].contiguous()  # (2, P, 4C)
            bias = bias[:, :, perm].contiguous()  # (2, 1, 4C)
            w_proj = w_proj.contiguous()  # (2, C, P)
        self._fast_weights[k] = (key, (w_in, w_state, bias, w_proj))
        return w_in, w_state, bias, w_proj

    def _forward_packed(self, inputs, lengths, initial_state):
        """Inference path of ``forward`` (same arguments and results, no autograd, no dropout)."""
        B, T, Din = inputs.shape
        C, P = self.opts.dim, self.opts.projection_dim
        dev = inputs.device
        lens_all = lengths.to(device="cpu", dtype=torch.long)
        order = torch.argsort(lens_all, descending=True, stable=True)  # sorted row -> original row
        lens = lens_all[order]  # (B,) descending
        T_eff = int(lens[0]) if B else 0
        counts = (lens.unsqueeze(0) > torch.arange(T_eff).unsqueeze(1)).sum(1)  # (T_eff,) rows running at t
        nb = counts.tolist()
        offs = [0] * (T_eff + 1)
        for t in range(T_eff):
            offs[t + 1] = offs[t] + nb[t]
        N = offs[-1]
        # packed row j = (step t, sorted row r): rows of step t are offs[t] .. offs[t] + nb[t] - 1
        t_of = torch.repeat_interleave(torch.arange(T_eff), counts)  # (N,)
        r_of = torch.arange(N) - torch.tensor(offs[:-1], dtype=torch.long)[t_of]  # (N,)
        row = order[r_of]  # (N,) original row
        src_f = (row * T + t_of).to(dev)  # flat (B*T) index read by the forward direction
        src_b = (row * T + lens_all[row] - 1 - t_of).to(dev)  # ... and by the backward direction
        flat = inputs.reshape(B * T, Din)
        x = torch.stack([flat.index_select(0, src_f), flat.index_select(0, src_b)])  # (2, N, Din)
        order_d = order.to(dev)
        last = torch.tensor([offs[n - 1] + r if n > 0 else -1 for r, n in enumerate(lens.tolist())], dtype=torch.long)
        ran = (lens > 0).to(dev)  # (B,) sorted rows that ran at least one step
        last_d = last.clamp(min=0).to(dev)
        cc, pc = self.opts.cell_clip, self.opts.proj_clip
        outputs, final_h, final_c = [], [], []
        for k in range(self.opts.n_layers):
            w_in, w_state, bias, w_proj = self._inference_weights(k)
            xproj = torch.baddbmm(bias, x, w_in)  # (2, N, 4C), gates (i, f, o, g)
            if initial_state is None:
                h0 = inputs.new_zeros(2, B, P)
                c = inputs.new_zeros(2, B, C)
            else:
                h0 = initial_state[0][k].index_select(1, order_d)  # (2, B, P) in sorted row order
                c = initial_state[1][k].index_select(1, order_d)  # (2, B, C), updated in place
            out = inputs.new_empty(2, N, P)
            h = h0
            for t in range(T_eff):
                n, o = nb[t], offs[t]
                gates = xproj[:, o : o + n]  # (2, n, 4C) view
                gates.baddbmm_(h[:, :n], w_state)
                gates[:, :, : 3 * C].sigmoid_()
                gates[:, :, 3 * C :].tanh_()
                ct = c[:, :n]  # (2, n, C)
                ct.mul_(gates[:, :, C : 2 * C]).addcmul_(gates[:, :, :C], gates[:, :, 3 * C :])  # f*c + i*g
                if cc:
                    ct.clamp_(-cc, cc)
                hc = torch.tanh(ct).mul_(gates[:, :, 2 * C : 3 * C])  # o * tanh(c)  (2, n, C)
                h = out[:, o : o + n]  # (2, n, P) view
                torch.bmm(hc, w_proj, out=h)
                if pc:
                    h.clamp_(-pc, pc)
            final_h.append(torch.where(ran.view(1, B, 1), out.index_select(1, last_d), h0))  # (2, B, P) sorted
            if self.opts.use_skip_connections and k > 0:
                out += x
            x = out
            final_c.append(c)
            res = inputs.new_zeros(B * T, 2, P)  # back to reading order and original rows: (B, T, 2P)
            res[src_f, 0] = out[0]
            res[src_b, 1] = out[1]
            outputs.append(res.view(B, T, 2 * P))
        inv = torch.empty_like(order_d)
        inv[order_d] = torch.arange(B, device=dev)
        fh = torch.stack(final_h).index_select(2, inv) if final_h else inputs.new_zeros(0, 2, B, P)
        fc = torch.stack(final_c).index_select(2, inv) if final_c else inputs.new_zeros(0, 2, B, C)
        return outputs, (fh, fc)

    def flops_per_token(self) -> int:
        """Multiply-adds x 2 per token per direction summed over layers and directions."""
        C, P = self.opts.dim, self.opts.projection_dim
        total = 0
        for layer in self.forward_layers:
            total += 2 * (2 * layer.input_size * 4 * C + 2 * P * 4 * C + 2 * C * P)
        return total

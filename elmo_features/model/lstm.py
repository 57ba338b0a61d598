"""ELMo's bidirectional LSTM stack with projection, cell/projection clipping and residual layers.

Each layer holds a forward and a backward ``LstmCellWithProjection`` in AllenNLP's layout
(gate order input, forget, cell candidate, output). At run time both directions of a layer
advance together: one batched matmul per timestep for the recurrence, and the input
projections of all timesteps are computed up front in one matmul.

Without autograd (``torch.no_grad()`` / ``torch.inference_mode()``, or nothing requiring grad) a
faster path with the same arithmetic runs (``_forward_packed``): rows sorted by length and packed
time-major, so step t touches only the rows still running and no padding is ever computed; matmuls
through oneDNN with pre-packed weights (``onednn.py``); gate math in place; with two or more
threads the forward and backward directions of a layer run at the same time on two workers.
"""
from __future__ import annotations

import ctypes
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from torch import nn

from elmo_features.model.onednn import PackedLinear, param_key
from elmo_features.model.options import LstmOptions
from elmo_features.model.precision import linear_for, precision_of
from elmo_features.model.reference_lstm import reference_forward


CHUNK_BYTES = 16 << 20  # see ElmoLstm.chunk_rows (measured: original preset +4% fp32, +8% bf16 on an Intel Xeon)


class LstmCellWithProjection(nn.Module):
    """The parameters of one direction of one layer (AllenNLP names)."""

    def __init__(self, input_size: int, cell_size: int, hidden_size: int):
        super().__init__()
        self.input_size, self.cell_size, self.hidden_size = input_size, cell_size, hidden_size
        self.input_linearity = nn.Linear(input_size, 4 * cell_size, bias=False)
        self.state_linearity = nn.Linear(hidden_size, 4 * cell_size, bias=True)
        self.state_projection = nn.Linear(cell_size, hidden_size, bias=False)


def _tanh_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """out = tanh(x) (no autograd). On CPU float32 NumPy's SIMD tanh is used: <1 ulp from exact like
    torch's, and an order of magnitude faster than torch.tanh on CPU for float32."""
    if x.device.type == "cpu" and x.dtype == torch.float32 and out.dtype == torch.float32:
        np.tanh(x.numpy(), out=out.numpy())
        return out
    return torch.tanh(x, out=out)


_POOL: tuple[int, ThreadPoolExecutor | None] | None = None
_POOL_LOCK = threading.Lock()


def _one_openmp_thread(libgomp) -> None:
    """Worker initializer: after torch's per-thread setup, limit this thread's OpenMP team to one thread."""
    torch.zeros(1 << 16).add_(1)  # a parallel op: runs torch's lazy per-thread thread-count setup first
    libgomp.omp_set_num_threads(1)


def _direction_pool() -> ThreadPoolExecutor | None:
    """Two worker threads whose ops use one OpenMP thread each, or None where that cannot be arranged
    (not Linux, torch not built on GNU OpenMP). Re-created after a fork."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != os.getpid():
            pool = None
            try:
                if "parallel backend: OpenMP" in torch.__config__.parallel_info():
                    with open("/proc/self/maps", encoding="utf-8") as f:
                        libs = re.findall(r"\S*/libgomp[^/\s]*\.so[.\d]*", f.read())
                    torch_dir = os.path.dirname(torch.__file__)
                    libs = sorted(set(libs), key=lambda p: not p.startswith(torch_dir))  # torch's own first:
                    if libs:  # another package's copy (e.g. scikit-learn's) may be mapped before it
                        gomp = ctypes.CDLL(libs[0])
                        pool = ThreadPoolExecutor(2, thread_name_prefix="elmo-lstm", initializer=_one_openmp_thread,
                                                  initargs=(gomp,))
                        if not all(f.result() == 1 for f in [pool.submit(torch.get_num_threads) for _ in range(4)]):
                            pool.shutdown(wait=False)
                            pool = None
            except (OSError, RuntimeError):
                pool = None
            _POOL = (os.getpid(), pool)
        return _POOL[1]


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


class _PackPlan:
    """Rows sorted by length (descending) and packed time-major, for the inference path.

    Packed row j is (step t, sorted row r) with rows of step t at offs[t] .. offs[t] + nb[t] - 1, so
    step t touches only the nb[t] rows still running. src_f / src_b give, for each packed row, the
    flat (B*T) position it reads in the forward / backward direction's reading order.
    """

    def __init__(self, lengths: torch.Tensor, T: int, device: torch.device):
        lens_all = lengths.to(device="cpu", dtype=torch.long)
        B = lens_all.shape[0]
        order = torch.argsort(lens_all, descending=True, stable=True)  # sorted row -> original row
        lens = lens_all[order]  # (B,) descending
        T_eff = int(lens[0]) if B else 0
        cpu = lens_all.device  # the bookkeeping is on the CPU (python ints); its results move to ``device``
        counts = (lens.unsqueeze(0) > torch.arange(T_eff, device=cpu).unsqueeze(1)).sum(1)  # (T_eff,)
        self.nb: list[int] = counts.tolist()
        self.offs: list[int] = [0] * (T_eff + 1)
        for t in range(T_eff):
            self.offs[t + 1] = self.offs[t] + self.nb[t]
        self.N = self.offs[-1]
        t_of = torch.repeat_interleave(torch.arange(T_eff, device=cpu), counts)  # (N,)
        r_of = torch.arange(self.N, device=cpu) - torch.tensor(self.offs[:-1], dtype=torch.long, device=cpu)[t_of]  # (N,)
        row = order[r_of]  # (N,) original row
        self.src_f = (row * T + t_of).to(device)
        self.src_b = (row * T + lens_all[row] - 1 - t_of).to(device)
        self.order = order.to(device)
        self.inverse_order = torch.argsort(order).to(device)
        last = [self.offs[n - 1] + r if n > 0 else 0 for r, n in enumerate(lens.tolist())]
        self.last = torch.tensor(last, dtype=torch.long, device=device)  # (B,) packed row of each row's last step
        self.ran = (lens > 0).to(device)  # (B,) sorted rows with at least one step


class ElmoLstm(nn.Module):
    """n_layers of (forward, backward) LSTMs with projection; returns every layer's output."""

    def __init__(self, input_size: int, opts: LstmOptions):
        super().__init__()
        self.opts = opts
        self._fast_weights: dict[int, tuple] = {}  # inference-only copies, see _inference_weights
        # inference path: rows per block of input projections, at most 512 and at most CHUNK_BYTES of fp32
        # projections, so that a block stays below glibc's largest mmap threshold (32 MB) and its memory is reused
        # from the heap instead of being mapped (and page-faulted) afresh for every block
        self.chunk_rows = max(64, min(512, CHUNK_BYTES // (4 * 4 * opts.dim)))
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
            if precision_of(self) == "reference":
                return reference_forward(self, inputs, lengths, initial_state)
            return self._forward_packed(inputs, lengths, initial_state)
        B, T, _ = inputs.shape
        C, P = self.opts.dim, self.opts.projection_dim
        mask = (torch.arange(T, device=inputs.device).unsqueeze(0) < lengths.unsqueeze(1))  # (B, T)
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
            out, h, c = self._steps(xproj, h, c, w_state, w_proj, mask)  # (2, B, T, P)
            if self.opts.use_skip_connections and k > 0:
                out = out + x
            x = out
            final_h.append(h)
            final_c.append(c)
            # back to reading order for the output: (B, T, 2P)
            outputs.append(torch.cat([out[0], reverse_padded(out[1], lengths)], dim=-1))
        return outputs, (torch.stack(final_h), torch.stack(final_c))

    def _steps(self, xproj: torch.Tensor, h: torch.Tensor, c: torch.Tensor, w_state: torch.Tensor,
               w_proj: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One layer's recurrence, both directions at once, under autograd. xproj: (2, B, T, 4C) input projections
        with bias; h (2, B, P), c (2, B, C): the start state; mask (B, T). Returns outputs (2, B, T, P), zero at
        padding, and the final (h, c)."""
        _, B, T, _ = xproj.shape
        mask_f = mask.to(xproj.dtype)
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
        out = torch.stack(steps, dim=2) if steps else xproj.new_zeros(2, B, 0, h.shape[-1])  # (2, B, T, P)
        return out, h, c

    def _needs_autograd(self, inputs, initial_state) -> bool:
        if not torch.is_grad_enabled():
            return False
        tensors = [inputs, *(initial_state or ())]
        return any(t.requires_grad for t in tensors) or any(p.requires_grad for p in self.parameters())

    def _inference_weights(self, k: int) -> list[tuple[PackedLinear, PackedLinear, PackedLinear]]:
        """Per direction of layer k: (input, state, projection) linears, gates reordered to (i, f, o, g).

        Cached while the parameters are unchanged (same storage and version); never used with autograd.
        """
        cells = (self.forward_layers[k], self.backward_layers[k])
        key = param_key(cells[0]) + param_key(cells[1])
        hit = self._fast_weights.get(k)
        if hit is not None and hit[0] == key:
            return hit[1]
        C = self.opts.dim
        dev = cells[0].input_linearity.weight.device
        perm = torch.cat([torch.arange(0, 2 * C, device=dev), torch.arange(3 * C, 4 * C, device=dev),
                          torch.arange(2 * C, 3 * C, device=dev)])  # (4C,)
        lins = []
        with torch.no_grad():
            for cell in cells:
                lins.append((
                    linear_for(self, cell.input_linearity.weight[perm], cell.state_linearity.bias[perm]),  # (4C, Din)
                    linear_for(self, cell.state_linearity.weight[perm]),  # (4C, P)
                    linear_for(self, cell.state_projection.weight),  # (P, C)
                ))
        self._fast_weights[k] = (key, lins)
        return lins

    def _forward_packed(self, inputs, lengths, initial_state):
        """Inference path of ``forward`` (same arguments and results, no autograd, no dropout)."""
        B, T, Din = inputs.shape
        C, P = self.opts.dim, self.opts.projection_dim
        plan = _PackPlan(lengths, T, inputs.device)
        flat = inputs.reshape(B * T, Din)
        x = torch.stack([flat.index_select(0, plan.src_f), flat.index_select(0, plan.src_b)])  # (2, N, Din)
        outputs, final_h, final_c = [], [], []
        for k in range(self.opts.n_layers):
            if initial_state is None:
                h0, c = inputs.new_zeros(2, B, P), inputs.new_zeros(2, B, C)
            else:  # sorted row order; c is updated in place
                h0, c = (s[k].index_select(1, plan.order) for s in initial_state)  # (2, B, P), (2, B, C)
            out = self._layer_packed(k, x, plan, h0, c, h0_is_zero=initial_state is None)  # (2, N, P)
            ran = plan.ran.view(1, B, 1)
            final_h.append(torch.where(ran, out.index_select(1, plan.last), h0))  # (2, B, P)
            final_c.append(c)
            if self.opts.use_skip_connections and k > 0:
                out += x
            x = out
            res = inputs.new_zeros(B * T, 2, P)  # back to reading order and original rows: (B, T, 2P)
            res[plan.src_f, 0] = out[0]
            res[plan.src_b, 1] = out[1]
            outputs.append(res.view(B, T, 2 * P))
        if not final_h:
            return outputs, (inputs.new_zeros(0, 2, B, P), inputs.new_zeros(0, 2, B, C))
        inv = plan.inverse_order
        return outputs, (torch.stack(final_h).index_select(2, inv), torch.stack(final_c).index_select(2, inv))

    def _layer_packed(self, k, x, plan, h0, c, h0_is_zero: bool = False):
        """One layer over packed inputs x (2, N, Din); h0 (2, B, P) initial, c (2, B, C) updated in place.

        Returns the packed outputs (2, N, P). With >= 2 intra-op threads on CPU the two directions run
        at the same time on two worker threads of one OpenMP thread each (no barriers between the
        many small per-step ops); otherwise one after the other. Same arithmetic either way.
        """
        out = x.new_empty(2, plan.N, self.opts.projection_dim)  # (2, N, P)
        jobs = [(lins, x[d], plan, h0[d], c[d], out[d], h0_is_zero) for d, lins in enumerate(self._inference_weights(k))]
        pool = _direction_pool() if x.device.type == "cpu" and torch.get_num_threads() >= 2 else None
        if pool is None:
            for job in jobs:
                self._direction_packed(*job)
        else:
            inference = torch.is_inference_mode_enabled()
            futures = [pool.submit(self._direction_in_worker, inference, job) for job in jobs]
            for f in futures:
                f.result()
        return out

    def _direction_in_worker(self, inference: bool, job) -> None:
        with torch.inference_mode(inference), torch.no_grad():  # grad modes are per thread
            self._direction_packed(*job)

    def _direction_packed(self, lins, x, plan, h, c, out, h0_is_zero):
        """One direction: x (N, Din) packed, h (B, P) initial, c (B, C) and out (N, P) written in place.

        Input projections are computed for a block of steps at a time (about ``chunk_rows`` rows).
        """
        lin_in, lin_state, lin_proj = lins
        C = self.opts.dim
        cc, pc = self.opts.cell_clip, self.opts.proj_clip
        nb, offs, T_eff = plan.nb, plan.offs, len(plan.nb)
        hc_buf = x.new_empty(c.shape)  # (B, C)
        rows = max(self.chunk_rows, nb[0] if nb else 0)
        t = 0
        while t < T_eff:
            t_end = t + 1
            while t_end < T_eff and offs[t_end + 1] - offs[t] <= rows:
                t_end += 1
            base = offs[t]
            xproj = lin_in(x[base : offs[t_end]])  # (rows, 4C) with bias; gates (i, f, o, g)
            for s in range(t, t_end):
                n, o = nb[s], offs[s]
                xs = xproj[o - base : o - base + n]  # (n, 4C)
                # h @ W_state is exactly zero on a zero initial state
                gates = xs if (s == 0 and h0_is_zero) else lin_state.add_to(h[:n], xs)  # (n, 4C)
                gates[:, : 3 * C].sigmoid_()
                g = _tanh_into(gates[:, 3 * C :], gates[:, 3 * C :])
                ct = c[:n]  # (n, C)
                ct.mul_(gates[:, C : 2 * C]).addcmul_(gates[:, :C], g)  # f*c + i*g
                if cc:
                    ct.clamp_(-cc, cc)
                hc = _tanh_into(ct, hc_buf[:n]).mul_(gates[:, 2 * C : 3 * C])  # o * tanh(c)  (n, C)
                h = out[o : o + n]  # (n, P) view
                if pc:
                    torch.clamp(lin_proj(hc), -pc, pc, out=h)
                else:
                    h.copy_(lin_proj(hc))
            t = t_end

    def flops_per_token(self) -> int:
        """Multiply-adds x 2 per token per direction summed over layers and directions."""
        C, P = self.opts.dim, self.opts.projection_dim
        total = 0
        for layer in self.forward_layers:
            total += 2 * (2 * layer.input_size * 4 * C + 2 * P * 4 * C + 2 * C * P)
        return total

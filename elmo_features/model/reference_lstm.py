"""``precision="reference"``: the biLSTM in the arithmetic of AllenNLP 2.10's ``ElmoLstm`` and
``LstmCellWithProjection``, operation for operation, for users who need AllenNLP's numbers on any CPU.

The default inference path (``ElmoLstm._forward_packed``) computes the same function faster, but in another
order of floating-point operations: the input projections of many timesteps in one matmul with the bias folded
in, the recurrent projection added by the GEMM, the cell update as one fused multiply-add, NumPy's tanh. Each
choice is exact to within an ulp, and on AVX-512 CPUs the layers agree with AllenNLP to a few 1e-6; on AVX2-only
CPUs the GEMM kernels differ more and the recurrence carries the differences along a long sentence (a few 1e-5
with active clipping). This path instead takes AllenNLP's steps exactly:

* rows sorted by length, longest first (``torch.sort``, as ``sort_batch_by_length``); at each timestep only the
  rows still running (the forward direction drops rows as they end, the backward one picks them up);
* per timestep and direction: ``input_linearity`` (no bias) and ``state_linearity`` (with the bias) as two
  ``F.linear`` calls on that timestep's rows, added gate by gate; ``i * g + f * c`` as separate products;
  clipping with ``torch.clamp``; ``state_projection`` as ``F.linear``; torch's sigmoid and tanh;
* the forward and backward directions one after the other, the residual added after each layer above the first.

It is several times slower than the default path, and used only without autograd.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def _cell(cell, inputs: torch.Tensor, batch_lengths: list[int], go_forward: bool,
          state: tuple[torch.Tensor, torch.Tensor] | None, clip_c: float | None,
          clip_p: float | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """AllenNLP's ``LstmCellWithProjection.forward`` (no dropout). inputs (B, T, Din) sorted by length;
    state (h (B, P), c (B, C)) or None. Returns (outputs (B, T, P), final h (B, P), final c (B, C))."""
    B, T = inputs.shape[:2]
    C, P = cell.cell_size, cell.hidden_size
    out = inputs.new_zeros(B, T, P)
    if state is None:
        memory, hidden = inputs.new_zeros(B, C), inputs.new_zeros(B, P)
    else:
        hidden, memory = state
    w_in, w_state, b_state = cell.input_linearity.weight, cell.state_linearity.weight, cell.state_linearity.bias
    w_proj = cell.state_projection.weight
    last = B - 1 if go_forward else 0
    for timestep in range(T):
        index = timestep if go_forward else T - timestep - 1
        if go_forward:
            while batch_lengths[last] <= index:
                last -= 1
        else:
            while last < B - 1 and batch_lengths[last + 1] > index:
                last += 1
        previous_memory = memory[0 : last + 1].clone()
        previous_state = hidden[0 : last + 1].clone()
        projected_input = F.linear(inputs[0 : last + 1, index], w_in)  # (n, 4C)
        projected_state = F.linear(previous_state, w_state, b_state)  # (n, 4C)
        input_gate = torch.sigmoid(projected_input[:, 0 * C : 1 * C] + projected_state[:, 0 * C : 1 * C])
        forget_gate = torch.sigmoid(projected_input[:, 1 * C : 2 * C] + projected_state[:, 1 * C : 2 * C])
        memory_init = torch.tanh(projected_input[:, 2 * C : 3 * C] + projected_state[:, 2 * C : 3 * C])
        output_gate = torch.sigmoid(projected_input[:, 3 * C : 4 * C] + projected_state[:, 3 * C : 4 * C])
        new_memory = input_gate * memory_init + forget_gate * previous_memory
        if clip_c:
            new_memory = torch.clamp(new_memory, -clip_c, clip_c)
        pre_projection = output_gate * torch.tanh(new_memory)  # (n, C)
        output = F.linear(pre_projection, w_proj)  # (n, P)
        if clip_p:
            output = torch.clamp(output, -clip_p, clip_p)
        memory = memory.clone()
        hidden = hidden.clone()
        memory[0 : last + 1] = new_memory
        hidden[0 : last + 1] = output
        out[0 : last + 1, index] = output
    return out, hidden, memory


def reference_forward(lstm, inputs: torch.Tensor, lengths: torch.Tensor,
                      initial_state: tuple[torch.Tensor, torch.Tensor] | None):
    """``ElmoLstm.forward`` in AllenNLP's arithmetic (module docstring): the same arguments and results.

    inputs (B, T, Din); lengths (B,); initial_state (h (L, 2, B, P), c (L, 2, B, C)) or None.
    Returns ([layer outputs (B, T, 2P)] * L, (h, c))."""
    B, T, _ = inputs.shape
    C, P, L = lstm.opts.dim, lstm.opts.projection_dim, lstm.opts.n_layers
    sorted_lengths, order = lengths.to("cpu").sort(0, descending=True)  # as AllenNLP's sort_batch_by_length
    valid = int((sorted_lengths > 0).sum())
    order = order.to(inputs.device)
    batch_lengths = sorted_lengths[:valid].tolist()
    T_run = batch_lengths[0] if valid else 0
    x = inputs.index_select(0, order[:valid])[:, :T_run]  # (V, T_run, Din), longest row first
    clips = (lstm.opts.cell_clip, lstm.opts.proj_clip)
    fwd_seq = bwd_seq = x
    outputs, hs, cs = [], [], []
    for k in range(L):
        fwd_cache, bwd_cache = fwd_seq, bwd_seq
        states = [None, None]
        if initial_state is not None:
            states = [(initial_state[0][k, d].index_select(0, order[:valid]),
                       initial_state[1][k, d].index_select(0, order[:valid])) for d in (0, 1)]
        fwd_seq, fh, fc = _cell(lstm.forward_layers[k], fwd_seq, batch_lengths, True, states[0], *clips)
        bwd_seq, bh, bc = _cell(lstm.backward_layers[k], bwd_seq, batch_lengths, False, states[1], *clips)
        if k != 0 and lstm.opts.use_skip_connections:
            fwd_seq = fwd_seq + fwd_cache
            bwd_seq = bwd_seq + bwd_cache
        layer = inputs.new_zeros(B, T, 2 * P)
        layer[order[:valid], :T_run] = torch.cat([fwd_seq, bwd_seq], -1)  # back to the original rows
        outputs.append(layer)
        h = inputs.new_zeros(2, B, P) if initial_state is None else initial_state[0][k].clone()
        c = inputs.new_zeros(2, B, C) if initial_state is None else initial_state[1][k].clone()
        h[0, order[:valid]], h[1, order[:valid]] = fh, bh
        c[0, order[:valid]], c[1, order[:valid]] = fc, bc
        hs.append(h)
        cs.append(c)
    if not hs:
        return outputs, (inputs.new_zeros(0, 2, B, P), inputs.new_zeros(0, 2, B, C))
    return outputs, (torch.stack(hs), torch.stack(cs))

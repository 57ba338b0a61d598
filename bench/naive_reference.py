"""A plain reference ELMo biLM: the straightforward PyTorch way, for speed comparison only.

Per direction, per timestep, over the whole padded batch (finished rows kept with torch.where),
the input projection inside the step, and the character CNN over every padded token position
(7 Conv1d calls). It reads the weights of an ``elmo_features.BiLM`` and returns the same layers
(L, B, T, D) without sentence boundaries.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from elmo_features import BiLM
from elmo_features.model.bilm import add_sentence_boundaries


class NaiveBiLM:
    """``NaiveBiLM(bilm)(char_ids (B, T, 50)) -> layers (L, B, T, D)``, stateless."""

    def __init__(self, bilm: BiLM):
        self.bilm = bilm
        self.opts = bilm.options

    def _token_embeddings(self, ids: torch.Tensor) -> torch.Tensor:
        """CNN over all positions, padding included: (B, T, 50) -> (B, T, P)."""
        cnn = self.bilm.char_cnn
        B, T, C = ids.shape
        x = cnn.char_embedding(ids.view(B * T, C)).transpose(1, 2)  # (B*T, E, 50)
        pooled = [F.relu(conv(x).max(dim=-1).values) for conv in cnn.convs]  # [(B*T, n_w)]
        h = torch.cat(pooled, dim=-1)  # (B*T, F)
        for layer in cnn.highway.layers:
            nonlinear, gate = layer(h).chunk(2, dim=-1)
            gate = torch.sigmoid(gate)
            h = gate * h + (1 - gate) * F.relu(nonlinear)
        return cnn.projection(h).view(B, T, -1)  # (B, T, P)

    def _direction(self, cell, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """One LSTM direction over left-aligned x (B, T, Din) -> (B, T, P)."""
        B, T, _ = x.shape
        o = self.opts.lstm
        h = x.new_zeros(B, o.projection_dim)
        c = x.new_zeros(B, o.dim)
        outs = []
        for t in range(T):
            gates = cell.input_linearity(x[:, t]) + cell.state_linearity(h)  # (B, 4C)
            i, f, g, og = gates.chunk(4, dim=-1)
            c_new = (torch.sigmoid(i) * torch.tanh(g) + torch.sigmoid(f) * c).clamp(-o.cell_clip, o.cell_clip)
            h_new = cell.state_projection(torch.sigmoid(og) * torch.tanh(c_new)).clamp(-o.proj_clip, o.proj_clip)
            m = mask[:, t : t + 1]  # (B, 1)
            c = torch.where(m, c_new, c)
            h = torch.where(m, h_new, h)
            outs.append(h_new * m)
        return torch.stack(outs, dim=1)  # (B, T, P)

    @staticmethod
    def _reverse(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Reverse each row's first lengths[b] steps: (B, T, D) -> (B, T, D)."""
        out = x.clone()
        for b, n in enumerate(lengths.tolist()):
            out[b, :n] = x[b, :n].flip(0)
        return out

    @torch.no_grad()
    def __call__(self, char_ids: torch.Tensor) -> torch.Tensor:
        B, T, _ = char_ids.shape
        mask = (char_ids > 0).any(dim=-1)  # (B, T)
        lengths = mask.sum(dim=1)
        ids = add_sentence_boundaries(char_ids, lengths)  # (B, T+2, 50)
        lb = lengths + 2
        mask_b = torch.arange(T + 2).unsqueeze(0) < lb.unsqueeze(1)  # (B, T+2)
        tok = self._token_embeddings(ids) * mask_b.unsqueeze(-1)  # (B, T+2, P)
        layers = [torch.cat([tok, tok], dim=-1)]
        xf, xb = tok, self._reverse(tok, lb)
        lstm = self.bilm.lstm
        for k in range(self.opts.lstm.n_layers):
            of = self._direction(lstm.forward_layers[k], xf, mask_b)
            ob = self._direction(lstm.backward_layers[k], xb, mask_b)
            if self.opts.lstm.use_skip_connections and k > 0:
                of, ob = of + xf, ob + xb
            layers.append(torch.cat([of, self._reverse(ob, lb)], dim=-1))
            xf, xb = of, ob
        out = torch.stack(layers)[:, :, 1 : T + 1]  # (L, B, T, D)
        return out * mask.view(1, B, T, 1)

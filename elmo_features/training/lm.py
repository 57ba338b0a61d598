"""The bidirectional language model used for training: a BiLM plus one softmax shared by both directions."""
from __future__ import annotations

import math

import torch
from torch import nn
import torch.nn.functional as F

from elmo_features.model.bilm import BiLM
from elmo_features.model.options import BiLMOptions


class BiLanguageModel(nn.Module):
    """Forward LM (position t predicts t+1) and backward LM (t predicts t-1) over one BiLM.

    Inputs are type ids (B, T) with <S> / </S> already in place (-1 = padding); ``type_chars`` is the
    (n_types, 50) character table and ``type_targets`` maps a type to its softmax id.
    """

    def __init__(self, options: BiLMOptions, vocab_size: int, dropout: float = 0.0):
        super().__init__()
        self.bilm = BiLM(options)
        P = options.projection_dim
        self.softmax_w = nn.Parameter(torch.randn(vocab_size, P) / math.sqrt(P))  # (V, P)
        self.softmax_b = nn.Parameter(torch.zeros(vocab_size))  # (V,)
        self.dropout = dropout
        # log-uniform (Zipf) candidate sampler over ids sorted by frequency
        k = torch.arange(vocab_size, dtype=torch.float64)
        self.register_buffer("log_uniform", ((torch.log(k + 2) - torch.log(k + 1)) / math.log(vocab_size + 1)).float(),
                             persistent=False)

    def hidden_states(self, type_ids: torch.Tensor, lengths: torch.Tensor, type_chars: torch.Tensor,
                      type_rows: torch.Tensor | None = None) -> torch.Tensor:
        """Top-layer outputs (B, T, 2P) for type ids (B, T); the CNN runs once per distinct type.
        ``type_rows`` (n_types,): each type's token-vector row, when the model has token vectors."""
        B, T = type_ids.shape
        valid = type_ids >= 0  # (B, T)
        uniq, inverse = torch.unique(type_ids[valid], return_inverse=True)  # (U,), (N,)
        rows = type_rows[uniq] if type_rows is not None else None  # (U,)
        emb = self.bilm.char_cnn(type_chars[uniq].long(), rows)  # (U, P)
        tok = emb.new_zeros(B, T, emb.shape[1])
        tok[valid] = emb[inverse]  # (B, T, P)
        outputs, _ = self.bilm.encoder(tok, lengths, dropout=self.dropout)
        top = outputs[-1]  # (B, T, 2P)
        return F.dropout(top, self.dropout, self.training) if self.dropout > 0 else top

    @staticmethod
    def prediction_pairs(top: torch.Tensor, targets: torch.Tensor, lengths: torch.Tensor):
        """Gather (hidden, target) pairs: forward (N_f, P), (N_f,) and backward (N_b, P), (N_b,)."""
        B, T, D = top.shape
        P = D // 2
        pos = torch.arange(T, device=top.device).unsqueeze(0)  # (1, T)
        src = pos < (lengths - 1).unsqueeze(1)  # positions 0..len-2 have a next token  (B, T)
        h_f = top[:, :-1, :P][src[:, :-1]]  # (N, P)
        y_f = targets[:, 1:][src[:, :-1]]  # (N,)
        h_b = top[:, 1:, P:][src[:, :-1]]  # positions 1..len-1 predict the token before
        y_b = targets[:, :-1][src[:, :-1]]
        return h_f, y_f, h_b, y_b

    def sampled_softmax_loss(self, h: torch.Tensor, y: torch.Tensor, n_samples: int, gen: torch.Generator,
                             denominator: float | None = None):
        """Mean sampled-softmax loss (log-uniform candidates, accidental hits removed). h (N, P), y (N,).
        ``denominator``: the sum over the N predictions divided by it instead (data-parallel slices)."""
        # softmax_w: (V, P)
        draws = torch.multinomial(self.log_uniform, n_samples, replacement=True, generator=gen)  # (S,)
        cand = torch.unique(draws)  # (S_u,)
        p = self.log_uniform[cand].double()
        log_q_cand = torch.log(-torch.expm1(n_samples * torch.log1p(-p))).float()  # expected count (S_u,)
        p_y = self.log_uniform[y].double()
        log_q_y = torch.log(-torch.expm1(n_samples * torch.log1p(-p_y))).float()  # (N,)
        true_logit = (h * self.softmax_w[y]).sum(-1) + self.softmax_b[y] - log_q_y  # (N,)
        cand_logit = h @ self.softmax_w[cand].t() + self.softmax_b[cand] - log_q_cand  # (N, S_u)
        cand_logit = cand_logit.masked_fill(cand.unsqueeze(0) == y.unsqueeze(1), float("-inf"))
        logits = torch.cat([true_logit.unsqueeze(1), cand_logit], dim=1)  # (N, 1 + S_u)
        losses = -F.log_softmax(logits, dim=1)[:, 0]  # (N,)
        return losses.mean() if denominator is None else losses.sum() / denominator

    def full_log_probs(self, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Exact log p(y | h) under the full softmax. h (N, P), y (N,) -> (N,)."""
        logits = h @ self.softmax_w.t() + self.softmax_b  # (N, V)
        return logits.gather(1, y.unsqueeze(1)).squeeze(1) - torch.logsumexp(logits, dim=1)

"""A linear-chain conditional random field: forward algorithm, gold-path score, constrained Viterbi.

The tag-scheme constraints (which tag may follow which, and which may start/end a sentence) are
``elmo_tasks.data.tag_schemes.allowed_transitions`` (as AllenNLP's, for BIO, IOB1 and BIOES), given to the CRF as
(i, j) pairs. They are applied when decoding (as AllenNLP does); training maximises the unconstrained
log-likelihood.
"""
from __future__ import annotations

import torch
from torch import nn

from elmo_features.util.arguments import check_mask
from elmo_features.util.errors import UsageError


class ConditionalRandomField(nn.Module):
    """Linear-chain CRF over K tags with start/end scores; emissions (B, T, K), mask (B, T) left-aligned."""

    def __init__(self, num_tags: int, constraints: list[tuple[int, int]] | None = None):
        super().__init__()
        K = num_tags
        self.num_tags = K
        self.transitions = nn.Parameter(torch.zeros(K, K))  # [from, to]
        self.start = nn.Parameter(torch.zeros(K))
        self.end = nn.Parameter(torch.zeros(K))
        allowed = torch.ones(K + 2, K + 2, dtype=torch.bool)  # (K+2, K+2) incl. START=K, END=K+1
        if constraints is not None:
            allowed.zero_()
            for i, j in constraints:
                allowed[i, j] = True
        self.register_buffer("allowed", allowed, persistent=False)

    def _check(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The mask as bool (B, T), once emissions (B, T, K) and mask are found to fit."""
        if emissions.dim() != 3 or emissions.shape[-1] != self.num_tags:
            raise ValueError(f"CRF expects emissions (B, T, {self.num_tags}) and mask (B, T); got emissions "
                             f"{tuple(emissions.shape)}")
        mask = check_mask(mask, "CRF mask", prefix=True, shape=emissions.shape[:2], like="the emissions'")  # (B, T)
        if emissions.shape[1] == 0 or not bool(mask[:, 0].all()):  # (T = 0: no first token to look at)
            raise ValueError("CRF: every sequence needs at least one token (mask[:, 0] must be true)")
        return mask

    def _check_tags(self, tags: torch.Tensor, mask: torch.Tensor) -> None:
        """``tags`` (B, T) are integer tag ids 0..K-1 where ``mask`` (B, T) bool is true (padding is never read);
        else a UsageError naming the first row and position out of range."""
        if not isinstance(tags, torch.Tensor) or tags.shape != mask.shape or tags.is_floating_point() \
                or tags.dtype == torch.bool:
            raise UsageError(f"CRF tags must be an integer tensor (B, T) like the mask {tuple(mask.shape)}; got "
                             f"{type(tags).__name__} {tuple(getattr(tags, 'shape', ()))} {getattr(tags, 'dtype', '')}")
        bad = mask & ((tags < 0) | (tags >= self.num_tags))  # (B, T)
        if bool(bad.any()):
            row, pos = (int(i) for i in bad.nonzero()[0])
            raise UsageError(f"CRF tags must be tag ids 0 to {self.num_tags - 1} (the CRF has {self.num_tags} tags) "
                             f"where the mask is true; row {row} holds {int(tags[row, pos])} at position {pos}")

    def log_partition(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log Z per sequence by the forward algorithm. (B, T, K), (B, T) -> (B,)."""
        mask = self._check(emissions, mask)
        alpha = self.start.unsqueeze(0) + emissions[:, 0]  # (B, K)
        for t in range(1, emissions.shape[1]):
            scores = alpha.unsqueeze(2) + self.transitions.unsqueeze(0) + emissions[:, t].unsqueeze(1)  # (B, K, K)
            nxt = torch.logsumexp(scores, dim=1)  # (B, K)
            alpha = torch.where(mask[:, t].unsqueeze(1), nxt, alpha)
        return torch.logsumexp(alpha + self.end.unsqueeze(0), dim=1)  # (B,)

    def path_score(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Unnormalised score of the given tag paths. (B, T, K), (B, T) long, (B, T) -> (B,). Tags where the mask
        is 0 are ignored (any padding value, e.g. -100)."""
        mask = self._check(emissions, mask)
        B, T, _ = emissions.shape
        self._check_tags(tags, mask)
        m = mask.to(emissions.dtype)  # (B, T)
        tags = torch.where(mask.bool(), tags, torch.zeros_like(tags))  # (B, T): padding (-100, -1) never read
        emit = emissions.gather(2, tags.unsqueeze(2)).squeeze(2)  # (B, T)
        score = self.start[tags[:, 0]] + (emit * m).sum(1)  # (B,)
        if T > 1:
            trans = self.transitions[tags[:, :-1], tags[:, 1:]]  # (B, T-1)
            score = score + (trans * m[:, 1:]).sum(1)
        last = tags.gather(1, (mask.sum(1) - 1).unsqueeze(1)).squeeze(1)  # (B,)
        return score + self.end[last]

    def neg_log_likelihood(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Sum over the batch of -log p(tags | emissions). -> scalar."""
        return (self.log_partition(emissions, mask) - self.path_score(emissions, tags, mask)).sum()

    def viterbi(self, emissions: torch.Tensor, mask: torch.Tensor, constrained: bool = True) -> list[list[int]]:
        """Best tag path per sequence (list of length n_i), obeying the constraints when ``constrained``."""
        mask = self._check(emissions, mask)
        with torch.no_grad():
            B, T, K = emissions.shape
            trans, start, end = self.transitions, self.start, self.end
            if constrained:
                neg = torch.tensor(float("-inf"), dtype=trans.dtype, device=trans.device)
                trans = torch.where(self.allowed[:K, :K], trans, neg)
                start = torch.where(self.allowed[K, :K], start, neg)
                end = torch.where(self.allowed[:K, K + 1], end, neg)
            score = start.unsqueeze(0) + emissions[:, 0]  # (B, K)
            backptr = []
            identity = torch.arange(K, device=emissions.device).expand(B, K)  # (B, K)
            for t in range(1, T):
                cand = score.unsqueeze(2) + trans.unsqueeze(0)  # (B, K, K) [b, from, to]
                best, idx = cand.max(dim=1)  # (B, K)
                on = mask[:, t].unsqueeze(1)  # (B, 1)
                score = torch.where(on, best + emissions[:, t], score)
                backptr.append(torch.where(on, idx, identity))
            final = score + end.unsqueeze(0)  # (B, K)
            last = final.argmax(dim=1)  # (B,)
            path = [last]
            for bp in reversed(backptr):
                last = bp.gather(1, last.unsqueeze(1)).squeeze(1)
                path.append(last)
            path = torch.stack(path[::-1], dim=1)  # (B, T)
            lengths = mask.sum(1).tolist()
            out = [path[b, : lengths[b]].tolist() for b in range(B)]
            if constrained:  # no allowed path at all (e.g. a label set with only I- tags): fall back
                dead = torch.isinf(final.max(dim=1).values).nonzero().flatten().tolist()
                if dead:
                    sub = self.viterbi(emissions[dead], mask[dead], constrained=False)
                    for b, p in zip(dead, sub):
                        out[b] = p
            return out

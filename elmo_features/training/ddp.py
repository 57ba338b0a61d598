"""Data-parallel ``train-bilm`` under torchrun: one deterministic global batch order, a slice per rank.

Every rank builds the same model (same seed) and the same batch list with ``batch_tokens x world_size``
tokens per global batch; rank r trains on ``batch[r::world_size]``. The loss of a rank is the *sum* of
its predictions' losses over the global prediction count, and gradients are summed over ranks (one
flattened all-reduce), so a step equals the single-process step on the whole global batch (the
sampled-softmax candidates come from a generator seeded alike on every rank). With dropout 0, W ranks
with ``batch_tokens`` b train like one process with W x b, up to float rounding.

Rank 0 alone writes checkpoints, the curve and exports; a checkpoint keeps every rank's RNG state so
a resume continues exactly. The decisions "checkpoint now" / "stop now" are taken together (one
all-reduce per step carries them with the loss and token counts).
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from elmo_features.util.distributed import collective


def slice_for_rank(idx, rank: int, world_size: int):
    """This rank's part of a global batch (every world_size-th sentence of the length-sorted batch)."""
    return idx[rank::world_size]


def reduce_step(n_predictions: float, loss_sum: float, tokens: int, save: bool, stop: bool) -> tuple[float, float, int, bool, bool]:
    """Sum (predictions, loss sum, tokens) over ranks; save/stop if any rank asks."""
    t = torch.tensor([n_predictions, loss_sum, float(tokens), float(save), float(stop)], dtype=torch.float64)
    with collective("train-bilm: a training step"):
        dist.all_reduce(t)
    return float(t[0]), float(t[1]), int(t[2]), bool(t[3] > 0), bool(t[4] > 0)


def count_predictions(n: int) -> int:
    """The global number of predictions of this step (the loss denominator)."""
    t = torch.tensor([float(n)], dtype=torch.float64)
    with collective("train-bilm: a training step"):
        dist.all_reduce(t)
    return int(t[0])


def allreduce_grads(params: list[torch.nn.Parameter]) -> None:
    """Sum the gradients over ranks (a parameter without a gradient on this rank counts as zeros)."""
    params = [p for p in params if p.requires_grad]
    if not params:
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])  # (total parameters,)
    with collective("train-bilm: a training step"):
        dist.all_reduce(flat)
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset : offset + n].view_as(p).clone()
        offset += n


def gather_rng_states() -> list[torch.Tensor] | None:
    """Every rank's torch RNG state on rank 0 (None elsewhere)."""
    states = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    with collective("train-bilm: saving the checkpoint"):
        dist.gather_object(torch.get_rng_state(), states, dst=0)
    return states


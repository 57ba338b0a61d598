"""Data-parallel head training (``elmo-tasks run`` under torchrun): a slice of every batch per rank.

Every rank builds the same model (same seed), holds the frozen features of every split and draws the
same deterministic batch order with ``batch_size x world_size`` sentences per global batch; rank r trains
on ``batch[r::world_size]``. A head's loss is a mean over its own units (tokens, sentences, targets:
``Head.loss_units``), so rank r scales its loss by its share of the global batch's units before the
backward pass, and one flattened all-reduce sums the gradients (with the loss): the step equals the
single-process step on the whole global batch. W ranks with ``batch_size`` b train like one process
with W x b (dropout 0: the same parameters up to float rounding).

Evaluation is split the same way (rank r predicts every W-th evaluation batch; the predictions are
gathered on every rank), so every rank computes the same dev metric and takes the same early-stopping
decision. Rank 0 alone writes the run folder. A lost rank makes the next collective fail (or time out
after ``ELMO_TASKS_DIST_TIMEOUT`` seconds): the error names the step, never a hang.
"""
from __future__ import annotations

import random
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from elmo_features.util import distributed as D


@dataclass
class DataParallel:
    """This rank's place in a data-parallel head training, and the few collectives it needs."""

    rank: int
    world_size: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, items: Sequence) -> list:
        """This rank's part: every world_size-th item from ``rank``."""
        return list(items[self.rank :: self.world_size])

    def seed_rank(self, seed: int) -> None:
        """Other dropout masks on other ranks (rank 0 keeps the single-process stream)."""
        if self.rank > 0:
            s = seed + 1_000_003 * self.rank
            random.seed(s)
            np.random.seed(s % 2**32)
            torch.manual_seed(s)

    def from_main(self, fn: Callable[[], Any]) -> Any:
        """Rank 0's ``fn()`` on every rank (e.g. the run folder); an error of rank 0 stops every rank."""
        value, error = None, None
        if self.is_main:
            try:
                value = fn()
            except Exception as e:
                error = e
        message = None if error is None else (" ".join(str(error).split()) or type(error).__name__)
        with D.collective("sharing rank 0's settings"):
            value, message = D.broadcast((value, message))
        if error is not None:
            raise error
        if message is not None:
            raise D.DistributedError(f"rank 0: {message}")
        return value

    def train_step(self, model, split, idx: Sequence[int], params: list[torch.nn.Parameter]) -> float:
        """Forward/backward this rank's slice of the global batch ``idx``; afterwards every rank's ``.grad``
        holds the global batch's mean-loss gradient. Returns the global batch's loss (as one process's)."""
        examples = [split.examples[i] for i in idx]
        total = model.head.loss_units(examples)  # the global denominator (every rank has every example)
        mine = self.shard(list(idx))
        scale = 0.0
        if mine:
            units = model.head.loss_units([split.examples[i] for i in mine])
            if total > 0:
                scale = units / total
            else:  # no unit in the whole batch (e.g. no learnable target): the regularizer alone, once
                scale = 1.0 / sum(1 for r in range(self.world_size) if len(idx) > r)
        value = 0.0
        if scale > 0:
            loss = model.loss(split, mine) * scale
            loss.backward()
            value = float(loss.detach())
        return self._allreduce(params, value)

    def _allreduce(self, params: list[torch.nn.Parameter], value: float) -> float:
        """Sum gradients (+ ``value``) over ranks in one flat all-reduce; a parameter no rank gave a gradient
        keeps ``grad = None`` (as in one process: the optimizer skips it)."""
        has = [p.grad is not None for p in params]
        parts = [p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel(), dtype=p.dtype, device=p.device)
                 for p in params]
        device = params[0].device if params else torch.device("cpu")
        extra = torch.tensor([float(h) for h in has] + [value], dtype=torch.float32, device=device)  # (P + 1,)
        flat = torch.cat(parts + [extra])  # (total parameters + P + 1,)
        with D.collective("a training step"):
            torch.distributed.all_reduce(flat)
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = flat[offset : offset + n].view_as(p).clone()
            offset += n
        for p, flag in zip(params, flat[offset : offset + len(params)].tolist()):
            if flag == 0:
                p.grad = None
        return float(flat[-1])

    def gather(self, part: dict[int, Any], n: int) -> list:
        """Every rank's ``{index: item}`` merged into one list of ``n`` items, on every rank."""
        parts: list = [None] * self.world_size
        with D.collective("gathering the predictions"):
            torch.distributed.all_gather_object(parts, part)
        out: list = [None] * n
        for p in parts:
            for i, item in p.items():
                out[i] = item
        return out

    @contextmanager
    def all_ok(self, name: str, what: str) -> Iterator[None]:
        """Run the block on every rank, then wait (without a deadline: it may be long) for every rank to
        finish it; a rank that failed is reported by every other rank."""
        try:
            yield
        except BaseException as e:
            D.post_status(name, self.rank, " ".join(str(e).split()) or type(e).__name__)
            raise
        D.post_status(name, self.rank, "ok")
        statuses = D.wait_statuses(name, self.world_size, what)
        failed = [f"rank {r}: {s}" for r, s in enumerate(statuses) if s != "ok"]
        if failed:
            raise D.DistributedError(f"{what} failed on {len(failed)} rank(s) ({'; '.join(failed)})")


def join() -> DataParallel:
    """Join the torchrun process group (``elmo_features.util.distributed.init``)."""
    d = D.init()
    return DataParallel(d.rank, d.world_size)

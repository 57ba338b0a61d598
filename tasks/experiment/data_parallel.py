"""Data-parallel head training (``elmo-tasks run`` under torchrun): a slice of every batch per rank.

Every rank builds the same model (same seed), holds the frozen features of every split and draws the
same deterministic batch order with ``batch_size x world_size`` sentences per global batch; rank r trains
on ``batch[r::world_size]``. A head's loss is a mean over its own units (tokens, sentences, targets:
``Head.loss_units``), so rank r scales its loss by its share of the global batch's units before the
backward pass, and one flattened all-reduce sums the gradients (with the loss): the step equals the
single-process step on the whole global batch. W ranks with ``batch_size`` b train like one process
with W x b (dropout 0: the same parameters up to float rounding). The slicing, the per-rank seed and the
all-reduce are ``elmo_features.util.distributed``'s, shared with ``train-bilm``.

Evaluation is split the same way (rank r predicts every W-th evaluation batch; the predictions are
gathered on every rank), so every rank computes the same dev metric and takes the same early-stopping
decision. Rank 0 alone writes the run folder. A lost rank makes the next collective fail (or time out
after ``ELMO_TASKS_DIST_TIMEOUT`` seconds): the error names the step, never a hang.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import torch

from elmo_features.util import distributed as D


class DataParallel(D.Dist):
    """This rank's place in a data-parallel head training (its slice: ``shard``, its seed: ``seed_rank``), and
    the few collectives it needs."""

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
        return D.allreduce_grads(params, "a training step", [value], flag_unused=True)[0]

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
    return DataParallel(d.rank, d.world_size, d.local_rank)

"""The one training loop: Adam (or SGD + momentum), batches of sentences, gradient clipping, an optional
learning-rate schedule (inverse-time decay per epoch, reduction on a dev plateau), early stopping on the dev metric.

Everything a run trains is in ``TaskModel`` = a feature source (frozen features + e.g. a trainable scalar
mix) and a head. Frozen features are precomputed per split (``Split``), so an epoch only runs the mix and
the head.
"""
from __future__ import annotations

import copy
import sys
import math
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from elmo_features.util import stop
from elmo_features.util.devices import module_device, move_to
from elmo_features.util.errors import DivergedError, ElmoTasksError, first_line

from elmo_tasks.experiment.config import TrainingConfig
from elmo_tasks.features.base import FeatureSource
from elmo_tasks.features.subset import dense_items
from elmo_tasks.heads.base import Head
from elmo_tasks.plugins import PluginError
from elmo_tasks.registry import plugins_used

if TYPE_CHECKING:  # under torchrun (elmo-tasks run): a slice of every batch per rank
    from elmo_tasks.experiment.data_parallel import DataParallel


@dataclass
class Split:
    """One data split: examples and their precomputed frozen features (same order)."""

    name: str
    examples: list
    features: list

    def __post_init__(self) -> None:
        if len(self.examples) != len(self.features):
            raise ValueError(f"split {self.name}: {len(self.examples)} examples but {len(self.features)} features")

    def __len__(self) -> int:
        return len(self.examples)


class TaskModel(nn.Module):
    """Feature source (its trainable part) + head. The frozen biLM is not a submodule."""

    def __init__(self, features: FeatureSource, head: Head):
        super().__init__()
        self.features = features
        self.head = head
        head.bind_features(features)  # e.g. a head's output_mix, shaped by the source's layers

    def inputs(self, split: Split, idx: list[int]) -> tuple[torch.Tensor, torch.Tensor, list, dict]:
        """Features x (B, T, D), mask (B, T), the examples of the batch ``idx`` and extra head inputs
        (``layers`` (L, B, T, D) when the head uses them, else nothing): call ``head.loss(x, mask, ex, **extra)``."""
        device = module_device(self)  # the batch goes where the model is (``model.to(device)``)
        examples = [split.examples[i] for i in idx]
        lengths = torch.tensor([len(ex.tokens) for ex in examples], device=device)  # (B,)
        T = int(lengths.max())
        mask = torch.arange(T, device=device).unsqueeze(0) < lengths.unsqueeze(1)  # (B, T)
        items = dense_items([split.features[i] for i in idx])  # token subsets (tasks/features/subset.py) made whole
        batch = move_to(self.features.collate(items, T), device)
        extra = {"layers": self.features.layers(batch)} if self.head.uses_layers else {}
        return self.features(batch, mask), mask, examples, extra

    def loss(self, split: Split, idx: list[int]) -> torch.Tensor:
        x, mask, examples, extra = self.inputs(split, idx)
        reg = self.features.regularization() + self.head.regularization()
        return self.head.loss(x, mask, examples, **extra) + reg


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and torch."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def make_batches(lengths: list[int], batch_size: int, rng: np.random.Generator | None = None) -> list[list[int]]:
    """Index batches. With ``rng``: shuffled, with similar lengths grouped (pools of 50 batches sorted by
    length) so little padding is computed; without: sorted by length (for evaluation)."""
    order = np.arange(len(lengths))
    if rng is None:
        order = sorted(order.tolist(), key=lambda i: (lengths[i], i))
        return [order[k : k + batch_size] for k in range(0, len(order), batch_size)]
    order = rng.permutation(order).tolist()
    pool = batch_size * 50
    batches = []
    for p in range(0, len(order), pool):
        chunk = sorted(order[p : p + pool], key=lambda i: lengths[i])
        batches += [chunk[k : k + batch_size] for k in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


@torch.no_grad()
def predict(model: TaskModel, split: Split, batch_size: int, progress: bool | None = None,
            dist: DataParallel | None = None) -> list:
    """The head's predictions for every example of ``split``, in input order. With ``dist``: each rank
    predicts every world_size-th batch (the same batches as one process) and every rank gets them all."""
    model.eval()
    out: list[Any] = [None] * len(split)
    batches = make_batches([len(ex.tokens) for ex in split.examples], batch_size)
    if dist is not None:
        batches = dist.shard(batches)
    desc = "predict" if split.name == "predict" else f"predict {split.name}"  # (predict's own input: once)
    for idx in tqdm(batches, desc=desc, leave=False, disable=_disable(progress)):
        stop.check()
        x, mask, examples, extra = model.inputs(split, idx)
        for i, p in zip(idx, model.head.predict(x, mask, examples, **extra)):
            out[i] = p
    if dist is not None:
        out = dist.gather({i: out[i] for idx in batches for i in idx}, len(split))
    return out


def evaluate(model: TaskModel, split: Split, batch_size: int, progress: bool | None = None,
             dist: DataParallel | None = None) -> tuple[dict, list]:
    """(metrics, predictions) on a split (with ``dist``: predicted by all ranks, the same on every rank)."""
    preds = predict(model, split, batch_size, progress, dist)
    scores = model.head.evaluate(split.examples, preds)
    bad = [k for k, v in scores.items() if isinstance(v, float) and not math.isfinite(v)]
    if bad:  # a score that is no number must not be reported (or chosen as best) as one
        raise ElmoTasksError(f"head {type(model.head).__name__}: its evaluate gave {bad[0]} {scores[bad[0]]} on "
                             f"{split.name}; a score must be a number: fix the head's evaluate")
    return scores, preds


@dataclass
class TrainResult:
    """What happened during training (the best state is loaded into the model at the end)."""

    best_epoch: int
    best_dev: dict
    history: list[dict] = field(default_factory=list)
    stopped_early: bool = False
    seconds: float = 0.0  # wall-clock seconds of training (incl. dev evaluations)
    cpu_seconds: float = 0.0  # CPU seconds of the process (all threads) over the same span


def _disable(progress: bool | None) -> bool | None:
    return None if progress is None else not progress  # None: tqdm decides (off when not a terminal)


class EarlyStopping:
    """The stopping rule and the learning-rate schedule's memory: the best dev score, epochs without improvement
    (stop after ``patience`` of them in a row), and the lr reductions (``lr_reduce_factor`` after
    ``lr_reduce_patience`` bad epochs in a row; the count restarts after each reduction)."""

    def __init__(self, cfg: TrainingConfig):
        self.cfg = cfg
        self.best_score = -float("inf")
        self.bad_epochs = 0
        self.since_reduce = 0
        self.lr_scale = 1.0  # product of the lr reductions so far

    def update(self, score: float | None) -> bool:
        """Record an epoch's dev score (None: no dev split, every epoch counts as an improvement); True if improved."""
        if score is None or score > self.best_score:
            if score is not None:
                self.best_score = score
            self.bad_epochs = self.since_reduce = 0
            return True
        self.bad_epochs += 1
        self.since_reduce += 1
        if self.since_reduce >= self.cfg.lr_reduce_patience:
            self.lr_scale, self.since_reduce = self.lr_scale * self.cfg.lr_reduce_factor, 0
        return False

    @property
    def should_stop(self) -> bool:
        return self.bad_epochs > self.cfg.patience


def train_step(model: TaskModel, split: Split, idx: list[int], opt: torch.optim.Optimizer, params: list,
               cfg: TrainingConfig, dist: DataParallel | None = None) -> float:
    """One optimizer step on the examples ``idx`` (under torchrun: this rank's slice, gradients summed over ranks);
    returns the batch's mean loss."""
    try:
        if dist is None:
            loss = model.loss(split, idx)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            value = float(loss.detach())
        else:
            opt.zero_grad(set_to_none=True)
            value = dist.train_step(model, split, idx, params)
    except RuntimeError as e:  # torch's shape errors inside a plugin head: one line naming it
        module = type(model.head).__module__ or "?"
        if module == "elmo_tasks" or module.startswith("elmo_tasks.") or isinstance(e, ElmoTasksError):
            raise
        raise PluginError(f"plugin module {module}: head {type(model.head).__name__} failed computing the loss "
                          f"({first_line(e)}); check the shapes its logits and loss return; this is a bug in the "
                          "plugin: rerun with --debug for the traceback") from e
    if not math.isfinite(value):
        head = type(model.head)
        cause = ("the batch's input features hold NaN/Inf values (a damaged feature cache or vectors file?)"
                 if _has_nonfinite(dense_items([split.features[i] for i in idx]))
                 else _after_updates(cfg.lr) if getattr(opt, "steps_taken", 0)
                 else f"before any update, on finite features: {_loss_makers(head)} compute(s) it; check "
                      "its forward, logits and loss")
        raise DivergedError(f"training diverged: the loss is {value} ({cause}); the run stopped and is not finished")
    if cfg.grad_clip is not None:
        nn.utils.clip_grad_norm_(params, cfg.grad_clip)
    opt.step()
    opt.steps_taken = getattr(opt, "steps_taken", 0) + 1  # (a NaN before the first step is not the lr's doing)
    return value


def _after_updates(lr: float) -> str:
    """The cause named for a NaN after some updates: the learning rate, and the plugin components in play (their
    code may be what turned the values NaN)."""
    plugins = plugins_used()
    return f"training.lr {lr:g} may be too large" + (f", or a plugin component made it: {', '.join(plugins)}; "
                                                      "check its forward" if plugins else "")


def _loss_makers(head: type) -> str:
    """The components between the frozen features and the loss: the plugin ones looked up by this command (a fusion,
    a mix), then the head."""
    plugins = [p for p in plugins_used() if f"({head.__module__})" not in p]
    return ", ".join([*plugins, f"the head {head.__name__} (module {head.__module__})"])


def _has_nonfinite(value: Any) -> bool:
    """Whether a feature item (array, tensor, or a dict/list/tuple of them) holds a NaN/Inf float."""
    if isinstance(value, torch.Tensor):
        return value.is_floating_point() and not bool(torch.isfinite(value).all())
    if isinstance(value, np.ndarray):
        return value.dtype.kind == "f" and not bool(np.isfinite(value).all())
    if isinstance(value, dict):
        return any(_has_nonfinite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_nonfinite(v) for v in value)
    return False


def check_finite_parameters(model: nn.Module, epoch: int, cfg: TrainingConfig) -> None:
    """NaN/Inf in a trainable parameter after an epoch (a last step that blew up): DivergedError."""
    bad = [n for n, p in model.named_parameters() if p.requires_grad and not torch.isfinite(p).all()]
    if bad:
        raise DivergedError(f"training diverged in epoch {epoch}: parameter(s) {', '.join(bad[:3])} hold NaN/Inf "
                            f"(training.lr {cfg.lr:g} may be too large); the run stopped and is not finished")


STILL = 1e-12  # an epoch that moves no parameter by more than this learns nothing (an Adam step is ~lr)


def warn_if_unchanged(before: list[torch.Tensor], params: list, record: dict, cfg: TrainingConfig,
                      lr: float) -> bool:
    """One warning line when no trainable parameter moved by more than ``STILL`` in an epoch whose loss is not ~0
    (steps too small to learn anything: e.g. a tiny grad_clip); returns whether it was printed."""
    if not params or record["train_loss"] < 1e-4 or any(
            not torch.allclose(a, p.detach(), rtol=0.0, atol=STILL) for a, p in zip(before, params)):
        return False
    clip = f"training.grad_clip {cfg.grad_clip:g}" if cfg.grad_clip is not None else "training.grad_clip null"
    print(f"warning: epoch {record['epoch']}: no trainable parameter moved by more than {STILL:g} (train loss "
          f"{record['train_loss']:.4f}): nothing is being learned; the steps are too small ({clip}, training.lr "
          f"{lr:g}): raise grad_clip or lr", file=sys.stderr, flush=True)
    return True


def _warn_inert(cfg: TrainingConfig, has_dev: bool) -> None:
    """Settings that act on nothing here (dev-score rules in a run without a dev set; a reduction patience with no
    reduction) are said to do nothing."""
    defaults = TrainingConfig()
    inert = []
    if not has_dev and cfg.lr_reduce_factor < 1:
        inert.append(f"training.lr_reduce_factor {cfg.lr_reduce_factor} lowers the rate when the dev score stops "
                     "improving, and this run has no dev set")
    if not has_dev and cfg.patience != defaults.patience:
        inert.append(f"training.patience {cfg.patience} counts epochs without dev improvement, and this run has no "
                     "dev set")
    if cfg.lr_reduce_factor == 1 and cfg.lr_reduce_patience != defaults.lr_reduce_patience:
        inert.append(f"training.lr_reduce_patience {cfg.lr_reduce_patience} waits before a reduction, and "
                     "lr_reduce_factor is 1 (none)")
    for what in inert:
        print(f"warning: {what}: it has no effect", file=sys.stderr)


def train(model: TaskModel, train_split: Split, dev_split: Split | None, cfg: TrainingConfig,
          progress: bool | None = None, on_improve: Callable[[int, dict], None] | None = None,
          dist: DataParallel | None = None) -> TrainResult:
    """Train ``model`` in place; keep the state with the best dev ``head.primary_metric`` (the last one
    without a dev split). ``on_improve(epoch, dev_metrics)`` is called after each improvement (checkpoint).

    With ``dist`` (torchrun, ``elmo_tasks.experiment.data_parallel``): ``cfg.batch_size`` is per rank; every rank trains on
    its slice of each global batch and takes the same steps and decisions; only rank 0 logs."""
    if len(train_split) == 0:
        raise ValueError("no training examples")
    set_seed(cfg.seed)
    main = dist is None or dist.is_main
    if main:
        _warn_inert(cfg, dev_split is not None)
    if dist is not None:
        dist.seed_rank(cfg.seed)
        progress = progress if main else False
    rng = np.random.default_rng(cfg.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(params, cfg)
    stopping = EarlyStopping(cfg)
    metric = model.head.primary_metric
    lengths = [len(ex.tokens) for ex in train_split.examples]
    best_state = None
    result = TrainResult(best_epoch=0, best_dev={})
    warned = False  # the "no parameter changed" warning is printed once
    t0, c0 = time.perf_counter(), time.process_time()
    for epoch in range(1, cfg.max_epochs + 1):
        lr = epoch_lr(cfg, epoch, stopping.lr_scale)
        if lr != cfg.lr:
            for group in opt.param_groups:
                group["lr"] = lr
        before = [p.detach().clone() for p in params] if main and not warned else None
        record = _train_epoch(model, train_split, lengths, rng, opt, params, cfg, dist, epoch, progress)
        if lr != cfg.lr:
            record["lr"] = lr
        dev: dict = {}
        if dev_split is not None and len(dev_split):  # the dev evaluation, then the stopping rule
            td = time.perf_counter()
            dev, _ = evaluate(model, dev_split, cfg.eval_batch_size, progress, dist)
            record["dev"] = dev
            record["dev_seconds"] = round(time.perf_counter() - td, 2)
        result.history.append(record)
        if main:
            _log(record, metric)
        if before is not None:
            warned = warn_if_unchanged(before, params, record, cfg, lr)
        if stopping.update(dev[metric] if dev else None):
            best_state = copy.deepcopy(model.state_dict())
            result.best_epoch, result.best_dev = epoch, dev
            if on_improve is not None:
                on_improve(epoch, dev)
        elif stopping.should_stop:
            result.stopped_early = True
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    result.seconds = round(time.perf_counter() - t0, 2)
    result.cpu_seconds = round(time.process_time() - c0, 2)
    return result


def _train_epoch(model: TaskModel, train_split: Split, lengths: list[int], rng: np.random.Generator,
                 opt: torch.optim.Optimizer, params: list, cfg: TrainingConfig, dist: DataParallel | None, epoch: int,
                 progress: bool | None) -> dict:
    """One pass over the training data (global batches of ``batch_size`` per rank); returns the epoch's record."""
    world = 1 if dist is None else dist.world_size
    model.train()
    te, ce = time.perf_counter(), time.process_time()
    total, n = 0.0, 0
    bar = tqdm(make_batches(lengths, cfg.batch_size * world, rng), desc=f"epoch {epoch}", leave=False,
               disable=_disable(progress))
    for idx in bar:
        stop.check()  # a stop request whose KeyboardInterrupt was swallowed (elmo_features.util.stop)
        total += train_step(model, train_split, idx, opt, params, cfg, dist) * len(idx)
        n += len(idx)
        bar.set_postfix(loss=f"{total / n:.4f}")
    check_finite_parameters(model, epoch, cfg)
    return {"epoch": epoch, "train_loss": total / n, "train_seconds": round(time.perf_counter() - te, 2),
            "train_cpu_seconds": round(time.process_time() - ce, 2)}


def make_optimizer(params: list, cfg: TrainingConfig) -> torch.optim.Optimizer:
    """Adam (the default) or SGD with optional momentum, at ``cfg.lr``."""
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)


def epoch_lr(cfg: TrainingConfig, epoch: int, scale: float = 1.0) -> float:
    """The learning rate of ``epoch`` (1-based): lr * scale / (1 + lr_decay * (epoch - 1)); ``scale`` is the
    product of the plateau reductions (``lr_reduce_factor``) so far."""
    return cfg.lr * scale / (1.0 + cfg.lr_decay * (epoch - 1))


def _log(record: dict, metric: str) -> None:
    dev = record.get("dev")
    extra = f" dev {metric} {dev[metric]:.4f}" if dev else ""
    lr = f" lr {record['lr']:.3g}" if "lr" in record else ""
    tqdm.write(f"epoch {record['epoch']}: train loss {record['train_loss']:.4f}{extra} "
               f"({record['train_seconds']:.1f}s train, {record['train_cpu_seconds']:.1f} CPU s{lr})")

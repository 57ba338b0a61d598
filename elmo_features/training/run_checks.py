"""Checks that keep ``train-bilm`` and ``eval-bilm`` from ending normally with a meaningless model or number: a
learning-rate warm-up longer than the run (checked before any training step) and a perplexity that is not finite
(held-out, ``eval-bilm``, or on training sentences when a run without held-out text is exported)."""
from __future__ import annotations

import math
import sys

import numpy as np
import torch

from elmo_features.training.data import batches_for_epoch
from elmo_features.training.evaluate import perplexity
from elmo_features.util.errors import ConfigError

PERPLEXITIES = ("forward", "backward", "mean", "forward_no_unk", "backward_no_unk")  # (``evaluate.perplexity``)


def run_steps(cfg, lengths: np.ndarray, world: int = 1) -> tuple[int, float]:
    """(optimiser steps of the whole run, real tokens per step), estimated from the first epoch's batches of the
    corpus (``lengths``: tokens per sentence; ``world``: processes sharing a global batch)."""
    batches = batches_for_epoch(lengths, cfg.batch_tokens * world, cfg.seed, 0)
    per_step = float(lengths.sum()) / max(1, len(batches))
    return max(1, math.ceil(cfg.max_train_tokens / per_step)), per_step


SHORT_PIECES = 5  # a max_sentence_length below it leaves the LSTMs next to no context
MANY_EPOCHS = 1000  # more passes over the corpus than this: a warning (the corpus is far too small for the run)


def check_warmup(cfg, lengths: np.ndarray, world: int = 1, warn: bool = True) -> None:
    """Refuse a warm-up so long that the learning rate never reaches half its peak (``ConfigError`` naming
    warmup_steps); one warning line when it never reaches its peak. Also the other step counts measured against
    the run (``check_steps``), and a warning when ``max_sentence_length`` leaves next to no context."""
    check_steps(cfg, lengths, world)
    epochs = cfg.max_train_tokens / max(1, int(lengths.sum()))
    if warn and epochs > MANY_EPOCHS:
        print(f"warning: the training corpus has {int(lengths.sum()):,} tokens: max_train_tokens "
              f"{cfg.max_train_tokens:,} goes over it about {epochs:,.0f} times; a biLM trained that long on so little "
              "text learns it by heart: give more text, or lower max_train_tokens", file=sys.stderr)
    if warn and cfg.max_sentence_length < SHORT_PIECES:
        print(f"warning: max_sentence_length {cfg.max_sentence_length}: sentences are cut into pieces of that many "
              "tokens, so each prediction sees at most that much context (a biLM is usually trained on 20 to 100)",
              file=sys.stderr)
    if cfg.warmup_steps <= 1:
        return
    steps, per_step = run_steps(cfg, lengths, world)
    if cfg.warmup_steps <= steps:
        return
    peak = steps / cfg.warmup_steps  # the largest fraction of lr the linear warm-up reaches
    run = (f"warmup_steps {cfg.warmup_steps} is longer than the whole run (about {steps} steps: max_train_tokens "
           f"{cfg.max_train_tokens} at about {per_step:.0f} tokens per step)")
    if peak < 0.5:
        raise ConfigError(f"{run}: the learning rate would never exceed {peak:.2g} x lr and the model would learn next "
                          f"to nothing; lower warmup_steps (at most {steps}; a tenth of the run is usual) or raise "
                          "max_train_tokens")
    if warn:
        print(f"warning: {run}: the learning rate peaks at {peak:.0%} of lr", file=sys.stderr)


def check_steps(cfg, lengths: np.ndarray, world: int = 1) -> None:
    """Refuse an ``init_freeze_steps`` that keeps the biLM frozen for the whole run (only the softmax would learn),
    and a ``skip_batches`` at or beyond the first epoch's batches (``ConfigError`` naming the key)."""
    if cfg.skip_batches:
        n = len(batches_for_epoch(lengths, cfg.batch_tokens * world, cfg.seed, 0))
        if cfg.skip_batches >= n:
            raise ConfigError(f"skip_batches {cfg.skip_batches} is at or beyond the {n} batches of an epoch of this "
                              f"corpus: epoch 0 would train on nothing; give fewer than {n} (the batches the "
                              "init_from model already saw of this corpus)")
    if not cfg.init_freeze_steps:
        return
    steps, per_step = run_steps(cfg, lengths, world)
    if cfg.init_freeze_steps >= steps:
        raise ConfigError(f"init_freeze_steps {cfg.init_freeze_steps} is longer than the whole run (about {steps} "
                          f"steps: max_train_tokens {cfg.max_train_tokens} at about {per_step:.0f} tokens per step): "
                          "the biLM would stay frozen and only the softmax would learn; lower init_freeze_steps "
                          f"(below {steps}) or raise max_train_tokens")


def not_finite(ppl: dict) -> str | None:
    """What is wrong with a perplexity result (``evaluate.perplexity``): the first of forward, backward, mean that
    is infinite or NaN, as ``"the forward perplexity is inf"`` (``"the forward_no_unk perplexity ..."``); None when
    all are finite."""
    for name in PERPLEXITIES:
        if not math.isfinite(ppl[name]):
            return f"the {name} perplexity is {ppl[name]}"
    return None


def sample_problem(model, corpus, vocab: list[str], cfg) -> str | None:
    """Without a held-out file, what is wrong with a finished model's full-softmax perplexity on its first
    ``eval_sentences`` training sentences (a model can diverge with a finite sampled loss); None when it is finite."""
    n = min(cfg.eval_sentences, len(corpus.sentences))
    problem = not_finite(perplexity(model, [[corpus.types[i] for i in s] for s in corpus.sentences[:n]], vocab))
    return problem and f"{problem} on {n} training sentences"


STILL = 1e-12  # a parameter that moved by no more than this between two evaluations did not move


def still_since(model, snapshot: list | None, cfg, tokens: int) -> tuple[list, bool]:
    """The parameters now (a copy: the next call's ``snapshot``), and whether none moved by more than ``STILL`` since
    ``snapshot`` (then one warning line: the steps are too small to learn anything, e.g. a tiny clip_norm)."""
    now = [p.detach().clone() for p in model.parameters()]
    if snapshot is None or any(not torch.allclose(a, b, rtol=0.0, atol=STILL) for a, b in zip(snapshot, now)):
        return now, False
    print(f"warning: {tokens:,} tokens: no parameter moved by more than {STILL:g} since the last evaluation (or the "
          f"start): nothing is being learned; the steps are too small (clip_norm {cfg.clip_norm:g}, lr {cfg.lr:g}): "
          "raise clip_norm or lr", file=sys.stderr, flush=True)
    return now, True

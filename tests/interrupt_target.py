"""``python tests/interrupt_target.py ARGS`` is ``elmo-tasks ARGS``, except that a head trained with a seed
other than 1 trains (practically) forever, so that a test can interrupt a command at a known point.

Spawned pool workers re-import this file as ``__mp_main__``, so the patch holds in them too.
"""
from __future__ import annotations

import dataclasses
import sys

import elmo_tasks.experiment.run
from elmo_tasks.cli import main

_train = elmo_tasks.experiment.run.train


def endless_unless_seed_1(model, train_split, dev_split, cfg, *args, **kw):
    """``elmo_tasks.experiment.training.train``; for seeds other than 1 without an epoch limit or early stopping."""
    if cfg.seed != 1:
        cfg = dataclasses.replace(cfg, max_epochs=10 ** 6, patience=10 ** 6)
    return _train(model, train_split, dev_split, cfg, *args, **kw)


elmo_tasks.experiment.run.train = endless_unless_seed_1

if __name__ == "__main__":
    sys.exit(main())

"""``Head.loss_units`` of every registered head: the loss of a batch is the units-weighted mean of its parts' losses,
which is what data-parallel ``run`` (tasks/experiment/data_parallel.py) relies on to train like one process."""
from __future__ import annotations

import pytest
import torch

from test_tasks_helpers import make_glove
from elmo_tasks.components import component_config
from elmo_tasks.experiment.config import resolve
from elmo_tasks.experiment.data_parallel import DataParallel
from elmo_tasks.experiment.run import build_model, make_split
from elmo_tasks.features.base import FeatureContext
from elmo_tasks.registry import HEADS


@pytest.mark.parametrize("head_name", HEADS.names())
def test_batch_loss_is_the_units_weighted_mean_of_its_slices(head_name, tmp_path):
    torch.set_num_threads(1)
    head_cls = HEADS.get(head_name)
    examples = head_cls.demo_examples()
    cfg = resolve({"name": f"units_{head_name}", "data": {"reader": "tsv", "train": "unused"},
                   "features": {"name": "static", "path": str(make_glove(tmp_path / "glove.txt"))},
                   "head": {"name": head_name}, "training": {"batch_size": 2}})
    vocab = head_cls.build_vocab(component_config(HEADS, cfg.head), examples, {})
    model = build_model(cfg, vocab, FeatureContext(progress=False))
    model.eval()  # no dropout: the same function on every slice
    split = make_split(model, "train", examples)
    idx = list(range(len(examples)))
    total = model.head.loss_units(examples)
    assert total > 0
    with torch.no_grad():
        whole = float(model.loss(split, idx))
        for world in (2, 3):
            parts = [DataParallel(r, world).shard(idx) for r in range(world)]
            assert sorted(i for p in parts for i in p) == idx  # disjoint slices covering the batch
            units = [model.head.loss_units([examples[i] for i in p]) for p in parts]
            assert sum(units) == total
            weighted = sum(float(model.loss(split, p)) * u / total for p, u in zip(parts, units) if u)
            assert weighted == pytest.approx(whole, rel=1e-5, abs=1e-6)

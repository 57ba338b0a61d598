"""Every registered head: train on its demo examples, save, reload, predict the same; contract checks."""
from __future__ import annotations

import json

import pytest
import torch

from test_tasks_helpers import elmo_section, make_bilm, make_glove
from elmo_tasks.experiment.config import resolve
from elmo_tasks.experiment.run import load_run, predict_examples, run_experiment
from elmo_tasks.features.base import FeatureContext
from elmo_tasks.registry import HEADS


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("heads")
    opts, weights = make_bilm(tmp / "bilm")
    return {"options": opts, "weights": weights, "glove": make_glove(tmp / "glove.txt"), "tmp": tmp}


@pytest.mark.parametrize("head_name", HEADS.names())
def test_every_head_trains_saves_reloads_and_predicts_the_same(env, head_name, tmp_path):
    torch.set_num_threads(1)
    head_cls = HEADS.get(head_name)
    examples = head_cls.demo_examples()
    assert len(examples) >= 2 and all(len(ex.tokens) for ex in examples)
    features = {"name": "concat", "sources": [{"name": "static", "path": str(env["glove"])},
                                              elmo_section(env, mix={"name": "scalar", "l2_coef": 0.01})]}
    cfg = resolve({"name": f"demo_{head_name}",
                   "data": {"reader": "tsv", "train": "unused"},  # examples are given directly below
                   "features": features, "head": {"name": head_name},
                   "training": {"max_epochs": 2, "batch_size": 3, "lr": 0.01}})
    ctx = FeatureContext(cache_dir=tmp_path / "cache", progress=False)
    metrics = run_experiment(cfg, tmp_path / "run", ctx, progress=False,
                             examples={"train": examples, "dev": examples, "test": examples})
    assert head_cls.primary_metric in metrics["test"]
    assert 0.0 <= metrics["test"][head_cls.primary_metric] <= 1.0
    assert len(metrics["features"]["sources"][1]["mix_weights"]) == 3
    saved = json.loads((tmp_path / "run" / "predictions.json").read_text())["test"]
    assert len(saved) == len(examples)

    cfg2, model = load_run(tmp_path / "run", ctx)
    assert cfg2.to_dict() == cfg.to_dict()
    again = predict_examples(cfg2, model, examples, progress=False)
    assert again == saved
    # the checkpoint holds only the trainable mix + head (the frozen biLM is never saved)
    state = torch.load(tmp_path / "run" / "model.pt", weights_only=True)["state_dict"]
    assert not any("lstm.forward" in k or "char_cnn" in k for k in state)
    assert any(k.endswith("mix.weights") for k in state)
    text = model.head.format_prediction(examples[0], again[0])
    assert isinstance(text, str) and text

"""K-fold cross-validation in `elmo-tasks compare --folds K` and the paired tests behind it."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
import yaml

from elmo_tasks.cli import main
from elmo_tasks.experiment.crossval import fold_indices, fold_split, mcnemar, paired_bootstrap
from test_tasks_helpers import make_env


def test_folds_partition_and_splits_are_disjoint():
    folds = fold_indices(23, 5, seed=0)
    assert sorted(np.concatenate(folds).tolist()) == list(range(23))
    assert sorted(len(f) for f in folds) == [4, 4, 5, 5, 5]
    assert all((a == b).all() for a, b in zip(folds, fold_indices(23, 5, seed=0)))  # fixed permutation
    pool = list(range(23))
    for k in range(5):
        ex, test_idx = fold_split(pool, folds, k)
        tr, dv, te = set(ex["train"]), set(ex["dev"]), set(ex["test"])
        assert te == set(test_idx.tolist()) and not (tr & dv) and not (tr & te) and not (dv & te)
        assert len(tr | dv | te) == 23
    with pytest.raises(ValueError, match="folds must be between 2"):
        fold_indices(3, 5)


def test_mcnemar_and_bootstrap_on_known_cases():
    a = np.array([1] * 50 + [0] * 50)
    b = np.array([1] * 50 + [1] * 30 + [0] * 20)  # B fixes 30 of A's errors and breaks none
    m = mcnemar(a, b)
    assert (m["only_a"], m["only_b"]) == (0, 30) and m["p"] < 1e-8
    assert mcnemar(a, a)["p"] == 1.0
    bs = paired_bootstrap(a, b, n_resamples=2000)
    assert abs(bs["delta"] - 0.30) < 1e-12 and bs["ci95"][0] > 0.15 and bs["p_b_not_better"] == 0.0
    same = paired_bootstrap(a, a[::-1].copy(), n_resamples=2000)  # same accuracy, different items
    assert same["ci95"][0] < 0 < same["ci95"][1]


def test_bootstrap_is_the_percentile_interval_of_item_resamples():
    """scipy's bootstrap, as called, resamples the items with the seeded generator, 1,000 resamples at a time, and
    takes the 2.5/97.5 percentiles: the same numbers as doing it by hand."""
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 4, 700) / 3, rng.integers(0, 4, 700) / 3  # seed-averaged correctness of 3 seeds
    d = b - a
    draw = np.random.default_rng(0)
    means = np.concatenate([d[draw.integers(0, len(d), size=(1000, len(d)))].mean(axis=1) for _ in range(5)])
    bs = paired_bootstrap(a, b, n_resamples=5000)
    np.testing.assert_allclose(bs["ci95"], np.percentile(means, [2.5, 97.5]), rtol=0, atol=1e-15)
    assert bs["p_b_not_better"] == (means <= 0).mean() and bs["delta"] == d.mean()


def test_compare_with_folds_predicts_every_sentence_once(tmp_path):
    torch.set_num_threads(1)
    env = make_env(tmp_path)
    rng = random.Random(0)
    pos, neg = ["great", "fun", "moving", "superb"], ["dull", "boring", "mess", "awful"]
    lines = []
    for i in range(30):
        label = "pos" if i % 2 == 0 else "neg"
        words = [rng.choice(pos if label == "pos" else neg), "film", rng.choice(["a", "the", "and"])]
        lines.append(f"{label}\t{' '.join(words)}")
    for split, chunk in (("train", lines[:18]), ("dev", lines[18:24]), ("test", lines[24:])):
        (tmp_path / f"{split}.tsv").write_text("\n".join(chunk) + "\n")
    glove = {"name": "static", "path": str(env["glove"])}
    cfg = {"name": "cv", "data": {"reader": "tsv", "train": str(tmp_path / "train.tsv"),
                                   "dev": str(tmp_path / "dev.tsv"), "test": str(tmp_path / "test.tsv")},
           "features": glove, "head": {"name": "sentence_classifier", "hidden_dim": 8, "dropout": 0.0},
           "training": {"max_epochs": 2, "batch_size": 4, "lr": 0.01},
           "compare": {"seeds": [1], "sources": {"glove": glove, "layer1": {
               "name": "elmo", "options_file": str(env["options"]), "weights_file": str(env["weights"]), "layer": 1}}}}
    conf = tmp_path / "cv.yaml"
    conf.write_text(yaml.safe_dump(cfg, sort_keys=False))
    res = tmp_path / "res"
    rc = main(["compare", str(conf), "--folds", "3", "--results-dir", str(res), "--runs-dir", str(tmp_path / "runs"),
               "--cache-dir", str(tmp_path / "cache"), "--progress", "off"])
    assert rc == 0
    s = json.loads((res / "summary.json").read_text())
    assert len(s["runs"]) == 2 * 3 and sorted({r["fold"] for r in s["runs"]}) == [0, 1, 2]
    cv = s["cross_validation"]
    assert cv["sentences"] == 30 and cv["folds"] == 3
    for name in ("glove", "layer1"):
        runs = [r for r in s["runs"] if r["source"] == name]
        assert sum(len(r["test_correct"]) for r in runs) == 30  # every sentence tested exactly once
        # out-of-fold accuracy = correct predictions over all 30 sentences, also = test-size-weighted fold accuracy
        n_right = sum(r["test_correct"].count("1") for r in runs)
        assert abs(cv["out_of_fold_accuracy"][name]["1"] - n_right / 30) < 1e-12
        weighted = sum(r["test"]["accuracy"] * len(r["test_correct"]) for r in runs) / 30
        assert abs(weighted - n_right / 30) < 1e-9
    (t,) = cv["paired"]
    assert t["a"] == "glove" and t["b"] == "layer1" and "1" in t["mcnemar"]
    md = (res / "summary.md").read_text()
    assert "3-fold cross-validation over all 30 sentences" in md and "| glove | layer1 |" in md
    assert main(["compare", str(conf), "--folds", "2", "--results-dir", str(res)]) == 2

"""`elmo-tasks compare --jobs N`: the grid on a local process pool gives the serial summary, run for run."""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
import torch
import yaml

from test_tasks_helpers import elmo_section, make_env, tagging_config
from elmo_tasks.cli import main
from elmo_features.util.threads import threads_per_job
from elmo_tasks.experiment.parallel import JobFailedError, run_jobs

# what may differ between a serial and a parallel comparison: timings, folders, provenance
VOLATILE = {"seconds", "run_dir", "seconds_per_run", "command", "wall_seconds", "finished", "machine", "jobs",
            "threads_per_job"}


def _stable(obj):
    if isinstance(obj, dict):
        return {k: _stable(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_stable(v) for v in obj]
    return obj


def _compare(tmp_path, conf, tag, *extra):
    res = tmp_path / f"res-{tag}"
    rc = main(["compare", str(conf), "--results-dir", str(res), "--runs-dir", str(tmp_path / f"runs-{tag}"),
               "--cache-dir", str(tmp_path / f"cache-{tag}"), "--progress", "off", *extra])
    assert rc == 0
    return json.loads((res / "summary.json").read_text())


def _same_training(serial, par):
    """Each parallel run trained exactly as its serial twin, epoch by epoch (train loss in metrics.json)."""
    for a, b in zip(serial["runs"], par["runs"]):
        ha, hb = (json.loads((Path(r["run_dir"]) / "metrics.json").read_text())["history"] for r in (a, b))
        assert [h["train_loss"] for h in ha] == [h["train_loss"] for h in hb]


def _cache_files(tmp_path, tag):
    return sorted(p.name for p in (tmp_path / f"cache-{tag}").glob("*.hdf5"))


def test_jobs_summary_equals_serial_run_for_run(tmp_path):
    torch.set_num_threads(1)
    env = make_env(tmp_path)
    cfg = tagging_config(env, max_epochs=2)
    glove = {"name": "static", "path": str(env["glove"])}
    cfg["compare"] = {"seeds": [1, 2], "sources": {
        "layer1": elmo_section(env, layer=1),
        "glove+mix": {"name": "concat", "sources": [glove, elmo_section(env)]},
        "glove": glove,
    }}
    conf = tmp_path / "cmp.yaml"
    conf.write_text(yaml.safe_dump(cfg, sort_keys=False))
    serial = _compare(tmp_path, conf, "serial")
    par = _compare(tmp_path, conf, "par", "--jobs", "2", "--threads", "1")
    assert par["jobs"] == 2 and par["threads_per_job"] == 1 and "--jobs 2" in par["command"]
    assert [(r["source"], r["seed"]) for r in par["runs"]] == [
        (s, seed) for s in ("layer1", "glove+mix", "glove") for seed in (1, 2)]  # grid order, not completion order
    assert _stable(par) == _stable(serial)  # every per-run number (scores, mix weights, epochs, OOV) is equal
    assert par["runs"][2]["mix_weights"] and par["runs"][2]["test"]["f1"] == serial["runs"][2]["test"]["f1"]
    _same_training(serial, par)
    # features were embedded once (train = dev file, test of the one biLM), before the pool: no worker added one
    assert len(_cache_files(tmp_path, "par")) == 2 and _cache_files(tmp_path, "par") == _cache_files(tmp_path, "serial")


def test_jobs_with_folds_equals_serial_and_embeds_once(tmp_path):
    torch.set_num_threads(1)
    env = make_env(tmp_path)
    rng = random.Random(0)
    lines = []
    for i in range(24):
        label = "pos" if i % 2 == 0 else "neg"
        words = [rng.choice(["great", "fun"] if label == "pos" else ["dull", "boring"]), "film", rng.choice(["a", "the"])]
        lines.append(f"{label}\t{' '.join(words)}")
    for split, chunk in (("train", lines[:14]), ("dev", lines[14:19]), ("test", lines[19:])):
        (tmp_path / f"{split}.tsv").write_text("\n".join(chunk) + "\n")
    layer1 = elmo_section(env, layer=1)
    cfg = {"name": "cv", "data": {"reader": "tsv", "train": str(tmp_path / "train.tsv"),
                                   "dev": str(tmp_path / "dev.tsv"), "test": str(tmp_path / "test.tsv")},
           "features": layer1, "head": {"name": "sentence_classifier", "hidden_dim": 8, "dropout": 0.0},
           "training": {"max_epochs": 2, "batch_size": 4, "lr": 0.01},
           "compare": {"seeds": [1], "sources": {"layer1": layer1, "mix": elmo_section(env)}}}
    conf = tmp_path / "cv.yaml"
    conf.write_text(yaml.safe_dump(cfg, sort_keys=False))
    serial = _compare(tmp_path, conf, "serial", "--folds", "3")
    par = _compare(tmp_path, conf, "par", "--folds", "3", "--jobs", "2", "--threads", "1")
    assert [(r["source"], r["fold"]) for r in par["runs"]] == [(s, k) for s in ("layer1", "mix") for k in range(3)]
    assert _stable(par) == _stable(serial) and par["cross_validation"]["out_of_fold_accuracy"]
    _same_training(serial, par)
    # fold 0's three splits were embedded before the pool; the other folds reuse those sentences
    assert len(_cache_files(tmp_path, "par")) == 3 and _cache_files(tmp_path, "par") == _cache_files(tmp_path, "serial")


def test_jobs_needs_the_feature_cache(tmp_path, capsys):
    env = make_env(tmp_path)
    conf = tmp_path / "c.yaml"
    cfg = tagging_config(env)
    cfg["compare"] = {"seeds": [1], "sources": {"layer1": elmo_section(env, layer=1)}}
    conf.write_text(yaml.safe_dump(cfg))
    assert main(["compare", str(conf), "--jobs", "2", "--cache-dir", "none", "--results-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--jobs" in err and "--cache-dir" in err


def test_threads_per_job_fills_the_cores_without_oversubscribing():
    assert threads_per_job(2, cores=8) == 4 and threads_per_job(3, cores=8) == 2 and threads_per_job(16, cores=8) == 1


def _job(i: int, folder: str) -> int:
    """Job 1 fails once job 2 runs; job 2 would take 60 s and leaves a file when it finishes."""
    import time

    marks = Path(folder)
    if i == 1:
        for _ in range(600):  # until job 2 has started (bounded)
            if (marks / "2.started").exists():
                break
            time.sleep(0.1)
        raise FileNotFoundError(f"no such file: missing-{i}.txt")
    (marks / f"{i}.started").write_text(str(os.getpid()))
    if i == 2:
        time.sleep(60)
        (marks / "2.finished").touch()
    return i * i


def _bug(i: int) -> int:
    return [][i]


def test_failing_job_stops_the_pool_and_names_the_job(tmp_path):
    with pytest.raises(JobFailedError, match=r"^run 2 failed: no such file: missing-1.txt \(the other jobs"):
        run_jobs(_job, [(i, str(tmp_path)) for i in range(4)], jobs=3, threads=1, label=lambda i: f"run {i + 1}")
    # the running job was terminated (its process is gone), not waited for
    assert not (tmp_path / "2.finished").exists()
    with pytest.raises(ProcessLookupError):
        os.kill(int((tmp_path / "2.started").read_text()), 0)
    with pytest.raises(IndexError):  # a bug keeps its type (and the worker's traceback)
        run_jobs(_bug, [(0,)], jobs=2, threads=1)
    done = []
    assert run_jobs(_job, [(0, str(tmp_path)), (3, str(tmp_path)), (4, str(tmp_path))], jobs=2, threads=1,
                    on_done=lambda i, r: done.append(i)) == [0, 9, 16]
    assert sorted(done) == [0, 1, 2]


def test_compare_under_torchrun_spreads_runs_over_two_ranks(tmp_path):
    from dist_launch import launch

    torch.set_num_threads(1)
    env = make_env(tmp_path)
    cfg = tagging_config(env, max_epochs=2)
    cfg["compare"] = {"seeds": [1, 2], "sources": {"layer1": elmo_section(env, layer=1), "mix": elmo_section(env)}}
    conf = tmp_path / "cmp.yaml"
    conf.write_text(yaml.safe_dump(cfg, sort_keys=False))
    serial = _compare(tmp_path, conf, "serial")
    res = tmp_path / "res-ranks"
    r0, r1 = launch("elmo_tasks.cli", ["compare", str(conf), "--results-dir", str(res), "--runs-dir",
                                  str(tmp_path / "runs-ranks"), "--cache-dir", str(tmp_path / "cache-ranks"),
                                  "--progress", "off"])
    assert (r0.returncode, r1.returncode) == (0, 0), r0.stderr[-2000:] + r1.stderr[-2000:]
    par = json.loads((res / "summary.json").read_text())
    assert par["ranks"] == 2 and "wrote" in r0.stdout and "wrote" not in r1.stdout
    assert _stable({**par, "ranks": None}) == _stable({**serial, "ranks": None})
    _same_training(serial, par)
    assert len({Path(r["run_dir"]).parent for r in par["runs"]}) == 1  # one compare folder for all ranks
    assert len(_cache_files(tmp_path, "ranks")) == 2  # rank 0 embedded train (= dev) and test once; rank 1 read them


def test_run_without_torchrun_env_is_refused_and_compare_needs_the_cache(tmp_path, capsys, monkeypatch):
    env = make_env(tmp_path)
    cfg = tagging_config(env)
    cfg["compare"] = {"seeds": [1], "sources": {"layer1": elmo_section(env, layer=1)}}
    conf = tmp_path / "c.yaml"
    conf.write_text(yaml.safe_dump(cfg))
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main(["run", str(conf), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: WORLD_SIZE is set but RANK is not: launch with torchrun") and err.count("\n") == 1
    assert not (tmp_path / "run").exists()
    assert main(["compare", str(conf), "--cache-dir", "none", "--results-dir", str(tmp_path / "r")]) == 2
    assert "--jobs / torchrun" in capsys.readouterr().err

"""``elmo-tasks run`` under torchrun: 2 ranks with batch b train like 1 process with batch 2b (gloo, 2 processes);
a killed rank stops the job with an error, never a hang."""
from __future__ import annotations

import json
import time

import torch
import yaml

from dist_launch import launch, start, wait
from test_tasks_helpers import elmo_section, make_env, tagging_config
from elmo_tasks.cli import main


def _config(tmp_path, env, batch_size, **training):
    cfg = tagging_config(env, head={"name": "token_tagger", "hidden_dim": 4, "dropout": 0.0},
                         features=elmo_section(env), batch_size=batch_size, **training)
    path = tmp_path / f"b{batch_size}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return str(path)


def test_two_ranks_with_batch_b_equal_one_process_with_2b(tmp_path):
    torch.set_num_threads(1)
    env = make_env(tmp_path)
    one, two = tmp_path / "one", tmp_path / "two"
    # 5 training sentences: global batches of 4 and 1 (rank 1's slice of the last one is empty)
    assert main(["run", _config(tmp_path, env, 4), "--out", str(one), "--cache-dir", str(tmp_path / "c1"),
                 "--progress", "off"]) == 0
    r0, r1 = launch("elmo_tasks.cli", ["run", _config(tmp_path, env, 2), "--out", str(two), "--cache-dir",
                                  str(tmp_path / "c2"), "--progress", "off"])
    assert (r0.returncode, r1.returncode) == (0, 0), r0.stderr[-2000:] + r1.stderr[-2000:]
    assert f"run folder: {two}" in r0.stdout and r1.stdout == ""  # rank 0 reports; the others are quiet
    a = torch.load(one / "model.pt", weights_only=True)["state_dict"]
    b = torch.load(two / "model.pt", weights_only=True)["state_dict"]
    assert a.keys() == b.keys() and any("mix" in k for k in a)  # the trainable scalar mix is trained too
    for name in a:  # the same parameters after the same steps (3 epochs x 2 steps, Adam)
        assert torch.allclose(a[name], b[name], atol=1e-5, rtol=1e-4), name
    ma, mb = (json.loads((d / "metrics.json").read_text()) for d in (one, two))
    assert mb["ranks"] == 2 and "ranks" not in ma
    for key in ("dev", "test", "best_epoch", "epochs_run", "data"):
        assert ma[key] == mb[key], key
    assert [h["dev"] for h in ma["history"]] == [h["dev"] for h in mb["history"]]
    for ha, hb in zip(ma["history"], mb["history"]):  # the loss is the global batch's, as in one process
        assert abs(ha["train_loss"] - hb["train_loss"]) < 1e-5
    assert json.loads((one / "predictions.json").read_text()) == json.loads((two / "predictions.json").read_text())
    assert sorted(p.name for p in two.iterdir()) == sorted(p.name for p in one.iterdir())  # no stray rank files


def test_a_killed_rank_stops_the_job_with_an_error(tmp_path):
    env = make_env(tmp_path)
    out = tmp_path / "run"
    conf = _config(tmp_path, env, 1, max_epochs=100000, patience=100000)
    procs = start("elmo_tasks.cli", ["run", conf, "--out", str(out), "--cache-dir", "none", "--progress", "off"],
                  env={"ELMO_TASKS_DIST_TIMEOUT": "600"})
    try:
        deadline = time.monotonic() + 900  # a busy machine may be slow
        while not (out / "model.pt").exists():  # rank 0 saves after the first epoch: training is under way
            assert time.monotonic() < deadline and procs[0].poll() is None, "training did not start"
            time.sleep(0.05)
        procs[1].kill()  # e.g. out of memory
        t0 = time.monotonic()
        r0, _ = wait(procs, timeout=900)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert time.monotonic() - t0 < 300  # a lost connection is noticed at once, not after the 600 s timeout
    assert r0.returncode == 2, r0.stderr[-2000:]
    last = r0.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "lost the other ranks" in last and "Traceback" not in r0.stderr
    assert not (out / "metrics.json").exists()  # no half-finished run looks finished


def test_ranks_given_other_settings_are_refused_before_training(tmp_path):
    env = make_env(tmp_path)
    conf, out = _config(tmp_path, env, 2), tmp_path / "r"
    args = ["run", conf, "--out", str(out), "--cache-dir", str(tmp_path / "c"), "--progress", "off"]
    r0, r1 = wait(start("elmo_tasks.cli", args, rank_args={1: [*args, "--set", "training.lr=0.5"]}), timeout=300)
    for r in (r0, r1):
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
        assert "error: rank 1 was given another job than rank 0: training.lr (0.5 against " in r.stderr, r.stderr
    assert not (out / "metrics.json").exists()

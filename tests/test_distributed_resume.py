"""``train-bilm`` under torchrun (gloo, 2 processes): a rank killed midway stops the job with an error (no hang);
``--resume`` with the same launch then ends where an uninterrupted run ends."""
from __future__ import annotations

import time

import torch
import yaml

from dist_launch import launch, start, wait
from test_distributed_training import _corpus  # the same tiny corpus as the equivalence test
from elmo_features.training.config import TrainConfig
from elmo_features.training.trainer import Trainer


def test_killed_rank_stops_the_job_and_resume_ends_like_an_uninterrupted_run(tmp_path):
    torch.set_num_threads(1)
    base = dict(train_files=[_corpus(tmp_path / "train.txt", 120, 0)], heldout_file=_corpus(tmp_path / "h.txt", 10, 1),
                char_embedding_dim=4, filters=[[1, 4], [2, 8]], n_highway=1, lstm_dim=16, projection_dim=8,
                vocab_size=20, n_negative_samples=8, max_train_tokens=2000, eval_every_tokens=1000, eval_sentences=10,
                warmup_steps=2, lr=0.03, threads=1, dropout=0.0)
    single = Trainer(TrainConfig.from_dict({**base, "batch_tokens": 160, "checkpoint_minutes": 60,
                                            "out_dir": str(tmp_path / "one")}), progress=False).run()
    out = tmp_path / "two"
    conf = tmp_path / "ddp.yaml"  # a checkpoint after every step, so the kill falls between two of them
    conf.write_text(yaml.safe_dump({**base, "batch_tokens": 80, "checkpoint_minutes": 1e-5, "out_dir": str(out)}))
    args = ["train-bilm", "--config", str(conf), "--no-progress"]
    procs = start("elmo_tasks.cli", args, env={"ELMO_TASKS_DIST_TIMEOUT": "600"})
    try:
        deadline = time.monotonic() + 900  # a busy machine may be slow
        while not (out / "checkpoint.pt").exists():
            assert time.monotonic() < deadline and procs[0].poll() is None, "training did not start"
            time.sleep(0.02)
        procs[1].kill()  # rank 1 dies (out of memory, a lost node)
        t0 = time.monotonic()
        r0, _ = wait(procs, timeout=900)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert time.monotonic() - t0 < 300, "rank 0 waited for the 600 s timeout"  # the lost rank is noticed at once
    assert r0.returncode == 2, r0.stderr[-2000:]
    last = r0.stderr.strip().splitlines()[-1]
    assert last.startswith("error: train-bilm: ") and "lost the other ranks" in last and "Traceback" not in r0.stderr
    stopped = torch.load(out / "checkpoint.pt", weights_only=True)["state"]
    assert 0 < stopped["step"] < single["step"]  # killed midway: the last checkpoint is a partial run
    # the same launch with --resume continues from that checkpoint and ends as if nothing had happened
    r0, r1 = launch("elmo_tasks.cli", [*args, "--resume"])
    assert (r0.returncode, r1.returncode) == (0, 0), r0.stderr[-2000:] + r1.stderr[-2000:]
    a = torch.load(tmp_path / "one" / "checkpoint.pt", weights_only=True)
    b = torch.load(out / "checkpoint.pt", weights_only=True)
    assert b["state"]["step"] == single["step"] and b["state"]["tokens"] == single["tokens"]
    for name, p in a["model"].items():
        assert torch.allclose(p, b["model"][name], atol=1e-5, rtol=1e-4), name

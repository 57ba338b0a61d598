"""``train-bilm`` under torchrun: 2 ranks with batch b train like 1 process with batch 2b (gloo, 2 processes)."""
from __future__ import annotations

import random

import pytest
import torch
import yaml

from dist_launch import launch
from elmo_features.util.errors import CheckpointError
from elmo_features.training.config import TrainConfig
from elmo_features.training.trainer import Trainer


def _corpus(path, n, seed):
    rng = random.Random(seed)
    path.write_text("\n".join(" ".join(["the", rng.choice(["big", "small", "red"]), rng.choice(["cat", "dog"]),
                                        rng.choice(["sat", "ran"]) + (" fast" * rng.randint(0, 3)), "."])
                              for _ in range(n)) + "\n", encoding="utf-8")
    return str(path)


def test_two_ranks_with_batch_b_equal_one_process_with_2b(tmp_path):
    torch.set_num_threads(1)
    base = dict(train_files=[_corpus(tmp_path / "train.txt", 120, 0)], heldout_file=_corpus(tmp_path / "h.txt", 10, 1),
                char_embedding_dim=4, filters=[[1, 4], [2, 8]], n_highway=1, lstm_dim=16, projection_dim=8,
                vocab_size=20, n_negative_samples=8, max_train_tokens=600, eval_every_tokens=300, eval_sentences=10,
                warmup_steps=2, lr=0.03, threads=1, dropout=0.0, checkpoint_minutes=60)
    single = Trainer(TrainConfig.from_dict({**base, "batch_tokens": 160, "out_dir": str(tmp_path / "one")}),
                     progress=False).run()
    conf = tmp_path / "ddp.yaml"
    conf.write_text(yaml.safe_dump({**base, "batch_tokens": 80, "out_dir": str(tmp_path / "two")}))
    r0, r1 = launch("elmo_tasks.cli", ["train-bilm", "--config", str(conf), "--no-progress"])
    assert (r0.returncode, r1.returncode) == (0, 0), r0.stderr[-2000:] + r1.stderr[-2000:]
    assert '"finished": true' in r0.stdout and r1.stdout == ""  # rank 0 reports; the others are quiet
    a = torch.load(tmp_path / "one" / "checkpoint.pt", weights_only=True)
    b = torch.load(tmp_path / "two" / "checkpoint.pt", weights_only=True)
    assert b["state"]["step"] == single["step"] > 2 and b["state"]["tokens"] == single["tokens"]
    assert b["state"]["world_size"] == 2 and len(b["torch_rng_ranks"]) == 2
    for name, p in a["model"].items():  # the same parameters after the same steps
        assert torch.allclose(p, b["model"][name], atol=1e-5, rtol=1e-4), name
    assert [h["tokens"] for h in a["state"]["history"]] == [h["tokens"] for h in b["state"]["history"]]
    assert (tmp_path / "two" / "curve.json").exists() and (tmp_path / "two" / "export" / "weights.hdf5").exists()
    # a resume with another number of processes is refused (the global batches would differ)
    cfg = TrainConfig.from_dict({**base, "batch_tokens": 80, "out_dir": str(tmp_path / "two"), "max_train_tokens": 900})
    with pytest.raises(CheckpointError, match="trained by 2 process\\(es\\), this launch has 1; resume with 2"):
        Trainer(cfg, resume=True, progress=False)

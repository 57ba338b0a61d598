"""Sharded ``embed`` under torchrun: shards, merge, resume, refusals; and a real 2-process (gloo) launch."""
from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from dist_launch import launch
from elmo_features import BiLM, BiLMOptions, Embedder, load_bilm, save_bilm
from elmo_features.cli_embed import embed_file
from elmo_features.embedding.embed_input import EmbedInput
from elmo_features.util.locking import OutputLock, lock_path_for
from elmo_features.embedding.sharded_embed import (embed_shard, merge_shards, prepare_shards, settings_for, shard_bounds,
                                         shard_path)

TINY = {
    "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8]], "n_highway": 1},
    "lstm": {"dim": 8, "projection_dim": 4, "n_layers": 2, "cell_clip": 3, "proj_clip": 3},
}
LINES = ["The cat sat on the mat .", "x", "a b c", "The cat sat on the mat .", "one more line here", "y z",
         "short", "the last sentence of the file is longer than the others by far"]


@pytest.fixture
def env(tmp_path):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    bilm = BiLM(BiLMOptions.from_dict(TINY))
    with torch.no_grad():
        for p in bilm.parameters():
            p.normal_(0.0, 0.3)
    o, w = tmp_path / "model" / "options.json", tmp_path / "model" / "weights.hdf5"
    save_bilm(bilm, o, w)
    infile = tmp_path / "in.txt"
    infile.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return {"options": o, "weights": w, "input": infile, "embedder": Embedder(load_bilm(o, w), progress=False)}


def read(path):
    with h5py.File(path, "r") as f:
        return {k: f[k][...] for k in f if k != "sentence_to_index"}, json.loads(f["sentence_to_index"][0])


def assert_same_output(a, b):
    (da, ia), (db, ib) = read(a), read(b)
    assert sorted(da) == sorted(db) and ia == ib
    for k in da:
        assert da[k].shape == db[k].shape and np.allclose(da[k], db[k], atol=1e-6, rtol=0)


def test_shard_bounds_are_contiguous_and_token_balanced():
    assert shard_bounds([5, 5, 5, 5], 2) == [0, 2, 4]
    b = shard_bounds([1] * 9 + [9], 2)  # the long last sentence is half the tokens
    assert b == [0, 9, 10]
    assert shard_bounds([3], 3) == [0, 1, 1, 1]  # more ranks than lines: empty shards
    lengths = [len(s.split()) for s in LINES]
    for w in (1, 2, 3, 5):
        b = shard_bounds(lengths, w)
        assert b[0] == 0 and b[-1] == len(LINES) and b == sorted(b)


def _manifest(env, world):
    source = EmbedInput(env["input"])
    return source, {"input_sha256": source.sha256, "settings": settings_for(env["embedder"], "all", False),
                    "world_size": world, "bounds": shard_bounds(list(source.lengths), world)}


def test_shards_merge_to_the_single_process_output_and_resume(tmp_path, env):
    single = tmp_path / "single.hdf5"
    embed_file(env["input"], single, env["embedder"], chunk_size=3)
    source, m = _manifest(env, 2)
    shard_dir = tmp_path / "out.hdf5.shards"
    assert prepare_shards(shard_dir, m, restart=False) is None
    (lo, mid, hi) = m["bounds"]
    p0, p1 = shard_path(shard_dir, 0, 2), shard_path(shard_dir, 1, 2)
    embed_shard(source, lo, mid, p0, env["embedder"], "all", 2, m["input_sha256"], m["settings"])

    def crash(k, n):
        raise KeyboardInterrupt  # a crash after the first flushed chunk

    with pytest.raises(KeyboardInterrupt):
        embed_shard(source, mid, hi, p1, env["embedder"], "all", 1, m["input_sha256"], m["settings"], crash)
    assert not p1.exists() and Path(str(p1) + ".partial").exists()  # a partial shard is never a shard file
    # a relaunch with another world size is refused; the same world size keeps the finished shard
    err = prepare_shards(shard_dir, {**m, "world_size": 3, "bounds": shard_bounds([1] * 8, 3)}, restart=False)
    assert "made with 2 processes (1 shard(s) finished), but this launch has 3" in err and "--restart" in err
    assert prepare_shards(shard_dir, m, restart=False) is None and p0.exists()
    assert embed_shard(source, lo, mid, p0, env["embedder"], "all", 2, m["input_sha256"], m["settings"]) == 0
    assert embed_shard(source, mid, hi, p1, env["embedder"], "all", 1, m["input_sha256"], m["settings"]) \
        == hi - mid - 1  # resumed after the flushed sentence
    out = tmp_path / "out.hdf5"
    merge_shards(shard_dir, m, source, out, forget_sentences=False)
    assert_same_output(single, out)
    assert not shard_dir.exists()
    # other input or settings: the old shards are discarded, not mixed in
    assert prepare_shards(shard_dir, m, restart=False) is None
    p0.write_bytes(b"stale")
    assert prepare_shards(shard_dir, {**m, "input_sha256": "other"}, restart=False) is None and not p0.exists()
    p0.write_bytes(b"stale")
    assert prepare_shards(shard_dir, {**m, "world_size": 3}, restart=True) is None and not p0.exists()


def test_two_processes_gloo_end_to_end_failure_and_resume(tmp_path, env):
    single = tmp_path / "single.hdf5"
    embed_file(env["input"], single, env["embedder"])
    out = tmp_path / "out.hdf5"
    args = [str(env["input"]), str(out), "--options", str(env["options"]), "--weights", str(env["weights"]),
            "--chunk-size", "2"]
    # rank 1 cannot take its shard (another process holds the shard's lock): the job stops with its error
    source, m = _manifest(env, 2)
    shard_dir = Path(str(out) + ".shards")
    prepare_shards(shard_dir, m, restart=False)
    with OutputLock(lock_path_for(shard_path(shard_dir, 1, 2)), "test"):
        r0, r1 = launch("elmo_features.embed", args)
    assert r1.returncode == 2 and "error: the shard" in r1.stderr and "being written by another process" in r1.stderr
    assert r0.returncode == 2 and "rank 1: LockError" in r0.stderr and "rerun the same command" in r0.stderr
    assert not out.exists() and shard_path(shard_dir, 0, 2).exists()  # no final output; the finished shard kept
    r0, r1 = launch("elmo_features.embed", args)
    assert (r0.returncode, r1.returncode) == (0, 0), r0.stderr + r1.stderr
    assert_same_output(single, out)
    assert not shard_dir.exists() and "wrote 8 sentences" in r0.stderr

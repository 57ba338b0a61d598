"""scripts/export_softmax.py keeps a run's softmax (float16 W, float32 b, vocabulary hash) and refuses the wrong input."""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "export_softmax.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def make_run(tmp_path: Path, rows: int, softmax: bool = True) -> tuple[Path, Path, np.ndarray]:
    run_dir = tmp_path / "run"
    (run_dir / "export").mkdir(parents=True)
    w = np.random.default_rng(0).normal(size=(rows, 8)).astype(np.float32)  # (vocab rows, projection_dim)
    with h5py.File(run_dir / "export" / "weights.hdf5", "w") as f:
        f.create_dataset("CNN_proj/W_proj", data=np.zeros((4, 8), np.float32))
        if softmax:
            f.create_dataset("softmax/W", data=w)
            f.create_dataset("softmax/b", data=np.arange(rows, dtype=np.float32))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"w{i}\n" for i in range(5)), encoding="utf-8")
    return run_dir, vocab, w


def test_exports_float16_softmax_with_vocab_hash(tmp_path):
    run_dir, vocab, w = make_run(tmp_path, rows=5)
    out = tmp_path / "dev" / "softmax.hdf5"
    r = run("--run", str(run_dir), "--vocab", str(vocab), "--out", str(out))
    assert r.returncode == 0, r.stderr
    with h5py.File(out, "r") as f:
        assert f["softmax/W"].dtype == np.float16 and f["softmax/W"].shape == (5, 8)
        assert np.abs(f["softmax/W"][...].astype(np.float32) - w).max() < 2e-3
        assert f["softmax/b"].dtype == np.float32 and f["softmax/b"][3] == 3.0
        assert f.attrs["vocab_sha256"] == hashlib.sha256(vocab.read_bytes()).hexdigest()
        assert str(run_dir) in f.attrs["source"]
    assert [p.name for p in out.parent.iterdir()] == ["softmax.hdf5"]  # no temporary file left behind


def test_refuses_shipped_model_and_mismatched_vocab(tmp_path):
    out = tmp_path / "softmax.hdf5"
    run_dir, vocab, _ = make_run(tmp_path / "a", rows=5, softmax=False)
    r = run("--run", str(run_dir), "--vocab", str(vocab), "--out", str(out))
    assert r.returncode == 2 and "has no softmax group" in r.stderr and "Traceback" not in r.stderr
    run_dir, vocab, _ = make_run(tmp_path / "b", rows=3)  # fewer softmax rows than vocabulary words
    r = run("--run", str(run_dir), "--vocab", str(vocab), "--out", str(out))
    assert r.returncode == 2 and "not the same model" in r.stderr
    r = run("--run", str(tmp_path / "missing"), "--vocab", str(vocab), "--out", str(out))
    assert r.returncode == 2 and "no file" in r.stderr
    assert not out.exists()

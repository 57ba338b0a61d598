"""Make tests/data/allennlp_clip_long.npz: AllenNLP 2.10.1's layers for the exactness test's biLM and sentences.

    python bench/make_exactness_fixture.py            # the AllenNLP venv of bench/peer_allennlp.py (built once)

The biLM and sentences come from tests/exactness_fixture.py (seeded: the same everywhere). AllenNLP's
``_ElmoBiLm`` runs them in one batch from a zero state with one thread; the file keeps its layers (L, B, T, D),
the sentences, the AllenNLP and torch versions and the CPU it ran on.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import numpy as np  # noqa: E402

from common import REPO, machine  # noqa: E402
from exactness_fixture import FIXTURE, sentences, write_model  # noqa: E402
from peer_allennlp import BENCH, clean_env, ensure_venv  # noqa: E402


def main() -> int:
    py = ensure_venv(REPO / ".cache" / "peer_venv")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        opts, weights = write_model(tmp)
        (tmp / "batch.json").write_text(json.dumps([sentences()]))
        proc = subprocess.run([str(py), str(BENCH / "peer_worker.py"), str(opts), str(weights), str(tmp / "batch.json"),
                               str(tmp / "out"), "--threads", "1", "--compare", "1"], env=clean_env(),
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-3000:])
        layers = np.load(tmp / "out.npz")["arr_0"]  # (L, B, T, D)
        info = json.loads((tmp / "out.json").read_text())
    m = machine()
    meta = {"allennlp": info["allennlp"], "torch": info["torch"], "threads": 1, "cpu_model": m["cpu_model"],
            "cpu_flags": m["cpu_flags"], "made_by": "python bench/make_exactness_fixture.py"}
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(FIXTURE, layers=layers.astype(np.float32), meta=json.dumps(meta),
                        sentences=json.dumps(sentences()))
    print(f"wrote {FIXTURE} ({FIXTURE.stat().st_size} bytes): layers {layers.shape}, {meta}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

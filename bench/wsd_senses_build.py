"""Wall time and peak resident set of `elmo-tasks wsd senses` (sense vectors of every WordNet sense, or of a few
lemmas' with --lemmas), from a cold cache (a new, empty --cache-dir), with the CPU named.

    python bench/wsd_senses_build.py --source minilm --train data/wsd/semcor --threads 2
    python bench/wsd_senses_build.py --source minilm --train data/wsd/semcor --lemmas 200   # 200 tagged lemmas
    python bench/wsd_senses_build.py --source minilm --train data/wsd/semcor --precision auto  # bf16 if native

The command runs as a child process; its peak resident set is the children's ru_maxrss (resource.getrusage).
--lemmas N takes N lemmas SemCor tags, drawn with a fixed seed (the most tagged ones would take most of SemCor's
sentences: the 200 most tagged are in 31k of its 37k); --lemmas a,b,c takes those.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import machine  # also puts the repo on sys.path


def tagged_sample(train: Path, n: int) -> list[str]:
    """``n`` of the lemmas a framework folder's key file tags, drawn with seed 0."""
    lemmas = sorted({k.partition("%")[0] for f in train.glob("*.gold.key.txt")
                     for line in f.read_text().splitlines() for k in line.split()[1:2]})
    return random.Random(0).sample(lemmas, min(n, len(lemmas)))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", default="minilm")
    p.add_argument("--train", default="data/wsd/semcor")
    p.add_argument("--lemmas", help="N (the N most tagged lemmas) or a,b,c")
    p.add_argument("--threads", default="2")
    p.add_argument("--precision", choices=["fp32", "bf16", "auto"],
                   help="the Transformer source's precision (default: the config's, fp32)")
    p.add_argument("--wordnet", help="WordNet 3.0 dict folder (default: the config's)")
    p.add_argument("--log", help="file for the command's stderr (its progress lines), besides the terminal")
    p.add_argument("--keep", help="folder for the output and cache (default: a temporary one, removed)")
    args = p.parse_args()
    lemmas = args.lemmas
    if lemmas and lemmas.isdigit():
        lemmas = ",".join(tagged_sample(Path(args.train), int(lemmas)))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.keep or tmp)
        work.mkdir(parents=True, exist_ok=True)
        cmd = ["elmo-tasks", "wsd", "senses", "--source", args.source, "--train", args.train, "--out",
               str(work / "senses.h5"), "--cache-dir", str(work / "cache"), "--threads", args.threads,
               "--progress", "on", "--force"] + (["--lemmas", lemmas] if lemmas else []) + \
            (["--set", f"sources.{args.source}.precision={args.precision}"] if args.precision else []) + \
            (["--wordnet", args.wordnet] if args.wordnet else [])  # (--force: --keep's rerun)
        env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
        t0 = time.perf_counter()
        if args.log:  # (stderr through tee: the progress lines stay on the terminal)
            with open(args.log, "w") as log:
                child = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
                for line in child.stderr:
                    sys.stderr.write(line)
                    log.write(f"{time.perf_counter() - t0:8.1f} {line}")
                    log.flush()
                rc = child.wait()
        else:
            rc = subprocess.run(cmd, env=env).returncode
        wall = time.perf_counter() - t0
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KB on Linux
        senses = None
        if rc == 0:
            import h5py
            with h5py.File(work / "senses.h5", "r") as f:
                senses = len(f["keys"])
    shown = cmd[:-1] + [f"<{len(lemmas.split(','))} lemmas>"] if lemmas else cmd
    print(json.dumps({"command": " ".join(shown), "exit": rc, "wall_seconds": round(wall, 1),
                      "precision": args.precision or "fp32", "load_average_after": os.getloadavg(),
                      "peak_rss_gb": round(peak_kb / 2 ** 20, 2), "senses": senses,
                      "cpu": machine()["cpu_model"], "cores": os.cpu_count(), "threads": args.threads,
                      "python": sys.version.split()[0]}, indent=1))
    return rc


if __name__ == "__main__":
    sys.exit(main())

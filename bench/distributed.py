"""1 process vs N processes under torchrun: ``embed`` and ``train-bilm`` tokens/s, threads per process adjusted.

Each configuration uses the same cores: 1 process x C threads, then N processes x C/N threads (C =
``--cores``, default all). Launched as a user would: ``python -m torch.distributed.run --standalone
--nproc-per-node N`` (= ``torchrun``), gloo on CPU.

* embed: ``-m elmo_features.embed`` on a synthetic corpus (bench/corpus.py) with a random biLM of
  ``--preset``; tokens/s = real tokens / wall time of the whole command (start-up, model load and, with
  N > 1, rank 0's merge included: what a user waits for). The merged output is checked against the
  1-process output (allclose 1e-6).
* train-bilm: ``elmo-tasks train-bilm`` on the same corpus, the shipped config's model
  (configs/bilm/default.yaml) unless ``--train-config``; 1 process with ``batch_tokens`` N x b against
  N ranks with b each (the same global batches); tokens/s = tokens / the trainer's own elapsed time
  (start-up excluded) and also by wall time.

Writes ``--json`` and a Markdown table next to it (default results/bench/distributed.{json,md}).

    python bench/distributed.py                                   # ~10 min on 2 cores
    python bench/distributed.py --tiny --out /tmp/dist_bench      # a check in about a minute
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np
import yaml

from common import REPO, git_commit, machine, now, write_atomic, write_json  # also puts the repo on sys.path
from corpus import synthetic_corpus
from presets import random_bilm

from elmo_features import save_bilm  # noqa: E402


def _launch(nproc: int, threads: int, module_args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(REPO)}
    if nproc == 1:
        cmd = [sys.executable, "-m", *module_args]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
               "-m", *module_args]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return wall, r


def _max_diff(a: Path, b: Path) -> float:
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        keys = [k for k in fa if k != "sentence_to_index"]
        assert sorted(keys) == sorted(k for k in fb if k != "sentence_to_index"), "different datasets"
        return max(float(np.abs(fa[k][...] - fb[k][...]).max()) for k in keys)


def bench_embed(work: Path, args, tokens: int) -> list[dict]:
    bilm = random_bilm(args.preset)
    opts, weights = work / "model" / "options.json", work / "model" / "weights.hdf5"
    save_bilm(bilm, opts, weights)
    rows, outputs = [], {}
    for nproc in args.procs:
        threads = max(1, args.cores // nproc)
        out = work / f"embed-{nproc}.hdf5"
        wall, _ = _launch(nproc, threads, ["elmo_features.embed", str(work / "corpus.txt"), str(out),
                                           "--options", str(opts), "--weights", str(weights)])
        outputs[nproc] = out
        rows.append({"what": "embed", "processes": nproc, "threads_per_process": threads, "tokens": tokens,
                     "wall_seconds": round(wall, 2), "tokens_per_second": round(tokens / wall, 1),
                     "preset": args.preset})
    if 1 in outputs:
        for row in rows:
            row["max_abs_diff_vs_1_process"] = _max_diff(outputs[1], outputs[row["processes"]])
    return rows


def bench_train(work: Path, args) -> list[dict]:
    base = yaml.safe_load(Path(args.train_config).read_text(encoding="utf-8"))
    base.update(train_files=[str(work / "corpus.txt")], heldout_file=None, max_train_tokens=args.train_tokens,
                checkpoint_minutes=600, eval_every_tokens=10 ** 12)
    if args.tiny:
        base.update(lstm_dim=64, projection_dim=16, filters=[[1, 8], [2, 8], [3, 16]], n_highway=1, vocab_size=2000)
    rows = []
    for nproc in args.procs:
        threads = max(1, args.cores // nproc)
        cfg = {**base, "batch_tokens": args.batch_tokens * max(args.procs) // nproc, "threads": threads,
               "out_dir": str(work / f"train-{nproc}")}
        conf = work / f"train-{nproc}.yaml"
        conf.write_text(yaml.safe_dump(cfg), encoding="utf-8")
        wall, r = _launch(nproc, threads, ["elmo_tasks.cli", "train-bilm", "--config", str(conf), "--no-progress"])
        result = json.loads([line for line in r.stdout.splitlines() if line.startswith("{")][-1])
        rows.append({"what": "train-bilm", "processes": nproc, "threads_per_process": threads,
                     "batch_tokens_per_process": cfg["batch_tokens"], "steps": result["step"],
                     "tokens": result["tokens"], "train_seconds": round(result["elapsed"], 2),
                     "wall_seconds": round(wall, 2), "tokens_per_second": round(result["tokens"] / result["elapsed"], 1),
                     "tokens_per_wall_second": round(result["tokens"] / wall, 1)})
    return rows


def to_markdown(report: dict, main_job: dict | None = None) -> str:
    m = report["machine"]
    lines = ["# 1 process vs torchrun ranks: embed and train-bilm throughput", "",
             f"- command: `{report['command']}`", f"- git commit: `{report['git_commit']}`, {report['date']}",
             f"- machine: {m.get('cpu_model', '?')}, {m.get('cpu_cores', '?')} cores; cores used: {report['cores']}",
             f"- corpus: {report['sentences']} synthetic sentences, {report['tokens']} tokens (bench/corpus.py)", "",
             "| what | processes x threads | tokens | wall s | tokens/s | notes |", "|---|---|---|---|---|---|"]
    for r in report["rows"]:
        if r["what"] == "embed":
            note = f"preset {r['preset']}; tokens/s by wall time (start-up, load, merge included)"
            if "max_abs_diff_vs_1_process" in r:
                note += f"; max |diff| vs 1 process {r['max_abs_diff_vs_1_process']:.1e}"
        else:
            note = (f"batch_tokens {r['batch_tokens_per_process']}/process, {r['steps']} steps; tokens/s by the "
                    f"trainer's elapsed {r['train_seconds']} s (by wall: {r['tokens_per_wall_second']})")
        lines.append(f"| {r['what']} | {r['processes']} x {r['threads_per_process']} | {r['tokens']} | "
                     f"{r['wall_seconds']} | {r['tokens_per_second']} | {note} |")
    if main_job:  # bench/main_job.py's report, measured in its own run
        mm = main_job["machine"]
        lines += ["", "## The main job: `compare --jobs 1` vs `--jobs 2`", "",
                  f"From `{main_job['command']}` (results/bench/main_job.md; the commit and the per-run check are explained in main_job_notes.md), commit `{main_job['git_commit']}`, "
                  f"{main_job['date']}, {mm.get('cpu_model', '?')}, {mm.get('cpu_cores', '?')} cores: the README's "
                  f"main job from a clean clone and a fresh venv (setup: "
                  + ", ".join(f"{k} {v:.0f} s" for k, v in main_job["steps_s"].items()) + ").", "",
                  "| compare | processes x threads | compare wall s | total with setup, min |", "|---|---|---|---|"]
        for v in main_job["variants"]:
            lines.append(f"| --jobs {v['jobs']} | {v['jobs']} x 1 | {v['compare_s']:.0f} | {v['total_s'] / 60:.1f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--procs", type=int, nargs="+", default=[1, 2], help="process counts to compare (default 1 2)")
    ap.add_argument("--sentences", type=int, default=4000)
    ap.add_argument("--preset", default="small", help="biLM architecture for embed (elmo_features.formats.presets)")
    ap.add_argument("--train-config", default=str(REPO / "configs" / "bilm" / "default.yaml"))
    ap.add_argument("--train-tokens", type=int, default=100_000)
    ap.add_argument("--batch-tokens", type=int, default=2000, help="tokens per process at the largest --procs")
    ap.add_argument("--skip", choices=["embed", "train"], action="append", default=[])
    ap.add_argument("--tiny", action="store_true", help="small corpus and model: checks the script in ~a minute")
    ap.add_argument("--out", default=str(REPO / "results" / "bench"), help="folder of distributed.{json,md}")
    ap.add_argument("--render-only", action="store_true",
                    help="measure nothing: rewrite distributed.md from distributed.json and main_job.json in --out")
    args = ap.parse_args()
    out = Path(args.out)
    main_job = json.loads((out / "main_job.json").read_text()) if (out / "main_job.json").exists() else None
    if args.render_only:
        write_atomic(out / "distributed.md", to_markdown(json.loads((out / "distributed.json").read_text()), main_job))
        return
    if args.tiny:
        args.sentences, args.train_tokens, args.batch_tokens = 200, 4000, 400
    corpus = synthetic_corpus(args.sentences)
    tokens = sum(len(s) for s in corpus)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "corpus.txt").write_text("\n".join(" ".join(s) for s in corpus) + "\n", encoding="utf-8")
        rows = [] if "embed" in args.skip else bench_embed(work, args, tokens)
        rows += [] if "train" in args.skip else bench_train(work, args)
    report = {"command": " ".join(["python", *sys.argv]), "git_commit": git_commit(), "date": now(),
              "machine": machine(), "cores": args.cores, "sentences": args.sentences, "tokens": tokens, "rows": rows}
    write_json(out / "distributed.json", report)
    write_atomic(out / "distributed.md", to_markdown(report, main_job))
    print(to_markdown(report, main_job))


if __name__ == "__main__":
    main()

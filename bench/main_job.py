"""The README's main job, timed as a new user meets it: a fresh virtualenv, a clean clone, install, data, compare.

Steps (each timed by wall clock, one after the other, on an otherwise idle machine):

1. ``git clone`` of this repository's HEAD into a temporary folder (a clean clone, no ``runs/``, no cache);
2. a fresh virtualenv; ``pip install torch==2.13.0 && pip install -e .`` (the README's install);
3. ``elmo-tasks data get conll2003 glove-6b-50d``;
4. ``elmo-tasks compare configs/ner_conll2003.yaml --sources glove,elmo_mix,glove+elmo_mix`` with each
   ``--jobs`` value in ``--jobs-list`` (default ``1,2``), each with a cold feature cache and its own runs
   and results folders, so every variant pays for embedding CoNLL-2003 once, as a first run does.

Target: install + data + compare ``--jobs 1`` under 20 minutes on 2 cores. The per-run F1 of
each variant is read back from its summary.json: the ``--jobs`` variants must agree run by run.

    python bench/main_job.py                      # ~35 min on 2 idle cores
    python bench/main_job.py --tiny               # a check in a few minutes (tiny config, no venv)
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

from common import REPO, git_commit, machine, now, write_atomic, write_json  # also puts the repo on sys.path

SOURCES = "glove,elmo_mix,glove+elmo_mix"


def _run(cmd: list[str] | str, cwd: Path, env: dict, log: Path) -> float:
    """Run one step, append its output to ``log``, return wall seconds; stop with the log tail on failure."""
    t0 = time.perf_counter()
    with open(log, "a") as fh:
        fh.write(f"\n$ {cmd if isinstance(cmd, str) else ' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT,
                              shell=isinstance(cmd, str))
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = log.read_text().splitlines()[-30:]
        sys.exit(f"error: step failed ({proc.returncode}): {cmd}\n" + "\n".join(tail))
    return seconds


def _per_run(results_dir: Path) -> dict:
    """{source/seed: test metric} from a compare summary.json."""
    summary = json.loads((results_dir / "summary.json").read_text())
    out = {}
    for run in summary.get("runs", []):
        out[f"{run.get('source')}/seed{run.get('seed')}"] = run.get("test", run.get("metrics"))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs-list", default="1,2")
    ap.add_argument("--tiny", action="store_true",
                    help="configs/tiny_ner_conll2003.yaml in the current environment (no venv, no install)")
    ap.add_argument("--work", help="scratch folder (default: a temporary folder, removed afterwards)")
    ap.add_argument("--out", default=str(REPO / "results" / "bench" / "main_job"),
                    help="writes OUT.json and OUT.md")
    args = ap.parse_args(argv)
    jobs_list = [int(j) for j in args.jobs_list.split(",")]

    tmp = tempfile.TemporaryDirectory(prefix="main_job_") if not args.work else None
    work = Path(args.work or tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    log = work / "main_job.log"
    clone, venv = work / "clone", work / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "ELMO_TASKS_FEATURE_CACHE", "ELMO_TASKS_DOWNLOAD_CACHE")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    steps: dict[str, float] = {}

    steps["clone"] = _run(["git", "clone", "-q", str(REPO), str(clone)], work, env, log)
    commit = git_commit(clone)  # the code that is timed (HEAD may move while this runs)
    config = "configs/tiny_ner_conll2003.yaml" if args.tiny else "configs/ner_conll2003.yaml"
    if args.tiny:
        exe = [sys.executable, "-m", "elmo_tasks.cli"]
        env["PYTHONPATH"] = str(clone)
        install = "(skipped: --tiny)"
        shared = REPO.parent / "shared"  # the tiny config's fixture biLM is at ../shared, relative to the clone
        if shared.exists() and not (work / "shared").exists():
            (work / "shared").symlink_to(shared)
    else:
        steps["venv"] = _run([sys.executable, "-m", "venv", str(venv)], work, env, log)
        env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
        env["VIRTUAL_ENV"] = str(venv)
        install = "pip install torch==2.13.0 && pip install -e ."
        steps["install"] = _run(install, clone, env, log)
        exe = [str(venv / "bin" / "elmo-tasks")]
    steps["data get"] = _run(exe + ["data", "get", "conll2003", "glove-6b-50d"], clone, env, log)

    variants = []
    for jobs in jobs_list:
        tag = f"jobs{jobs}"
        cmd = exe + ["compare", config, "--sources", SOURCES, "--jobs", str(jobs),
                     "--cache-dir", str(work / f"cache-{tag}"), "--runs-dir", str(work / f"runs-{tag}"),
                     "--results-dir", str(work / f"results-{tag}"), "--progress", "off"]
        if args.tiny:
            cmd += ["--seeds", "1"]
        seconds = _run(cmd, clone, env, log)
        variants.append({"jobs": jobs, "compare_s": round(seconds, 1), "per_run": _per_run(work / f"results-{tag}")})
        print(f"compare --jobs {jobs}: {seconds:.0f} s", flush=True)

    setup = sum(steps.values())
    first = variants[0]["per_run"]
    for v in variants:
        v["total_s"] = round(setup + v["compare_s"], 1)
        v["same_runs_as_first"] = v["per_run"] == first
    report = {"command": "python bench/" + Path(__file__).name + (" " + " ".join(argv or sys.argv[1:])).rstrip(),
              "git_commit": commit, "date": now(), "machine": machine(), "config": config,
              "sources": SOURCES, "install": install, "steps_s": {k: round(v, 1) for k, v in steps.items()},
              "variants": variants, "gate_minutes": 20}
    out = Path(args.out)
    write_json(out.with_suffix(".json"), report)
    m = report["machine"]
    lines = [f"# The README's main job, timed from a clean clone and a fresh virtualenv",
             "", f"- command: `{report['command']}`", f"- git commit: `{report['git_commit']}`, {report['date']}",
             f"- machine: {m.get('cpu_model')}, {m.get('cpu_cores')} cores", f"- config: `{config}`, sources "
             f"`{SOURCES}`", "", "| step | wall s |", "|---|---|"]
    lines += [f"| {k} | {v:.1f} |" for k, v in steps.items()]
    lines += ["", "| compare | compare s | total s (setup + compare) | total min | gate (20 min) | same per-run "
              "results as --jobs %d |" % jobs_list[0], "|---|---|---|---|---|---|"]
    for v in variants:
        ok = "met" if v["total_s"] <= 20 * 60 else "missed"
        lines.append(f"| --jobs {v['jobs']} | {v['compare_s']:.1f} | {v['total_s']:.1f} | {v['total_s'] / 60:.1f} "
                     f"| {ok} | {'yes' if v['same_runs_as_first'] else 'NO'} |")
    write_atomic(out.with_suffix(".md"), "\n".join(lines) + "\n")
    print("\n".join(lines))
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()

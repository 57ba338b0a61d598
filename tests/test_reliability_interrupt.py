"""Ctrl-C / SIGTERM stop `compare`, `run` and `train-bilm` within seconds: finished runs kept, pool workers
gone, one line with the command that continues, exit code 128 + signal; the printed command then finishes
the comparison."""
from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from elmo_tasks.cli import main
from signal_helpers import default_stop_signals
from test_reliability_training import SMALL
from test_tasks_helpers import elmo_section, make_bilm, make_env, tagging_config

REPO = Path(__file__).resolve().parents[1]
TARGET = REPO / "tests" / "interrupt_target.py"  # the CLI; heads with a seed other than 1 train forever
STOP_WITHIN = 60.0  # seconds from the signal to the exit (generous for a loaded machine; about one when idle)


@pytest.fixture
def compare_cfg(tmp_path):
    env = make_env(tmp_path)
    cfg = tagging_config(env, max_epochs=2)
    cfg["compare"] = {"seeds": [1, 2, 3], "sources": {"mix": elmo_section(env)}}
    path = tmp_path / "cmp.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _spawn(cmd: list[str], cwd: Path) -> subprocess.Popen:
    """A child in its own session, with the stop signals at their default action whatever the suite inherited."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=default_stop_signals)


def _start(args: list[str], cwd: Path) -> subprocess.Popen:
    return _spawn([sys.executable, str(TARGET), *args], cwd)


def _ignored_signals(pid: int) -> int:
    """The SigIgn mask of a process (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return int(line.split()[1], 16)
    raise AssertionError("no SigIgn line")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc to read signal masks")
def test_children_get_sigint_back_when_the_suite_runs_as_a_background_job(tmp_path):
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell's background job starts
    try:
        proc = _spawn([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path)
        try:
            assert not _ignored_signals(proc.pid) & (1 << (signal.SIGINT - 1))
        finally:
            proc.kill()
            proc.communicate()
    finally:
        signal.signal(signal.SIGINT, old)


def _wait_for(cond, proc: subprocess.Popen, timeout: float = 600.0) -> None:
    t0 = time.monotonic()
    while not cond():
        if proc.poll() is not None:
            pytest.fail(f"the command ended early ({proc.returncode}): {proc.communicate()[1][-2000:]}")
        if time.monotonic() - t0 > timeout:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail("the command did not reach the point to interrupt")
        time.sleep(0.2)


def _stop(proc: subprocess.Popen, signum: int, group: bool) -> tuple[int, str, str]:
    """Send ``signum`` (to the process group, as Ctrl-C in a terminal does, or to the process); the exit code,
    stdout and stderr. It must exit within STOP_WITHIN seconds, and no process of the group may survive."""
    (os.killpg if group else os.kill)(proc.pid, signum)
    try:
        out, err = proc.communicate(timeout=STOP_WITHIN)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"not stopped {STOP_WITHIN}s after signal {signum}")
    deadline = time.monotonic() + 5
    while _alive_in_session(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive_in_session(proc.pid), "a pool worker outlived the command"
    return proc.returncode, out, err


def _alive_in_session(sid: int) -> list[int]:
    """The live (not zombie) processes of session ``sid`` (the command and its workers)."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,sid=,stat="], capture_output=True, text=True).stdout
    return [int(f[0]) for f in map(str.split, out.splitlines()) if int(f[1]) == sid and not f[2].startswith("Z")]


def _summary_runs(results: Path) -> int:
    try:
        return len(json.loads((results / "summary.json").read_text())["runs"])
    except (OSError, ValueError):
        return 0


@pytest.mark.parametrize("jobs,signum,group", [("1", signal.SIGTERM, False), ("2", signal.SIGINT, True)],
                         ids=["serial-sigterm", "jobs2-ctrl-c"])
def test_interrupted_compare_keeps_finished_runs_and_resumes(compare_cfg, tmp_path, jobs, signum, group, capsys):
    torch.set_num_threads(1)
    results = tmp_path / "results"
    args = ["compare", str(compare_cfg), "--results-dir", str(results), "--runs-dir", str(tmp_path / "runs"),
            "--cache-dir", str(tmp_path / "cache"), "--progress", "off", "--set", "training.lr=0.02", "--jobs", jobs]
    proc = _start(args, tmp_path)
    _wait_for(lambda: _summary_runs(results) >= 1, proc)  # seed 1 finished; seed 2 trains forever
    rc, _, err = _stop(proc, signum, group)
    assert rc == 128 + signum, err
    assert "Traceback" not in err
    line = [ln for ln in err.splitlines() if ln.startswith("interrupted")]
    assert len(line) == 1, err
    assert f"1 of 3 runs finished (summary of the finished runs: {results / 'summary.md'})" in line[0]
    summary = json.loads((results / "summary.json").read_text())
    assert [r["seed"] for r in summary["runs"]] == [1]
    finished = Path(summary["runs"][0]["run_dir"])
    assert (finished / "metrics.json").is_file() and (finished / "model.pt").is_file()
    stamp = (finished / "metrics.json").stat().st_mtime_ns
    command = line[0].split("to continue (the finished runs are reused): ")[1]
    parts = shlex.split(command)
    assert parts[:2] == ["elmo-tasks", "compare"] and "--set" in parts and "training.lr=0.02" in parts
    assert parts[parts.index("--resume") + 1] == str(finished.parent)
    # the printed command (run here in-process, without the endless patch) reuses seed 1 and runs the others
    assert main(parts[1:]) == 0
    assert "reusing the finished run" in capsys.readouterr().out
    summary = json.loads((results / "summary.json").read_text())
    assert [r["seed"] for r in summary["runs"]] == [1, 2, 3]
    assert all(Path(r["run_dir"]).parent == finished.parent for r in summary["runs"])
    assert (finished / "metrics.json").stat().st_mtime_ns == stamp  # not trained again


def test_resume_with_another_config_is_refused(compare_cfg, tmp_path, capsys):
    torch.set_num_threads(1)
    common = ["compare", str(compare_cfg), "--results-dir", str(tmp_path / "res"), "--runs-dir", str(tmp_path / "runs"),
              "--cache-dir", str(tmp_path / "cache"), "--progress", "off", "--seeds", "1"]
    assert main(common) == 0
    grid = next((tmp_path / "runs" / "tiny_ner").glob("compare-*"))
    capsys.readouterr()
    assert main([*common, "--resume", str(grid), "--set", "training.lr=0.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert "finished with another config (training differ)" in err and len(err.splitlines()) == 1
    assert main([*common, "--resume", str(tmp_path / "nope")]) == 2
    assert "--resume" in capsys.readouterr().err


def test_resume_after_the_bilm_changed_is_refused(tmp_path, capsys):
    """Same config, other weights behind it (as when `default` is promoted): the finished runs are not reused."""
    torch.set_num_threads(1)
    env = make_env(tmp_path)
    cfg = tagging_config(env, max_epochs=1)
    cfg["compare"] = {"seeds": [1], "sources": {"mix": elmo_section(env)}}
    path = tmp_path / "cmp.yaml"
    path.write_text(yaml.safe_dump(cfg))
    common = ["compare", str(path), "--results-dir", str(tmp_path / "res"), "--runs-dir", str(tmp_path / "runs"),
              "--cache-dir", "none", "--progress", "off"]
    assert main(common) == 0
    grid = next((tmp_path / "runs" / "tiny_ner").glob("compare-*"))
    assert main([*common, "--resume", str(grid)]) == 0  # the same biLM: reused
    assert "reusing the finished run" in capsys.readouterr().out
    make_bilm(env["options"].parent, seed=1)  # new weights in the same files
    assert main([*common, "--resume", str(grid)]) == 2
    err = capsys.readouterr().err.strip()
    assert "finished with another frozen model" in err and "drop --resume" in err and len(err.splitlines()) == 1


def test_interrupted_run_says_the_folder_is_incomplete(tmp_path):
    env = make_env(tmp_path)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(tagging_config(env)))
    out = tmp_path / "the_run"
    proc = _start(["run", str(path), "--out", str(out), "--cache-dir", "none", "--progress", "off",
                   "--set", "training.seed=2"], tmp_path)
    _wait_for(lambda: (out / "model.pt").exists(), proc)  # training (forever)
    rc, _, err = _stop(proc, signal.SIGINT, True)
    assert rc == 130 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == (f"interrupted; the run folder {out} is incomplete (no metrics.json; runs do "
                                            f"not resume); to train it again: elmo-tasks run {path} --set "
                                            f"training.seed=2 --out {out} --cache-dir none --progress off")
    assert not (out / "metrics.json").exists()


def test_interrupted_train_bilm_saves_and_prints_the_resume_command(tmp_path):
    corpus = tmp_path / "a.txt"
    corpus.write_text("".join("the cat sat on a mat and ran\n" for _ in range(40)), encoding="utf-8")
    out = tmp_path / "bilm"
    config = tmp_path / "bilm.yaml"  # checkpoints every few steps, so that one marks "training has started"
    config.write_text(yaml.safe_dump({**SMALL, "train_files": [str(corpus)], "out_dir": str(out),
                                      "max_train_tokens": 10 ** 9, "checkpoint_minutes": 0.001}))
    proc = _start(["train-bilm", "--config", str(config), "--no-progress"], tmp_path)  # the older spelling
    _wait_for(lambda: (out / "checkpoint.pt").exists(), proc)
    rc, stdout, err = _stop(proc, signal.SIGINT, True)
    assert rc == 130 and "Traceback" not in err, err
    assert stdout.strip().splitlines()[-1] == f"stopped; continue with: elmo-tasks train-bilm --config {config} " \
                                              "--resume --progress off"
    assert json.loads(stdout.strip().splitlines()[0])["finished"] is False
    assert (out / "checkpoint.pt").is_file()


def test_a_swallowed_stop_is_raised_again_at_the_next_batch(tmp_path, monkeypatch):
    """Python swallows a KeyboardInterrupt raised while it runs a weakref callback ("Exception ignored in: ...");
    the recorded request stops the command at its next batch all the same (exit 143)."""
    from elmo_features.embedding.embedder import Embedder
    from elmo_tasks import cli

    text = tmp_path / "in.txt"
    text.write_text("".join(f"sentence number {i} here\n" for i in range(40)))
    original, calls = Embedder._run, []

    def swallowing(self, batch):  # the second batch: a SIGTERM lands in a callback that swallows the exception
        calls.append(1)
        if len(calls) == 2:
            try:
                cli._on_stop_signal(signal.SIGTERM, None)
            except KeyboardInterrupt:
                pass  # what Python does with an exception raised inside a weakref callback
        return original(self, batch)

    monkeypatch.setattr(Embedder, "_run", swallowing)
    opts, weights = make_bilm(tmp_path / "bilm")
    rc = main(["embed", str(text), str(tmp_path / "o.hdf5"), "--options", str(opts), "--weights", str(weights),
               "--batch-size", "4", "--progress", "off"])
    assert rc == 143 and len(calls) == 2  # stopped before the third batch
    assert not (tmp_path / "o.hdf5").exists()


def test_repeated_sigterm_at_random_moments_is_never_lost(tmp_path):
    """embed, stopped by SIGTERM at a random moment of its work, 10 times: it exits 143 every time."""
    import random

    opts, weights = make_bilm(tmp_path / "bilm")
    text = tmp_path / "in.txt"
    text.write_text("".join(f"a sentence with some words number {i} in it .\n" for i in range(200_000)))
    rng = random.Random(0)
    codes = []
    for k in range(10):
        out = tmp_path / f"o{k}.hdf5"
        proc = _start(["embed", str(text), str(out), "--options", str(opts), "--weights", str(weights),
                       "--progress", "off", "--chunk-size", "50"], tmp_path)
        _wait_for(lambda: out.with_name(out.name + ".partial").exists(), proc)  # embedding has started
        time.sleep(rng.uniform(0.0, 1.5))
        rc, _, err = _stop(proc, signal.SIGTERM, False)
        codes.append(rc)
        assert rc == 143, err[-1000:]
    assert codes == [143] * 10

"""SIGTERM at random moments of every long command: is a stop ever lost?

    python bench/signal_stress.py --runs 20 --out results/bench/signal_stress.md

Each command (embed, run, compare, predict, train-bilm, wsd) is started on tiny fixtures sized so that it works
for a while, sent SIGTERM after a random delay (seeded: from just after start-up to well inside the work), and
watched: the documented outcome is exit 143 within seconds (or death by the signal itself, when it lands before
the command installed its handler). A run that finishes with exit 0 after the signal lost it. Printed per
command: how the runs ended, and the longest time from the signal to the exit.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, git_commit, machine, now, write_atomic

sys.path.insert(0, str(REPO / "tests"))
from test_tasks_helpers import CONLL_TRAIN, make_bilm, make_glove, tagging_config  # noqa: E402

import yaml  # noqa: E402

COMMANDS = ("embed", "run", "compare", "predict", "train-bilm", "wsd")


def _fixtures(root: Path) -> dict[str, list[str]]:
    """Every command's arguments on tiny inputs that keep it busy for several seconds."""
    opts, weights = make_bilm(root / "bilm")
    glove = make_glove(root / "glove.txt")
    text = root / "text.txt"
    text.write_text("".join(f"a sentence with some words number {i} in it .\n" for i in range(100_000)))
    env = {"conll_train": root / "train.conll", "conll_test": root / "train.conll"}
    env["conll_train"].write_text(CONLL_TRAIN * 200)
    cfg = tagging_config(env, features={"name": "static", "path": str(glove)}, max_epochs=1000)
    other = make_glove(root / "glove_b.txt", seed=1)
    cfg["compare"] = {"sources": {"a": {"name": "static", "path": str(glove)},
                                  "b": {"name": "static", "path": str(other)}}, "seeds": [1, 2]}
    (root / "ner.yaml").write_text(yaml.safe_dump(cfg))
    quick = {**cfg, "training": {**cfg["training"], "max_epochs": 1}}
    (root / "quick.yaml").write_text(yaml.safe_dump(quick))
    _cli(["run", str(root / "quick.yaml"), "--out", str(root / "R"), "--progress", "off"], root)
    corpus = root / "corpus.txt"
    corpus.write_text("".join(f"the cat sat on mat number {i % 50} .\n" for i in range(20_000)))
    (root / "bilm.yaml").write_text(yaml.safe_dump({
        "train_files": [str(corpus)], "char_embedding_dim": 4, "filters": [[1, 4], [2, 8]], "lstm_dim": 8,
        "projection_dim": 4, "vocab_size": 60, "n_negative_samples": 8, "batch_tokens": 200,
        "max_train_tokens": 10**9, "eval_every_tokens": 10**9, "warmup_steps": 2, "threads": 1}))
    _wsd(root, opts, weights)
    o = ["--progress", "off"]
    return {
        "embed": ["embed", str(text), "{out}.hdf5", "--options", str(opts), "--weights", str(weights), *o],
        "run": ["run", str(root / "ner.yaml"), "--out", "{out}", "--cache-dir", "none", *o],
        "compare": ["compare", str(root / "ner.yaml"), "--runs-dir", "{out}/runs", "--results-dir", "{out}/res",
                    "--cache-dir", "none", *o],
        "predict": ["predict", str(root / "R"), str(text), "--out", "{out}.txt"],
        "train-bilm": ["train-bilm", "--config", str(root / "bilm.yaml"), "--set", "out_dir={out}", *o],
        "wsd": ["wsd", "--config", str(root / "wsd.yaml"), "--out", "{out}", "--cache-dir", "none", "--no-plot", *o],
    }


def _wsd(root: Path, opts: Path, weights: Path) -> None:
    """A WSD task of 20,000 training sentences (two lemmas, two senses each) on the tiny biLM."""
    keys = {"bank": ["bank%1:14:00::", "bank%1:17:01::"], "run": ["run%2:38:00::", "run%2:38:01::"]}
    (root / "wordnet").mkdir(exist_ok=True)
    (root / "wordnet" / "index.sense").write_text(
        "".join(f"{k} 0000000{i + 1} {i + 1} 0\n" for ks in keys.values() for i, k in enumerate(ks)))
    for name, n in (("train", 20_000), ("test", 50)):
        d = root / "wsd" / name
        d.mkdir(parents=True, exist_ok=True)
        xml, gold = ['<?xml version="1.0" encoding="UTF-8"?>', '<corpus lang="en">', '<text id="d000">'], []
        for i in range(n):
            lemma = "bank" if i % 2 == 0 else "run"
            iid = f"d000.s{i:05d}.t000"
            xml += [f'<sentence id="d000.s{i:05d}">', f'<wf lemma="x" pos="X">w{i % 7}</wf>',
                    f'<instance id="{iid}" lemma="{lemma}" pos="{"NOUN" if lemma == "bank" else "VERB"}">'
                    f'{lemma}</instance>', "</sentence>"]
            gold.append(f"{iid} {keys[lemma][(i // 2) % 2]}")
        (d / f"{name}.data.xml").write_text("\n".join(xml + ["</text>", "</corpus>"]) + "\n")
        (d / f"{name}.gold.key.txt").write_text("\n".join(gold) + "\n")
    (root / "wsd.yaml").write_text(yaml.safe_dump({
        "name": "stress_wsd", "wordnet": str(root / "wordnet"), "train": str(root / "wsd" / "train"),
        "test": [str(root / "wsd" / "test")], "features": ["elmo"], "knn": ["layers"], "head": None,
        "sources": {"elmo": {"name": "elmo", "options_file": str(opts), "weights_file": str(weights)}}}))


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


def _cli(args: list[str], cwd: Path) -> None:
    subprocess.run([sys.executable, "-m", "elmo_tasks.cli", *args], cwd=cwd, env=_env(), check=True,
                   capture_output=True, timeout=600)


def _handles_sigterm(pid: int) -> bool:
    """The process has installed a SIGTERM handler (the SigCgt mask of Linux /proc)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    except OSError:
        pass
    return False


def stress(args: list[str], root: Path, delay: float, limit: float = 60.0) -> dict:
    """One run: start, SIGTERM ``delay`` s after the command installed its handler (Python's start-up and imports
    take seconds on a busy machine), wait (SIGKILL after ``limit`` s); how it ended."""
    proc = subprocess.Popen([sys.executable, "-m", "elmo_tasks.cli", *args, "--threads", "1"]
                            if args[0] != "predict" else [sys.executable, "-m", "elmo_tasks.cli", *args], cwd=root,
                            env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while not _handles_sigterm(proc.pid) and proc.poll() is None:  # start-up (imports) done: the handler is in
        time.sleep(0.02)
    time.sleep(delay)
    if proc.poll() is not None:
        return {"outcome": "finished before the signal", "rc": proc.returncode, "exit_s": 0.0}
    proc.send_signal(signal.SIGTERM)
    t = time.perf_counter()
    try:
        _, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        return {"outcome": "hung (killed)", "rc": None, "exit_s": limit, "stderr": err[-300:]}
    rc = proc.returncode
    outcome = {143: "stopped (143)", -15: "killed by the signal (default action)",
               0: "LOST: finished with exit 0"}.get(rc, f"other exit {rc}")
    return {"outcome": outcome, "rc": rc, "exit_s": round(time.perf_counter() - t, 2), "stderr": err[-300:]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--commands", nargs="+", default=list(COMMANDS), choices=COMMANDS)
    ap.add_argument("--max-delay", type=float, default=5.0,
                    help="latest signal, in seconds after the command installed its handler")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rng = random.Random(0)
    results: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        commands = _fixtures(root)
        for name in args.commands:
            results[name] = []
            for k in range(args.runs):
                argv = [a.replace("{out}", str(root / f"out-{name}-{k}")) for a in commands[name]]
                r = stress(argv, root, rng.uniform(0.0, args.max_delay))
                results[name].append(r)
                print(f"{name} #{k + 1}: {r['outcome']} ({r['exit_s']} s)", flush=True)
    m = machine()
    lines = [f"# SIGTERM at random moments of every long command ({now()})", "",
             f"* command: `python bench/signal_stress.py --runs {args.runs} --max-delay {args.max_delay:g}"
             + (f" --out {args.out}`" if args.out else "`"),
             f"* git commit: `{git_commit()}`; machine: {m['cpu_cores']} cores, {m['cpu_model']} ({m['cpu_flags']}), "
             f"Python {m['python']}, torch {m['torch']}; every command with one thread",
             "* each run: the command is started, SIGTERM is sent a random time (uniform, seeded) between 0 and "
             f"{args.max_delay:g} s after it installed its signal handler, and its exit is awaited", "",
             "| command | runs | stopped (143) | killed by the signal | finished before the signal | lost "
             "(exit 0 after the signal) | other / hung | longest signal-to-exit (s) |", "|---|---|---|---|---|---|---|---|"]
    for name, rs in results.items():
        count = lambda s: sum(r["outcome"].startswith(s) for r in rs)  # noqa: E731
        other = len(rs) - count("stopped") - count("killed") - count("finished") - count("LOST")
        lines.append(f"| {name} | {len(rs)} | {count('stopped')} | {count('killed')} | {count('finished')} | "
                     f"{count('LOST')} | {other} | {max(r['exit_s'] for r in rs):.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        write_atomic(args.out, text)
        write_atomic(args.out.with_suffix(".json"), json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()

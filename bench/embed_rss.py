"""Peak RSS of ``embed`` for inputs of different sizes: does memory stay flat in the file size?

    python bench/embed_rss.py --preset original --tokens 100000 1000000 --json out.json
    python bench/embed_rss.py --tiny [--allennlp]    # a seconds-long check of the script itself

Writes synthetic corpora (bench/corpus.py) of about the given token counts, saves a random-weight
biLM of the preset, and runs ``python -m elmo_features.embed IN OUT --options .. --weights ..`` once
per size (plus once on a 1-sentence file: the model's own footprint) in a fresh child process; the
child's peak RSS (``ru_maxrss`` from ``os.wait4``) is reported with the growth per million input
tokens. With flat (streamed) memory the growth is ~0. ``--allennlp`` also embeds each file with AllenNLP 2.10.1
(bench/peer_embed_file.py: the loop of AllenNLP 0.9's ``elmo`` command on 2.10.1's ``_ElmoBiLm``, in the venv
of bench/peer_allennlp.py) and reports its peak RSS in the same table.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from common import REPO, git_commit, machine, now, write_atomic, write_json  # noqa: E402
from corpus import synthetic_corpus  # noqa: E402
from presets import random_bilm  # noqa: E402
from peer_allennlp import clean_env, ensure_venv  # noqa: E402
from elmo_features import BiLM, BiLMOptions, save_bilm  # noqa: E402

TINY_OPTIONS = {
    "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8], [3, 16]], "n_highway": 1},
    "lstm": {"dim": 32, "projection_dim": 16, "n_layers": 2, "cell_clip": 3, "proj_clip": 3},
}
MEAN_SENTENCE_TOKENS = 14.5  # bench/corpus.py


def write_corpus(path: Path, n_tokens: int) -> int:
    """A one-sentence-per-line file of about ``n_tokens`` tokens; -> its exact token count."""
    sents = synthetic_corpus(max(1, round(n_tokens / MEAN_SENTENCE_TOKENS)))
    path.write_text("".join(" ".join(s) + "\n" for s in sents), encoding="utf-8")
    return sum(len(s) for s in sents)


def peak_rss_of(argv: list[str], threads: int, code: Path = REPO, env: dict | None = None) -> tuple[float, float]:
    """Run ``argv`` in a child with ``code`` first on its path (or with ``env``); -> (its peak RSS in MB, wall
    seconds). Non-zero exit is an error."""
    env = dict(env if env is not None else dict(os.environ, PYTHONPATH=str(code)), OMP_NUM_THREADS=str(threads))
    t = time.perf_counter()
    p = subprocess.Popen(argv, cwd=code, env=env)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"error: {' '.join(argv)} exited with {p.returncode}")
    return usage.ru_maxrss / 1024, time.perf_counter() - t  # ru_maxrss is in KiB on Linux


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="small", choices=["tiny", "small", "medium", "original"])
    ap.add_argument("--tokens", type=int, nargs="+", default=[100_000, 1_000_000], help="input sizes in tokens")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more embed options (e.g. --top)")
    ap.add_argument("--tiny", action="store_true", help="a quick check: tiny model, 2k and 8k tokens, 1 thread")
    ap.add_argument("--json", type=Path, default=None, help="also writes the same name with .md: a table")
    ap.add_argument("--compare-with", type=Path, metavar="CHECKOUT",
                    help="also run each size with another checkout's elmo_features (e.g. a git worktree of an "
                         "older commit), in the same run")
    ap.add_argument("--allennlp", action="store_true",
                    help="also embed each file with AllenNLP 2.10.1 (bench/peer_embed_file.py in the peer venv)")
    args = ap.parse_args(argv)
    codes = [("this", REPO)] + ([("other", args.compare_with.resolve())] if args.compare_with else [])
    if args.tiny:
        args.preset, args.tokens, args.threads = "tiny", [2_000, 8_000], 1
    torch.set_num_threads(args.threads)
    peer_py = ensure_venv(REPO / ".cache" / "peer_venv") if args.allennlp else None
    with tempfile.TemporaryDirectory(prefix="embed_rss.") as tmp:
        tmp = Path(tmp)
        if args.preset == "tiny":
            torch.manual_seed(0)
            bilm = BiLM(BiLMOptions.from_dict(TINY_OPTIONS))
        else:
            bilm = random_bilm(args.preset)
        save_bilm(bilm, tmp / "options.json", tmp / "weights.hdf5")
        del bilm
        rows = []
        for n in [1, *args.tokens]:
            inp = tmp / f"in_{n}.txt"
            if n == 1:
                inp.write_text("model\n", encoding="utf-8")
                real = 1
            else:
                real = write_corpus(inp, n)
            out = tmp / f"out_{n}.hdf5"
            cmd = [sys.executable, "-m", "elmo_features.embed", str(inp), str(out), "--options",
                   str(tmp / "options.json"), "--weights", str(tmp / "weights.hdf5"), *args.extra]
            runs = [(label, cmd, code, None) for label, code in codes]
            if args.allennlp:
                peer = [str(peer_py), str(REPO / "bench" / "peer_embed_file.py"), str(tmp / "options.json"),
                        str(tmp / "weights.hdf5"), str(inp), str(out), "--threads", str(args.threads)]
                runs.append(("allennlp", peer, REPO, clean_env()))
            for label, cmd_, code, env in runs:
                rss, sec = peak_rss_of(cmd_, args.threads, code, env)
                rows.append({"code": label, "commit": "AllenNLP 2.10.1" if label == "allennlp" else git_commit(code), "tokens": real,
                             "input_bytes": inp.stat().st_size, "peak_rss_mb": rss, "seconds": sec})
                print(f"  [{label}] {real:>9} tokens ({inp.stat().st_size / 1e6:7.2f} MB of text): peak RSS "
                      f"{rss:8.1f} MB ({sec:.1f} s)", flush=True)
                out.unlink(missing_ok=True)
    for label in [c[0] for c in codes] + (["allennlp"] if args.allennlp else []):
        mine = [r for r in rows if r["code"] == label]
        base = mine[0]["peak_rss_mb"]
        for prev, r in zip(mine, mine[1:]):
            r["growth_mb_per_million_tokens"] = (r["peak_rss_mb"] - base) / r["tokens"] * 1e6
            if prev["tokens"] > 1:  # the slope between two real inputs: ~0 when memory is flat in the file size
                r["slope_mb_per_million_tokens"] = ((r["peak_rss_mb"] - prev["peak_rss_mb"])
                                                    / (r["tokens"] - prev["tokens"]) * 1e6)
        print(f"[{args.preset}, {label}] model alone {base:.1f} MB; growth over it per million input tokens: "
              + ", ".join(f"{r['growth_mb_per_million_tokens']:.1f} MB ({r['tokens']} tokens)" for r in mine[1:]))
    if args.json:
        report = {"command": "python bench/embed_rss.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                  "date": now(), "machine": machine(), "preset": args.preset, "threads": args.threads,
                  "extra": args.extra, "rows": rows}
        write_json(args.json, report)
        write_atomic(args.json.with_suffix(".md"), render(report))
    return 0


def render(r: dict) -> str:
    """A Markdown table of a report."""
    m = r["machine"]
    lines = ["# Peak RSS of `embed` against the input size", "", f"- command: `{r['command']}`",
             f"- {r['date']}; machine: {m.get('cpu_model')}, {m.get('cpu_cores')} cores; torch threads {r['threads']}",
             f"- model: random `{r['preset']}` preset; extra embed options: `{' '.join(r['extra']) or '(none)'}`", "",
             "| code (commit) | input tokens | input MB | peak RSS MB | MB per M tokens over the 1-sentence run "
             "| MB per M tokens over the previous size | seconds |", "|---|---|---|---|---|---|---|"]
    fmt = lambda v: "" if v is None else f"{v:.1f}"  # noqa: E731
    for x in sorted(r["rows"], key=lambda x: (x["code"], x["tokens"])):
        lines.append(f"| {x['code']} (`{x['commit']}`) | {x['tokens']:,} | {x['input_bytes'] / 1e6:.2f} | "
                     f"{x['peak_rss_mb']:.1f} | {fmt(x.get('growth_mb_per_million_tokens'))} | "
                     f"{fmt(x.get('slope_mb_per_million_tokens'))} | {x['seconds']:.1f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

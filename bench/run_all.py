"""Run every benchmark and write results/bench/embed_throughput.{json,md}.

    bash bench/run_all.sh            # the same, with a shell trap that always resumes a paused job

Each measurement runs as its own subprocess. If a biLM training job is running (its pid in
runs/bilm/train.pid), it is paused (SIGSTOP) for that one measurement only and resumed (SIGCONT)
right after, also on failure, timeout or Ctrl-C; a measurement taking longer than --step-timeout
seconds is stopped. The load average before each step is recorded (other processes add noise).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, git_commit, machine, now, write_atomic, write_json  # noqa: E402
from elmo_features.model.precision import bf16_cpu_support  # noqa: E402

PID_FILE = REPO / "runs" / "bilm" / "train.pid"
OUT = REPO / "results" / "bench"


def _training_pid() -> int | None:
    try:
        pid = int(PID_FILE.read_text().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def training_paused():
    """SIGSTOP the training job (if any) for the block; SIGCONT it on every way out."""
    pid = _training_pid()
    if pid is None:
        yield None
        return
    def resume(*_):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGCONT)
    old = {s: signal.signal(s, lambda n, f: (resume(), sys.exit(128 + n))) for s in (signal.SIGTERM, signal.SIGHUP)}
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(1.0)  # let its threads leave the CPUs
        yield pid
    finally:
        resume()
        for s, h in old.items():
            signal.signal(s, h)


def run_step(cmd: list[str], timeout: float, pause: bool = True) -> tuple[dict, str]:
    """Run one benchmark command (training paused) and return its JSON output and printed text."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        load = Path("/proc/loadavg").read_text().split()[:3]
        with (training_paused() if pause else contextlib.nullcontext()) as pid:
            proc = subprocess.run(cmd + ["--json", str(out)], cwd=REPO, capture_output=True, text=True,
                                  timeout=timeout)
        print(proc.stdout, end="", flush=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        data = json.loads(out.read_text())
        data.update({"loadavg_before": load, "training_job_paused": pid is not None})
        return data, proc.stdout


def markdown(ours: list[dict], sorted_run: dict, peers: list[dict], meta: dict) -> str:
    m = meta["machine"]
    lines = [
        "# Embedding throughput: elmo_features vs a per-timestep reference and AllenNLP 2.10.1",
        "",
        f"Measured {meta['date']} at commit `{meta['commit']}` on {m['cpu_cores']} CPU cores ({m['cpu_model']}), "
        f"torch {m['torch']}, by `{meta['command']}`. Random weights of the public architectures; a synthetic "
        "CoNLL-2003-like corpus (bench/corpus.py); batches of 64 in corpus order; char ids computed outside the "
        "timer; tokens counted = real tokens (the <S>/</S> the biLM adds are excluded).",
        "",
        "| preset | tokens | ours tokens/s | reference tokens/s | ours / reference | max abs diff vs reference | "
        "matmul GFLOP/s torch.mm / oneDNN | model MFLOP/token | share of roofline (model FLOPs) | "
        "share of roofline (executed FLOPs) | model FLOPs / torch.mm figure |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for step in ours:
        for r in step["results"]:
            mm = r["matmul_gflops"]
            lines.append(
                f"| {r['preset']} | {r['corpus']['tokens']} | {r['ours_tokens_per_s']:.1f} | "
                f"{r['reference_tokens_per_s']:.1f} | {r['speedup_vs_reference']:.2f}x | "
                f"{r['max_abs_diff_vs_reference']:.1e} | {mm['torch_mm']:.1f} / {mm.get('onednn', float('nan')):.1f} | "
                f"{r['model_flops_per_token'] / 1e6:.1f} | {100 * r['model_flops_roofline_share']:.1f}% | "
                f"{100 * r['executed_flops_roofline_share']:.1f}% | {100 * r['model_flops_share_of_torch_mm_peak']:.1f}% |")
    lines += ["", "The same corpus in batches of length-sorted sentences (as `elmo_features.Embedder` batches by default), "
              "ours only:", "",
              "| preset | ours tokens/s | share of roofline (model FLOPs) | share of roofline (executed FLOPs) |",
              "| --- | --- | --- | --- |"]
    for r in sorted_run["results"]:
        lines.append(f"| {r['preset']} | {r['ours_tokens_per_s']:.1f} | {100 * r['model_flops_roofline_share']:.1f}% | "
                     f"{100 * r['executed_flops_roofline_share']:.1f}% |")
    ceiling = {}  # preset -> tokens/s at 100% of the fp32 roofline (executed FLOPs)
    for step in ours:
        for r in step["results"]:
            ceiling[r["preset"]] = r["ours_tokens_per_s"] / r["executed_flops_roofline_share"]
    has_bf16 = any("ours_bf16_tokens_per_s" in r for step in peers for r in step["results"])
    lines += ["", "AllenNLP 2.10.1 `_ElmoBiLm` on the same weights and batches (corpus order):", "",
              "| preset | tokens | AllenNLP tokens/s | ours tokens/s | ours / AllenNLP | max abs diff (per batch) | "
              "ours / AllenNLP if ours ran at 100% of the fp32 roofline |"
              + (" ours bf16 tokens/s | ours bf16 / AllenNLP (fp32) | bf16 max rel diff (per batch) |" if has_bf16 else ""),
              "| --- | --- | --- | --- | --- | --- | --- |" + (" --- | --- | --- |" if has_bf16 else "")]
    for step in peers:
        for r in step["results"]:
            cap = ceiling.get(r["preset"])
            row = (f"| {r['preset']} | {r['corpus']['tokens']} | {r['allennlp_tokens_per_s']:.1f} | "
                   f"{r['ours_tokens_per_s']:.1f} | {r['speedup_vs_allennlp']:.2f}x | "
                   + ", ".join(f"{d:.1e}" for d in r["max_abs_diff_per_batch"]) + " | "
                   + (f"{cap / r['allennlp_tokens_per_s']:.1f}x |" if cap else "- |"))
            if has_bf16:
                row += (f" {r['ours_bf16_tokens_per_s']:.1f} | {r['speedup_bf16_vs_allennlp']:.2f}x | "
                        + ", ".join(f"{d:.1e}" for d in r["bf16_max_rel_diff_per_batch"]) + " |"
                        if "ours_bf16_tokens_per_s" in r else " - | - | - |")
            lines.append(row)
    lines += [
        "",
        "Notes:",
        "- ours: median of 3 passes over the corpus (`ours_runs_tokens_per_s` in the JSON); reference and AllenNLP: one pass.",
        "- Roofline = the best measured fp32 matmul (4096^3, same thread count): PyTorch's default `torch.mm` (MKL "
        "sgemm, which runs AVX2 kernels on AMD CPUs) or oneDNN with a packed weight (what the runtime uses). The last "
        "column divides by the `torch.mm` figure instead, for comparison with earlier notes that used it.",
        "- model FLOPs = `BiLM.flops_per_token()` (2 x multiply-adds of the textbook model, the char CNN over all 50 "
        "character positions). The runtime skips CNN windows that lie inside a token's padding run (they all equal one "
        "such window, so the max-pool is unchanged) and runs the LSTM on the boundary tokens too; the executed-FLOPs "
        "share counts what it really computes (the hardware utilisation).",
        "- The AllenNLP run is stateful (as `_ElmoBiLm` always is); ours runs stateful there too, on the same weights "
        "(written by `save_bilm`) and batches. Diffs are over all layers of the first batches.",
        "- Load average before each step and whether the biLM training job was paused: see the JSON.",
        "- \"100% of the fp32 roofline\": the corpus-order tokens/s ours would reach if every executed FLOP ran at the "
        "measured fp32 matmul peak, divided by AllenNLP's tokens/s: the highest fp32 ratio this CPU allows.",
        "- bf16 columns (CPUs with AVX512-BF16/AMX only): ours with `--precision bf16` (docs/precision.md) on the same "
        "batches in the same run, against AllenNLP in fp32; the diff is max |ours bf16 - AllenNLP| / max |AllenNLP|.",
        "",
        "Commands:",
        "",
    ]
    lines += [f"    {step['command'].split(' --json ')[0]}" for step in ours + [sorted_run] + peers]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", nargs="+", default=["small", "original"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--step-timeout", type=float, default=570.0, help="seconds; keeps each pause under 10 min")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--sentences", type=int, default=None, help="corpus size override (for a quick trial)")
    ap.add_argument("--no-pause", action="store_true", help="do not pause the training job (trial runs)")
    args = ap.parse_args(argv)
    py = sys.executable
    bf16 = ["--bf16"] if bf16_cpu_support()[0] else []  # also ours in bf16 where the CPU has it
    extra = ["--threads", str(args.threads)] + (["--sentences", str(args.sentences)] if args.sentences else [])
    ours, peers = [], []
    for name in args.preset:
        data, _ = run_step([py, "bench/embed_throughput.py", "--preset", name] + extra, args.step_timeout,
                           not args.no_pause)
        ours.append(data)
    sorted_run, _ = run_step([py, "bench/embed_throughput.py", "--preset", *args.preset, "--order", "sorted",
                              "--no-reference"] + extra, args.step_timeout, not args.no_pause)
    for name in args.preset:
        data, _ = run_step([py, "bench/peer_allennlp.py", "--preset", name] + extra + bf16, args.step_timeout,
                           not args.no_pause)
        peers.append(data)
    meta = {"commit": git_commit(), "machine": machine(), "date": now(),
            "command": "bash bench/run_all.sh " + " ".join(argv if argv is not None else sys.argv[1:])}
    meta["command"] = meta["command"].strip()
    write_json(args.out / "embed_throughput.json", {**meta, "throughput": ours, "throughput_sorted": sorted_run,
                                                    "allennlp": peers})
    write_atomic(args.out / "embed_throughput.md", markdown(ours, sorted_run, peers, meta))
    print(f"wrote {args.out / 'embed_throughput.md'} and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())

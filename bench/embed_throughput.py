"""Tokens/s of the ELMo architecture (random weights) on a CoNLL-2003-like synthetic corpus.

    python bench/embed_throughput.py --preset small original --threads 2 --json out.json

For each preset it times elmo_features' BiLM (inference mode, stateless) and the plain
per-timestep reference of ``bench/naive_reference.py`` on the same batches, checks that both give
the same layers, measures the machine's fp32 matmul peak, and reports the share of that roofline.

Tokens counted: real tokens only (the <S>/</S> boundaries that the biLM adds are excluded).
The roofline is the best measured fp32 matmul (PyTorch's default MKL sgemm or oneDNN, see
common.matmul_gflops); the share against MKL's figure alone is reported too. Two kinds of FLOPs:
- model FLOPs: ``BiLM.flops_per_token()`` (2 x multiply-adds of the textbook model: the char CNN
  over all 50 character positions, highway, projection, both LSTM directions) x tokens/s / peak.
- executed FLOPs: the multiply-adds the runtime actually issues (boundary tokens included; the CNN
  evaluates only windows that can differ, see ``CharCNN._pooled_fast``), x 2 / seconds / peak.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from common import machine, make_batches, matmul_gflops, time_batches, write_json  # noqa: E402
from corpus import describe, synthetic_corpus  # noqa: E402
from naive_reference import NaiveBiLM  # noqa: E402
from presets import random_bilm  # noqa: E402
from elmo_features import BiLM, batch_to_ids  # noqa: E402

DEFAULT_SENTENCES = {"small": 2048, "medium": 1536, "original": 1024}


def executed_flops(bilm: BiLM, batches: list[torch.Tensor]) -> int:
    """2 x multiply-adds that the inference path issues on these char-id batches."""
    cnn, o = bilm.char_cnn, bilm.options
    E, Fn, P = o.char_cnn.embedding_dim, o.char_cnn.n_filters, o.lstm.projection_dim
    w_max = max(w for w, _ in o.char_cnn.filters)
    total = 0
    for ids in batches:
        mask = (ids > 0).any(-1)  # (B, T)
        rows = ids[mask]  # (N, 50) real tokens; the two boundary tokens are added below
        run = (rows == rows[:, -1:]).flip(1).cumprod(1).sum(1)
        ks = sorted((50 - run).tolist() + [3, 3])  # <S> and </S>: 3 characters before the padding run
        for s in range(0, len(ks), cnn.group_size):
            grp = ks[s : s + cnn.group_size]
            total += 2 * len(grp) * min(grp[-1] + 1, 50) * w_max * E * Fn  # window matmul
        n_cnn = len(ks)
        total += 2 * n_cnn * (o.char_cnn.n_highway * Fn * 2 * Fn + Fn * P)  # highway + projection
        total += bilm.lstm.flops_per_token() * (int(mask.sum()) + 2 * ids.shape[0])  # LSTM steps incl. boundaries
    return total


def run_preset(name: str, n_sentences: int, batch_size: int, order: str, threads: int, repeats: int,
               reference: bool, peaks: dict) -> dict:
    torch.set_num_threads(threads)
    corpus = synthetic_corpus(n_sentences)
    batches = [batch_to_ids(b) for b in make_batches(corpus, batch_size, order)]
    n_tokens = sum(len(s) for s in corpus)
    bilm = random_bilm(name)

    def ours(ids):
        with torch.inference_mode():
            return bilm(ids).layers

    runs = [time_batches(ours, batches, n_tokens)["tokens_per_s"] for _ in range(repeats)]
    tps = statistics.median(runs)
    model_fpt = bilm.flops_per_token()
    exec_flops = executed_flops(bilm, batches)
    res = {
        "preset": name, "corpus": describe(corpus), "batch_size": batch_size, "batches": len(batches),
        "order": order, "threads": threads, "ours_tokens_per_s": tps, "ours_runs_tokens_per_s": runs,
        "model_flops_per_token": model_fpt, "executed_flops_per_token": exec_flops / n_tokens,
        "matmul_gflops": peaks, "matmul_peak_gflops": peaks["peak"],
        "model_flops_roofline_share": model_fpt * tps / (peaks["peak"] * 1e9),
        "executed_flops_roofline_share": exec_flops / n_tokens * tps / (peaks["peak"] * 1e9),
        "model_flops_share_of_torch_mm_peak": model_fpt * tps / (peaks["torch_mm"] * 1e9),
    }
    if reference:
        naive = NaiveBiLM(bilm)
        ref = time_batches(naive, batches, n_tokens)
        with torch.inference_mode():
            diff = max(float((bilm(b).layers - naive(b)).abs().max()) for b in batches[:2])
        res.update({"reference_tokens_per_s": ref["tokens_per_s"], "speedup_vs_reference": tps / ref["tokens_per_s"],
                    "max_abs_diff_vs_reference": diff})
    return res


def report(r: dict) -> str:
    lines = [f"[{r['preset']}] {r['corpus']['sentences']} sentences, {r['corpus']['tokens']} tokens, "
             f"{r['batches']} batches of {r['batch_size']} ({r['order']} order), {r['threads']} threads",
             f"  ours: {r['ours_tokens_per_s']:.1f} tokens/s (median of {len(r['ours_runs_tokens_per_s'])} passes: "
             + ", ".join(f"{x:.1f}" for x in r["ours_runs_tokens_per_s"]) + ")"]
    if "reference_tokens_per_s" in r:
        lines.append(f"  per-timestep reference: {r['reference_tokens_per_s']:.1f} tokens/s -> ours is "
                     f"{r['speedup_vs_reference']:.2f}x; max abs diff of the layers {r['max_abs_diff_vs_reference']:.2e}")
    lines.append(f"  roofline {r['matmul_peak_gflops']:.1f} GFLOP/s; model {r['model_flops_per_token'] / 1e6:.1f} "
                 f"MFLOP/token -> {100 * r['model_flops_roofline_share']:.1f}% of roofline "
                 f"({100 * r['model_flops_share_of_torch_mm_peak']:.1f}% of the torch.mm figure); executed "
                 f"{r['executed_flops_per_token'] / 1e6:.1f} MFLOP/token -> {100 * r['executed_flops_roofline_share']:.1f}%")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", nargs="+", default=["small", "original"], choices=sorted(DEFAULT_SENTENCES))
    ap.add_argument("--sentences", type=int, default=None, help="corpus size (default: per preset)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--order", choices=["corpus", "sorted"], default="corpus",
                    help="batches in corpus order, or after sorting sentences by length")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="timed passes of ours (the median is reported)")
    ap.add_argument("--no-reference", action="store_true", help="skip the (slow) per-timestep reference")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures as JSON here")
    args = ap.parse_args(argv)
    peaks = matmul_gflops(args.threads)
    print(f"fp32 matmul, {args.threads} threads, 4096^3: " + ", ".join(f"{k} {v:.1f}" for k, v in peaks.items())
          + " GFLOP/s")
    results = []
    for name in args.preset:
        r = run_preset(name, args.sentences or DEFAULT_SENTENCES[name], args.batch_size, args.order, args.threads,
                       args.repeats, not args.no_reference, peaks)
        print(report(r), flush=True)
        results.append(r)
    if args.json:
        write_json(args.json, {"machine": machine(), "matmul_gflops": peaks, "results": results,
                               "command": "python " + " ".join([sys.argv[0]] + (argv or sys.argv[1:]))})
    return 0


if __name__ == "__main__":
    sys.exit(main())

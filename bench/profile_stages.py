"""Where the embedding time goes: a per-stage profile of the biLM's inference path for a preset.

    python bench/profile_stages.py --preset original --threads 2 --sentences 512
    python bench/profile_stages.py --tiny            # a seconds-long check of the script itself

Runs ``BiLM`` on char-id batches of the synthetic corpus (as bench/embed_throughput.py does: batches
of 64 in corpus order, inference mode, one warm-up batch) with timers wrapped around the stages:
- char CNN: the window GEMM over character windows, max-pool and activation (``CharCNN._pooled_fast``);
- highway layers; projection (the rest of ``CharCNN.forward``);
- per LSTM layer: the input GEMM (all steps' input projections), the recurrent GEMMs (h @ W_state and
  the cell->projection GEMM, per step), and the rest of the recurrent loop (gate nonlinearities, cell
  update, clipping); these three are summed over the two directions, which run at the same time on
  two threads when >= 2 threads are used, so their sum can exceed the layer's wall time;
- output assembly: everything in ``BiLM.forward`` outside the token layer and the LSTM (boundary
  tokens, stacking the layers, masking).
GEMM stages also show GFLOP/s (2 x M x K x N per call); ``--peak`` adds the fp32 matmul peak to
compare with. Timers add ~1 us per call, so the profile's total runs a little slower than the plain
benchmark; the shares are what matter. Also prints the CPU model and flags and the kernel path chosen (MKL vs oneDNN, thread layout; bench/kernel_info.py).
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from common import machine, make_batches, matmul_gflops, write_json  # noqa: E402
from corpus import describe as describe_corpus, synthetic_corpus  # noqa: E402
from kernel_info import cpu_summary, describe, kernel_path  # noqa: E402
from presets import random_bilm  # noqa: E402
from elmo_features import BiLM, BiLMOptions, batch_to_ids  # noqa: E402
from elmo_features.model.bilm import BiLM as _BiLM  # noqa: E402
from elmo_features.model.char_cnn import CharCNN, Highway  # noqa: E402
from elmo_features.model.lstm import ElmoLstm  # noqa: E402
from elmo_features.model.precision import set_precision  # noqa: E402

TINY_OPTIONS = {
    "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8], [3, 16]], "n_highway": 1},
    "lstm": {"dim": 32, "projection_dim": 16, "n_layers": 2, "cell_clip": 3, "proj_clip": 3},
}


class Timers:
    """Thread-safe accumulated seconds, calls and FLOPs per stage name."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.flops: dict[str, float] = defaultdict(float)
        self._lock = threading.Lock()

    def add(self, name: str, seconds: float, flops: float = 0.0) -> None:
        with self._lock:
            self.seconds[name] += seconds
            self.calls[name] += 1
            self.flops[name] += flops

    def wrap(self, name: str, fn):
        def timed(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.add(name, time.perf_counter() - t)
        return timed


class TimedLinear:
    """A PackedLinear / Bf16Linear whose calls are timed (and FLOPs counted) under ``name``."""

    def __init__(self, lin, name: str, timers: Timers):
        self.lin, self.name, self.timers = lin, name, timers

    def _timed(self, fn, x, *rest):
        t = time.perf_counter()
        y = fn(x, *rest)
        self.timers.add(self.name, time.perf_counter() - t, 2.0 * x.shape[0] * x.shape[1] * y.shape[1])
        return y

    def __call__(self, x):
        return self._timed(self.lin, x)

    def add_to(self, x, other):
        return self._timed(self.lin.add_to, x, other)


@contextmanager
def instrumented(timers: Timers):
    """Patch the stage methods with timed wrappers for the duration of the block."""
    saved = [(CharCNN, "_pooled_fast"), (CharCNN, "forward"), (Highway, "forward"), (ElmoLstm, "_inference_weights"),
             (ElmoLstm, "_layer_packed"), (ElmoLstm, "_direction_packed"), (ElmoLstm, "forward"), (_BiLM, "forward"),
             (_BiLM, "_token_layer")]
    originals = [(cls, name, getattr(cls, name)) for cls, name in saved]
    orig_weights, orig_layer, orig_direction = ElmoLstm._inference_weights, ElmoLstm._layer_packed, ElmoLstm._direction_packed

    def weights(self, k):
        lins = orig_weights(self, k)
        return [(TimedLinear(a, f"lstm{k} input GEMM", timers), TimedLinear(b, f"lstm{k} recurrent GEMMs", timers),
                 TimedLinear(c, f"lstm{k} recurrent GEMMs", timers)) for a, b, c in lins]

    def layer(self, k, *a, **kw):
        t = time.perf_counter()
        try:
            return orig_layer(self, k, *a, **kw)
        finally:
            timers.add(f"lstm{k} layer wall", time.perf_counter() - t)

    def direction(self, lins, *a, **kw):
        t = time.perf_counter()
        try:
            return orig_direction(self, lins, *a, **kw)
        finally:
            timers.add(lins[0].name.split()[0] + " directions", time.perf_counter() - t)

    CharCNN._pooled_fast = timers.wrap("char CNN windows+pool", CharCNN._pooled_fast)
    CharCNN.forward = timers.wrap("token layer: CharCNN.forward", CharCNN.forward)
    Highway.forward = timers.wrap("highway", Highway.forward)
    ElmoLstm._inference_weights = weights
    ElmoLstm._layer_packed = layer
    ElmoLstm._direction_packed = direction
    ElmoLstm.forward = timers.wrap("LSTM total", ElmoLstm.forward)
    _BiLM.forward = timers.wrap("BiLM.forward", _BiLM.forward)
    _BiLM._token_layer = timers.wrap("token layer total", _BiLM._token_layer)
    try:
        yield
    finally:
        for cls, name, fn in originals:
            setattr(cls, name, fn)


def build(name: str) -> BiLM:
    if name != "tiny":
        return random_bilm(name)
    torch.manual_seed(0)
    bilm = BiLM(BiLMOptions.from_dict(TINY_OPTIONS)).eval()
    with torch.no_grad():
        for p in bilm.parameters():
            p.normal_(0.0, 0.3).requires_grad_(False)
    return bilm


def profile(bilm: BiLM, batches: list[torch.Tensor], n_tokens: int) -> dict:
    """Run every batch once under the timers (after one untimed warm-up batch); -> stage table."""
    with torch.inference_mode():
        bilm(batches[0])
    timers = Timers()
    with instrumented(timers), torch.inference_mode():
        t = time.perf_counter()
        for ids in batches:
            bilm(ids)
        wall = time.perf_counter() - t
    s = timers.seconds
    n_layers = bilm.options.lstm.n_layers
    stages = [("char CNN (window GEMM, max-pool, activation)", s["char CNN windows+pool"], "char CNN windows+pool"),
              ("highway", s["highway"], "highway"),
              ("projection", s["token layer: CharCNN.forward"] - s["char CNN windows+pool"] - s["highway"], None),
              ("token layer: boundaries and assembly", s["token layer total"] - s["token layer: CharCNN.forward"], None)]
    for k in range(n_layers):
        loop = s[f"lstm{k} layer wall"]
        stages += [(f"LSTM layer {k}: input GEMM (sum of 2 directions)", s[f"lstm{k} input GEMM"], f"lstm{k} input GEMM"),
                   (f"LSTM layer {k}: recurrent GEMMs (sum of 2 directions)", s[f"lstm{k} recurrent GEMMs"],
                    f"lstm{k} recurrent GEMMs"),
                   (f"LSTM layer {k}: rest of the loop: gates, cell update (sum of 2)",
                    s[f"lstm{k} directions"] - s[f"lstm{k} input GEMM"] - s[f"lstm{k} recurrent GEMMs"], None),
                   (f"LSTM layer {k}: wall time of the layer", loop, None)]
    lstm_layers = sum(s[f"lstm{k} layer wall"] for k in range(n_layers))
    stages += [("LSTM: packing, skip connections, unpacking", s["LSTM total"] - lstm_layers, None),
               ("output assembly (layer stack, mask)", s["BiLM.forward"] - s["token layer total"] - s["LSTM total"], None),
               ("total (BiLM.forward)", s["BiLM.forward"], None)]
    rows = []
    for label, sec, key in stages:
        gflops = timers.flops[key] / sec / 1e9 if key and timers.flops.get(key) and sec > 0 else None
        rows.append({"stage": label, "seconds": sec, "share": sec / s["BiLM.forward"], "gflops": gflops,
                     "calls": timers.calls.get(key, 0) if key else None})
    return {"stages": rows, "wall_seconds": wall, "tokens_per_s": n_tokens / wall}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="original", choices=["tiny", "small", "medium", "original"])
    ap.add_argument("--sentences", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--force-emulated", action="store_true", help="bf16 on a CPU without AVX512-BF16/AMX (emulated)")
    ap.add_argument("--tiny", action="store_true", help="a quick check: tiny model, 32 sentences, 1 thread")
    ap.add_argument("--peak", action="store_true", help="also measure the fp32 matmul peak (4096^3) for comparison")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.tiny:
        args.preset, args.sentences, args.threads = "tiny", 32, 1
    torch.set_num_threads(args.threads)
    print(describe(), flush=True)
    bilm = build(args.preset)
    if args.precision != "fp32":
        set_precision(bilm, args.precision, force_emulated=args.force_emulated)  # PrecisionError: one line
    corpus = synthetic_corpus(args.sentences)
    batches = [batch_to_ids(b) for b in make_batches(corpus, args.batch_size, "corpus")]
    n_tokens = sum(len(s) for s in corpus)
    res = profile(bilm, batches, n_tokens)
    if args.peak:
        res["matmul_gflops"] = matmul_gflops(args.threads)
        print("fp32 matmul peak, 4096^3: " + ", ".join(f"{k} {v:.1f}" for k, v in res["matmul_gflops"].items())
              + " GFLOP/s")
    print(f"[{args.preset}, {args.precision}] {len(corpus)} sentences, {n_tokens} tokens, {len(batches)} batches of "
          f"{args.batch_size}, {args.threads} threads: {res['tokens_per_s']:.1f} tokens/s under the timers")
    for r in res["stages"]:
        g = f"  {r['gflops']:7.1f} GFLOP/s" if r["gflops"] else ""
        print(f"  {r['stage']:<64} {r['seconds']:9.4f} s {100 * r['share']:6.1f}%{g}")
    if args.json:
        write_json(args.json, {"machine": machine(), "cpu": cpu_summary(), "kernels": kernel_path(),
                               "preset": args.preset, "precision": args.precision, "corpus": describe_corpus(corpus),
                               "threads": args.threads, **res})
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # a user-facing error of elmo_features (e.g. bf16 refused): one line, exit 2
        from elmo_features.util.errors import ElmoTasksError

        if not isinstance(e, ElmoTasksError):
            raise
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)

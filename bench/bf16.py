"""fp32 vs bf16 embedding, side by side in one run: tokens/s and the error of every layer.

    python bench/bf16.py --preset small original --sentences 10000 --threads 2 --json out.json
    python bench/bf16.py --tiny --force-emulated          # a seconds-long check of the script itself

Prints the CPU model and flags and the kernel path (bench/kernel_info.py). For each preset (random
weights, bench/presets.py) on the synthetic corpus (bench/corpus.py): ``Embedder`` tokens/s in fp32
and in bf16 (the same batches; two model copies with the same weights, timed passes alternating
fp32/bf16, median reported), then per layer max |bf16 - fp32|, that over max |fp32| ("rel"), and the
mean abs error. The same errors on AllenNLP's tiny-ELMo fixture (trained weights) when found.

Without AVX512-BF16 or AMX the script refuses (exit 2): bf16 would run emulated and its speed would
mean nothing. ``--force-emulated`` runs the emulated path anyway (errors are then still meaningful:
the emulation is the same arithmetic up to fp32 summation order; tokens/s are not).
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from common import REPO, machine, write_json  # noqa: E402
from corpus import describe as describe_corpus, synthetic_corpus  # noqa: E402
from kernel_info import cpu_summary, describe, kernel_path  # noqa: E402
from presets import random_bilm  # noqa: E402
from elmo_features import BiLM, BiLMOptions, Embedder, load_bilm  # noqa: E402
from elmo_features.model.precision import set_precision  # noqa: E402

FIXTURE = REPO.parent / "shared" / "data" / "allennlp_elmo_fixture"
TINY_OPTIONS = {
    "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8], [3, 16]], "n_highway": 1},
    "lstm": {"dim": 32, "projection_dim": 16, "n_layers": 2, "cell_clip": 3, "proj_clip": 3},
}


class LayerErrors:
    """Running per-layer max abs error, max |fp32|, and mean abs error over many sentences."""

    def __init__(self):
        self.max_abs: list[float] = []
        self.max_ref: list[float] = []
        self.sum_abs: list[float] = []
        self.n = 0

    def add(self, ref: np.ndarray, out: np.ndarray) -> None:
        """ref, out: (L, n, D) of one sentence."""
        if not self.max_abs:
            L = ref.shape[0]
            self.max_abs, self.max_ref, self.sum_abs = [0.0] * L, [0.0] * L, [0.0] * L
        d = np.abs(out.astype(np.float64) - ref)  # (L, n, D)
        for k in range(ref.shape[0]):
            self.max_abs[k] = max(self.max_abs[k], float(d[k].max(initial=0.0)))
            self.max_ref[k] = max(self.max_ref[k], float(np.abs(ref[k]).max(initial=0.0)))
            self.sum_abs[k] += float(d[k].sum())
        self.n += d[0].size

    def table(self) -> list[dict]:
        return [{"layer": k, "max_abs": m, "max_abs_fp32": r, "rel": m / r if r else 0.0,
                 "mean_abs": s / max(self.n, 1)} for k, (m, r, s) in enumerate(zip(self.max_abs, self.max_ref, self.sum_abs))]


def compare(bilm32: BiLM, bilm16: BiLM, sentences: list[list[str]], batch_size: int) -> list[dict]:
    """Per-layer errors of bilm16 against bilm32 on ``sentences`` (same batches, streamed)."""
    errs = LayerErrors()
    e32, e16 = Embedder(bilm32, batch_size=batch_size, progress=False), Embedder(bilm16, batch_size=batch_size, progress=False)
    for (i32, a32), (i16, a16) in zip(e32.embed_batches(sentences), e16.embed_batches(sentences)):
        assert i32 == i16
        for r, o in zip(a32, a16):
            errs.add(r, o)
    return errs.table()


def tokens_per_s(bilm: BiLM, sentences: list[list[str]], batch_size: int) -> float:
    """One timed pass of a fresh Embedder (outputs discarded); after a one-batch warm-up."""
    emb = Embedder(bilm, batch_size=batch_size, progress=False)
    for _ in emb.embed_batches(sentences[:batch_size]):
        pass
    t = time.perf_counter()
    for _ in emb.embed_batches(sentences):
        pass
    return sum(len(s) for s in sentences) / (time.perf_counter() - t)


def run_preset(name: str, n_sentences: int, batch_size: int, repeats: int, emulated: bool) -> dict:
    bilm32 = BiLM(BiLMOptions.from_dict(TINY_OPTIONS)).eval() if name == "tiny" else random_bilm(name)
    if name == "tiny":
        torch.manual_seed(0)
        with torch.no_grad():
            for p in bilm32.parameters():
                p.normal_(0.0, 0.3).requires_grad_(False)
    bilm16 = copy.deepcopy(bilm32)
    set_precision(bilm16, "bf16", force_emulated=emulated)
    corpus = synthetic_corpus(n_sentences)
    runs32, runs16 = [], []
    for _ in range(repeats):  # alternating, so drift in machine load hits both alike
        runs32.append(tokens_per_s(bilm32, corpus, batch_size))
        runs16.append(tokens_per_s(bilm16, corpus, batch_size))
    t32, t16 = statistics.median(runs32), statistics.median(runs16)
    return {"preset": name, "corpus": describe_corpus(corpus), "batch_size": batch_size,
            "fp32_tokens_per_s": t32, "bf16_tokens_per_s": t16, "speedup": t16 / t32,
            "fp32_runs": runs32, "bf16_runs": runs16, "bf16_emulated": emulated,
            "layers": compare(bilm32, bilm16, corpus, batch_size)}


def run_fixture(path: Path, emulated: bool) -> dict | None:
    if not (path / "options.json").exists():
        return None
    bilm32 = load_bilm(path / "options.json", path / "lm_weights.hdf5")
    bilm16 = copy.deepcopy(bilm32)
    set_precision(bilm16, "bf16", force_emulated=emulated)
    s = json.loads((path / "sentences.json").read_text(encoding="utf-8"))
    sentences = [line.split() for group in s for line in group]
    return {"fixture": str(path), "sentences": len(sentences), "layers": compare(bilm32, bilm16, sentences, 64)}


def layer_lines(layers: list[dict]) -> list[str]:
    return [f"    layer {r['layer']}: max abs {r['max_abs']:.2e} (max |fp32| {r['max_abs_fp32']:.2f}, rel "
            f"{r['rel']:.2e}), mean abs {r['mean_abs']:.2e}" for r in layers]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", nargs="+", default=["small", "original"], choices=["tiny", "small", "medium", "original"])
    ap.add_argument("--sentences", type=int, default=10_000, help="synthetic corpus size (default 10000)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="timed passes per precision (median reported)")
    ap.add_argument("--fixture", type=Path, default=FIXTURE, help="AllenNLP's tiny-ELMo fixture folder")
    ap.add_argument("--force-emulated", action="store_true",
                    help="run the emulated bf16 path on a CPU without AVX512-BF16/AMX (errors only; speed meaningless)")
    ap.add_argument("--tiny", action="store_true", help="a quick check: tiny model, 64 sentences, 1 thread, 1 pass")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures as JSON here")
    args = ap.parse_args(argv)
    if args.tiny:
        args.preset, args.sentences, args.threads, args.repeats = ["tiny"], 64, 1, 1
    torch.set_num_threads(args.threads)
    print(describe(), flush=True)
    cpu = cpu_summary()
    if not cpu["bf16_native"] and not args.force_emulated:
        print(f"error: this CPU has no native bf16 ({cpu['bf16_text']}); bf16 tokens/s would measure the "
              "emulation. Run on a CPU with AVX512-BF16/AMX, or pass --force-emulated for the error figures only",
              file=sys.stderr)
        return 2
    emulated = args.force_emulated
    if emulated:
        print("bf16 path: EMULATED (rounded operands through fp32 GEMMs): tokens/s are not bf16 speed")
    results = []
    for name in args.preset:
        r = run_preset(name, args.sentences, args.batch_size, args.repeats, emulated)
        print(f"[{name}] {r['corpus']['sentences']} sentences, {r['corpus']['tokens']} tokens, batch {r['batch_size']}, "
              f"{args.threads} threads: fp32 {r['fp32_tokens_per_s']:.1f} tok/s, bf16 {r['bf16_tokens_per_s']:.1f} tok/s "
              f"({r['speedup']:.2f}x)", flush=True)
        print("\n".join(layer_lines(r["layers"])), flush=True)
        results.append(r)
    fixture = run_fixture(args.fixture, emulated)
    if fixture is None:
        print(f"fixture: {args.fixture} not found; skipped")
    else:
        print(f"[fixture] {fixture['sentences']} sentences of {fixture['fixture']}")
        print("\n".join(layer_lines(fixture["layers"])))
    if args.json:
        write_json(args.json, {"machine": machine(), "cpu": cpu, "kernels": kernel_path(), "results": results,
                               "fixture": fixture, "threads": args.threads,
                               "command": "python " + " ".join([sys.argv[0]] + (argv or sys.argv[1:]))})
    return 0


if __name__ == "__main__":
    sys.exit(main())

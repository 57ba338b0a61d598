"""Word tokens/s of the ``transformer`` feature source end to end vs a bare forward pass on the same batches, in fp32
and/or bf16, with a breakdown of where the end-to-end time goes.

    python bench/transformer_throughput.py --model minilm-l6 --threads 2 --out results/bench                # ~3 min
    python bench/transformer_throughput.py --model minilm-l6 --precision fp32 bf16 --out results/bench      # ~5 min
    python bench/transformer_throughput.py --tiny --precision fp32 bf16 --force-emulated --out /tmp/x         # seconds

End to end = ``FeatureCache(fresh folder).embed(TransformerEmbedder(..., precision=P), sentences)``: the cache key
(the encoder's fingerprint), tokenization with word ids, windows, length-sorted batching, the forward pass with
every hidden state, pooling pieces to words, and writing the HDF5 cache file. Bare = ``model(**batch,
output_hidden_states=True)`` on exactly the batches the embedder forms (input ids and attention masks built before
the timer), under ``torch.autocast(bfloat16)`` for bf16, nothing else. Both under ``torch.inference_mode``; every
(precision, path) pass interleaved in one loop, median of ``--repeats`` passes after a warm-up pass. Overhead =
end-to-end seconds / bare seconds - 1 (target: at most 5%).

``--stages`` adds one end-to-end pass per precision with timers around its stages (fingerprint, tokenization and
windows, forward passes, pooling, the HDF5 writes; the rest: batch building, assembling sentences from windows).
With bf16 it also reports bf16 against fp32 on the first 500 sentences: the smallest cosine of a word vector and the
largest absolute difference, per hidden state. Prints the CPU model and its bf16 flags; bf16 on a CPU without
AVX512-BF16/AMX is refused (its speed would measure the emulation) unless ``--force-emulated``.

Corpus: the CoNLL-2003-like sentence lengths of ``bench/corpus.py`` with words drawn (Zipf, seed 2003) from the
model's own whole-word vocabulary entries, so pieces per word are like real text's, not like random strings'.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from common import git_commit, machine, now, write_atomic, write_json  # noqa: E402
from corpus import _sentence_lengths  # noqa: E402
from kernel_info import cpu_summary  # noqa: E402
import elmo_features.embedding.feature_cache as feature_cache  # noqa: E402
import elmo_features.encoders.embedder as encoder_embedder  # noqa: E402
from elmo_features import FeatureCache  # noqa: E402
from elmo_features.encoders import TransformerEmbedder, load_encoder  # noqa: E402
from elmo_features.encoders.precision import forward_precision  # noqa: E402
from elmo_features.model.precision import EMULATE_ENV  # noqa: E402

TARGET_OVERHEAD = 0.05
COMPARED_SENTENCES = 500  # bf16 vs fp32 vectors


def corpus_from_vocab(tokenizer, n: int, seed: int = 2003) -> list[list[str]]:
    """n sentences of CoNLL-like lengths; words: the tokenizer's whole-word entries, Zipf-weighted by rank."""
    words = [w for w, _ in sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
             if w.isalpha() and w.isascii() and not w.startswith(("##", "[", "<"))]
    words = [w.lstrip("\u0120") for w in words] or ["word"]
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, len(words) + 1) ** 1.05
    p /= p.sum()
    return [[words[i] for i in rng.choice(len(words), size=k, p=p)] for k in _sentence_lengths(rng, n)]


def bare_inputs(emb: TransformerEmbedder, sentences) -> list[dict]:
    """The embedder's own batches as padded model inputs."""
    pieces = emb.plan(sentences)
    pad = emb.encoder.tokenizer.pad_token_id or 0
    out = []
    for batch in emb._batches(pieces):
        P = max(len(pieces[k].ids) for k in batch)
        ids = torch.full((len(batch), P), pad, dtype=torch.long)  # (B, P)
        mask = torch.zeros((len(batch), P), dtype=torch.long)  # (B, P)
        for b, k in enumerate(batch):
            ids[b, : len(pieces[k].ids)] = torch.tensor(pieces[k].ids)
            mask[b, : len(pieces[k].ids)] = 1
        out.append({"input_ids": ids, "attention_mask": mask})
    return out


@contextlib.contextmanager
def stage_timers(enc, times: dict):
    """Time the stages of an end-to-end pass (patched in for one pass, restored after)."""
    import h5py

    def timed(name, fn):
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                times[name] = times.get(name, 0.0) + time.perf_counter() - t
        return wrapper

    patches = [(enc.model, "forward", "forward passes"), (TransformerEmbedder, "plan", "tokenization and windows"),
               (encoder_embedder, "pool_pieces", "pooling pieces to words"),
               (feature_cache, "embedder_fingerprint", "fingerprint (cache key)"),
               (h5py.Group, "create_dataset", "HDF5 writes")]
    saved = [(obj, attr, obj.__dict__.get(attr, None) if isinstance(obj, type) else getattr(obj, attr))
             for obj, attr, _ in patches]
    for obj, attr, name in patches:
        setattr(obj, attr, timed(name, getattr(obj, attr)))
    try:
        yield
    finally:
        for obj, attr, old in saved:
            if obj is enc.model:
                del obj.forward  # (the instance attribute: the class's forward again)
            else:
                setattr(obj, attr, old)


def vector_agreement(enc, sentences, layers: int) -> dict:
    """bf16 against fp32 on ``sentences``: the smallest cosine of two word vectors and the largest abs difference,
    per hidden state."""
    ref = TransformerEmbedder(enc, progress=False).embed_sentences(sentences)
    low = TransformerEmbedder(enc, progress=False, precision="bf16").embed_sentences(sentences)
    cos, diff = np.ones(layers), np.zeros(layers)
    for r, a in zip(ref, low):  # (L, n, D) each
        c = (r * a).sum(-1) / np.maximum(np.linalg.norm(r, axis=-1) * np.linalg.norm(a, axis=-1), 1e-30)  # (L, n)
        cos = np.minimum(cos, c.min(axis=1, initial=1.0))
        diff = np.maximum(diff, np.abs(r - a).max(axis=(1, 2), initial=0.0))
    return {"min_cosine": cos.tolist(), "max_abs_diff": diff.tolist(), "sentences": len(sentences)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm-l6", help="packaged name, folder or hub id (default minilm-l6)")
    ap.add_argument("--sentences", type=int, default=4000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--precision", nargs="+", choices=("fp32", "bf16"), default=["fp32"],
                    help="the precisions to time, interleaved in one run (default fp32)")
    ap.add_argument("--stages", action="store_true", help="one more end-to-end pass per precision with stage timers")
    ap.add_argument("--force-emulated", action="store_true",
                    help="time bf16 on a CPU without AVX512-BF16/AMX (emulated: its speed means nothing)")
    ap.add_argument("--tiny", action="store_true", help="a random 2-layer BERT and 200 sentences (a check of the script)")
    ap.add_argument("--out", default=None, help="folder for the results (.json and .md)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    precisions = list(dict.fromkeys(args.precision))
    cpu = cpu_summary()
    print(f"{cpu['cpu_model']}; flags: {' '.join(cpu['flags'])}; {cpu['bf16_text']}; {args.threads} threads", flush=True)
    if "bf16" in precisions and not cpu["bf16_native"]:
        if not args.force_emulated:
            print(f"error: this CPU has no native bf16 ({cpu['bf16_text']}); bf16 words/s would measure the "
                  "emulation. Run on a CPU with AVX512-BF16/AMX, or pass --force-emulated", file=sys.stderr)
            return 2
        os.environ[EMULATE_ENV] = "1"
    if args.tiny:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from encoder_helpers import make_bert

        tmp = Path(tempfile.mkdtemp())
        args.model, args.sentences, args.repeats = str(make_bert(tmp / "bert", max_positions=128)), 200, 1
    enc = load_encoder(args.model)
    model = enc.model
    sentences = corpus_from_vocab(enc.tokenizer, args.sentences)
    n_words = sum(len(s) for s in sentences)
    inputs = bare_inputs(TransformerEmbedder(enc, progress=False), sentences)
    n_pieces = int(sum(int(b["attention_mask"].sum()) for b in inputs))
    n_padded = int(sum(b["attention_mask"].numel() for b in inputs))

    def bare(precision: str) -> float:
        t = time.perf_counter()
        with torch.inference_mode(), forward_precision(precision, torch.device("cpu")):
            for b in inputs:
                model(**b, output_hidden_states=True)
        return time.perf_counter() - t

    def end_to_end(precision: str) -> float:
        with tempfile.TemporaryDirectory() as d:
            t = time.perf_counter()
            FeatureCache(d).embed(TransformerEmbedder(enc, progress=False, precision=precision), sentences)
            return time.perf_counter() - t

    runs = [(p, path) for p in precisions for path in ("bare", "end_to_end")]
    fns = {"bare": bare, "end_to_end": end_to_end}
    for p, path in runs:  # warm-up
        fns[path](p)
    times: dict[str, list[float]] = {f"{p} {path}": [] for p, path in runs}
    for _ in range(args.repeats):  # interleaved, so drift in the machine's load hits every path alike
        for p, path in runs:
            times[f"{p} {path}"].append(fns[path](p))
    med = {k: statistics.median(v) for k, v in times.items()}
    overhead = {p: med[f"{p} end_to_end"] / med[f"{p} bare"] - 1 for p in precisions}
    stages: dict[str, dict] = {}
    if args.stages:
        for p in precisions:
            st: dict[str, float] = {}
            with stage_timers(enc, st):
                total = end_to_end(p)
            st["rest (batch building, sentence assembly, file open/close)"] = total - sum(st.values())
            stages[p] = {"seconds": total, "stages": st}
    agreement = (vector_agreement(enc, sentences[:COMPARED_SENTENCES], enc.num_hidden_states)
                 if "bf16" in precisions else None)
    res = {"model": args.model, "files_sha256": enc.files_sha256, "sentences": len(sentences), "words": n_words,
           "pieces": n_pieces, "padded_pieces": n_padded, "batches": len(inputs), "repeats": args.repeats,
           "threads": args.threads, "precisions": precisions, "seconds": times,
           "words_per_s": {k: n_words / v for k, v in med.items()}, "overhead": overhead,
           "target_overhead": TARGET_OVERHEAD, "stages": stages, "bf16_vs_fp32": agreement,
           "bf16_emulated": "bf16" in precisions and not cpu["bf16_native"], "cpu": cpu,
           "machine": machine(), "git_commit": git_commit(), "when": now(),
           "command": "python " + " ".join([sys.argv[0].split("/work/main/")[-1], *(argv or sys.argv[1:])])}
    if len(precisions) == 2:
        res["bf16_speedup"] = {path: med[f"fp32 {path}"] / med[f"bf16 {path}"] for path in ("bare", "end_to_end")}
    lines = report_lines(res, med)
    print("\n".join(lines[2:]))
    if args.out:
        out = Path(args.out)
        stem = "transformer_throughput" + ("" if (args.model, precisions) == ("minilm-l6", ["fp32"]) else
                                           "_" + re.sub(r"[^\w.-]+", "-", Path(args.model).name) + "_" + "_".join(precisions))
        write_json(out / f"{stem}.json", res)
        write_atomic(out / f"{stem}.md", "\n".join(lines) + "\n")
        print(f"wrote {out / stem}.json and .md")
    return 0


def report_lines(res: dict, med: dict) -> list[str]:
    """The results as Markdown lines (the first two: the title and a blank line)."""
    m, cpu, n_words = res["machine"], res["cpu"], res["words"]
    lines = ["# Transformer source: end to end vs a bare forward pass", "",
             f"* Command: `{res['command']}`", f"* Git commit: `{res['git_commit']}`; {res['when']}",
             f"* Machine: {cpu['cpu_model']} ({m['cpu_flags']}), {m['cpu_cores']} cores, {res['threads']} torch "
             f"threads, torch {m['torch']}; {cpu['bf16_text']}",
             f"* Model: `{res['model']}` (files sha256 `{res['files_sha256'][:16]}`); corpus: {res['sentences']} "
             f"sentences, {n_words} words, {res['pieces']} word pieces ({res['padded_pieces']} with padding), "
             f"{res['batches']} batches (bench/transformer_throughput.py)", "",
             "| precision | path | median s | words/s | overhead over bare |", "|---|---|---:|---:|---:|"]
    for k, v in med.items():
        p, path = k.split(" ")
        over = f"{res['overhead'][p] * 100:+.1f}%" if path == "end_to_end" else ""
        lines.append(f"| {p} | {path.replace('_', ' ')} | {v:.2f} | {n_words / v:,.0f} | {over} |")
    lines.append("")
    for p, o in res["overhead"].items():
        lines.append(f"* {p}: overhead of the cache key, tokenization, windows, pooling and the cache write "
                     f"**{o * 100:+.1f}%** (target at most +{TARGET_OVERHEAD * 100:.0f}%: "
                     f"{'met' if o <= TARGET_OVERHEAD else 'missed'})")
    if "bf16_speedup" in res:
        s = res["bf16_speedup"]
        lines.append(f"* bf16 over fp32: {s['end_to_end']:.2f}x end to end, {s['bare']:.2f}x bare"
                     + (" (EMULATED bf16: not its speed)" if res["bf16_emulated"] else ""))
    lines.append("* All passes (s): " + "; ".join(f"{k} {', '.join(f'{t:.2f}' for t in v)}"
                                                 for k, v in res["seconds"].items()))
    for p, st in res["stages"].items():
        lines += ["", f"Where the time goes, {p} (one more end-to-end pass with timers, {st['seconds']:.2f} s):", "",
                  "| stage | s | share |", "|---|---:|---:|"]
        lines += [f"| {k} | {v:.3f} | {v / st['seconds']:.1%} |"
                  for k, v in sorted(st["stages"].items(), key=lambda kv: -kv[1])]
        fwd, bare = st["stages"].get("forward passes", 0.0), med[f"{p} bare"]
        lines += ["", f"The forward passes inside that pass took {fwd:.2f} s, the bare loop's {bare:.2f} s (median): "
                      f"{(fwd / bare - 1) * 100:+.1f}% (the same batches; a difference here is not Python work)."]
    if res["bf16_vs_fp32"]:
        a = res["bf16_vs_fp32"]
        lines += ["", f"bf16 against fp32 on the first {a['sentences']} sentences, per hidden state: smallest cosine "
                      f"of a word vector {', '.join(f'{c:.5f}' for c in a['min_cosine'])}; largest abs difference "
                      f"{', '.join(f'{d:.2e}' for d in a['max_abs_diff'])}"]
    return lines


if __name__ == "__main__":
    sys.exit(main())

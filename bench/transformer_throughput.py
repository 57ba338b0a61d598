"""Word tokens/s of the ``transformer`` feature source end to end vs a bare forward pass on the same batches.

    python bench/transformer_throughput.py --model minilm-l6 --threads 2 --out results/bench   # ~3 min
    python bench/transformer_throughput.py --tiny --out /tmp/x                                # seconds

End to end = ``FeatureCache(fresh folder).embed(TransformerEmbedder(...), sentences)``: tokenization with word
ids, windows, length-sorted batching, the forward pass with every hidden state, pooling pieces to words, and
writing the HDF5 cache file. Bare = ``model(**batch, output_hidden_states=True)`` on exactly the batches the
embedder forms (input ids and attention masks built before the timer), nothing else. Both under
``torch.inference_mode``, interleaved, median of ``--repeats`` passes after a warm-up pass. Overhead =
end-to-end seconds / bare seconds - 1 (target: at most 10%).

Corpus: the CoNLL-2003-like sentence lengths of ``bench/corpus.py`` with words drawn (Zipf, seed 2003) from the
model's own whole-word vocabulary entries, so pieces per word are like real text's, not like random strings'.
"""
from __future__ import annotations

import argparse
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
from elmo_features import FeatureCache  # noqa: E402
from elmo_features.encoders import TransformerEmbedder, load_encoder  # noqa: E402


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
        ids = torch.full((len(batch), P), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), P), dtype=torch.long)
        for b, k in enumerate(batch):
            ids[b, : len(pieces[k].ids)] = torch.tensor(pieces[k].ids)
            mask[b, : len(pieces[k].ids)] = 1
        out.append({"input_ids": ids, "attention_mask": mask})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm-l6", help="packaged name, folder or hub id (default minilm-l6)")
    ap.add_argument("--sentences", type=int, default=4000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tiny", action="store_true", help="a random 2-layer BERT and 200 sentences (a check of the script)")
    ap.add_argument("--out", default=None, help="folder for transformer_throughput.{json,md}")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.tiny:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from encoder_helpers import make_bert

        tmp = Path(tempfile.mkdtemp())
        args.model, args.sentences, args.repeats = str(make_bert(tmp / "bert", max_positions=128)), 200, 1
    enc = load_encoder(args.model)
    emb = TransformerEmbedder(enc, progress=False)
    sentences = corpus_from_vocab(enc.tokenizer, args.sentences)
    n_words = sum(len(s) for s in sentences)
    inputs = bare_inputs(emb, sentences)
    n_pieces = int(sum(int(b["attention_mask"].sum()) for b in inputs))
    model = enc.model

    def bare() -> float:
        t = time.perf_counter()
        with torch.inference_mode():
            for b in inputs:
                model(**b, output_hidden_states=True)
        return time.perf_counter() - t

    def end_to_end() -> float:
        with tempfile.TemporaryDirectory() as d:
            t = time.perf_counter()
            FeatureCache(d).embed(TransformerEmbedder(enc, progress=False), sentences)
            return time.perf_counter() - t

    bare(), end_to_end()  # warm-up
    times = {"bare": [], "end_to_end": []}
    for _ in range(args.repeats):
        times["bare"].append(bare())
        times["end_to_end"].append(end_to_end())
    med = {k: statistics.median(v) for k, v in times.items()}
    overhead = med["end_to_end"] / med["bare"] - 1
    res = {"model": args.model, "files_sha256": enc.files_sha256, "sentences": len(sentences), "words": n_words,
           "pieces": n_pieces, "batches": len(inputs), "repeats": args.repeats, "seconds": times,
           "words_per_s": {k: n_words / v for k, v in med.items()}, "overhead": overhead, "target_overhead": 0.10,
           "machine": machine(), "git_commit": git_commit(), "when": now(),
           "command": "python " + " ".join([sys.argv[0].split("/work/main/")[-1], *sys.argv[1:]])}
    m = res["machine"]
    print(f"{m['cpu_model']} ({m['cpu_flags']}), {args.threads} threads")
    print(f"{len(sentences)} sentences, {n_words} words, {n_pieces} pieces, {len(inputs)} batches")
    for k in ("bare", "end_to_end"):
        print(f"{k:11} {med[k]:7.2f} s  {n_words / med[k]:8.0f} words/s")
    print(f"overhead {overhead * 100:+.1f}% (target <= +10%): {'met' if overhead <= 0.10 else 'MISSED'}")
    if args.out:
        out = Path(args.out)
        write_json(out / "transformer_throughput.json", res)
        write_atomic(out / "transformer_throughput.md", "\n".join([
            "# Transformer source: end to end vs a bare forward pass", "",
            f"* Command: `{res['command']}`", f"* Git commit: `{res['git_commit']}`; {res['when']}",
            f"* Machine: {m['cpu_model']} ({m['cpu_flags']}), {m['cpu_cores']} cores, {args.threads} torch threads, "
            f"torch {m['torch']}",
            f"* Model: `{args.model}` (files sha256 `{enc.files_sha256[:16]}`); corpus: {len(sentences)} sentences, "
            f"{n_words} words, {n_pieces} word pieces, {len(inputs)} batches (bench/transformer_throughput.py)", "",
            "| path | median s | words/s |", "|---|---:|---:|",
            *[f"| {k.replace('_', ' ')} | {med[k]:.2f} | {n_words / med[k]:,.0f} |" for k in ("bare", "end_to_end")],
            "", f"Overhead of tokenization, windows, pooling and the cache write over the bare forward pass: "
            f"**{overhead * 100:+.1f}%** (target at most +10%: {'met' if overhead <= 0.10 else 'missed'}). "
            f"All passes: bare {', '.join(f'{t:.2f}' for t in times['bare'])} s; end to end "
            f"{', '.join(f'{t:.2f}' for t in times['end_to_end'])} s.", ""]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

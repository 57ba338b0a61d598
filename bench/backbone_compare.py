"""LSTM vs Transformer biLM backbones at about equal parameter count: training and inference tokens/s.

Both models share the token layer (the shipped char CNN config) and the sampled softmax; they differ only
in the contextual stack. The LSTM is the shipped config (``configs/bilm/charonly_7m.yaml``: 2 layers, 512
cells, projection 128). The Transformer has the same width P = projection_dim and the same number of
layers (so the features are the same shape, (L, n, 2P)), ``--heads`` heads, and the feed-forward width that
makes its parameter count closest to the LSTM's (both counts are printed).

Measured, all with the same ``--threads``:
* training tokens/s: ``Trainer.train_step`` (forward, sampled softmax, backward, Adam) on batches of about
  ``--batch-tokens`` tokens of a synthetic corpus with CoNLL-like sentence lengths (bench/corpus.py);
* inference tokens/s: ``BiLM(char_ids)`` under ``torch.inference_mode`` on batches of 64 sentences of the
  same corpus (char ids made before the timer);
* sentence-length scaling: both of the above on sentences of exactly T words (T = ``--lengths``),
  batches of about ``--batch-tokens`` tokens. Above ``--max-positions`` tokens the Transformer runs its
  overlapping windows (docs/weights_format.md), so its cost per token stops growing there.

Tokens/s count real words only (not <S>/</S>). Each figure: one warm-up call, then calls until
``--min-seconds`` have passed. Random weights; no data or download needed.

    python bench/backbone_compare.py --threads 1 --json results/bench/backbone_compare.json   # minutes
    python bench/backbone_compare.py --tiny                                                    # seconds
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from common import REPO, git_commit, machine, now, write_atomic, write_json  # also puts the repo on sys.path
from corpus import synthetic_corpus

from elmo_features import batch_to_ids  # noqa: E402
from elmo_features.training.config import TrainConfig  # noqa: E402
from elmo_features.training.data import batches_for_epoch  # noqa: E402
from elmo_features.training.trainer import Trainer  # noqa: E402


def encoder_params(model) -> int:
    return sum(p.numel() for p in model.bilm.encoder.parameters())


def matched_ff_dim(target: int, P: int, n_layers: int) -> int:
    """Feed-forward width whose Transformer (2 directions x n_layers blocks + final norms) has ~target parameters."""
    per_block = (target - 2 * 2 * P) / (2 * n_layers)  # minus the two final LayerNorms
    return max(1, round((per_block - 4 * P * P - 9 * P) / (2 * P + 1)))  # block = 4P^2 + 9P + F(2P + 1)


def timed(fn, n_tokens: int, min_seconds: float, max_calls: int = 1000) -> float:
    """Tokens/s of ``fn`` (which processes n_tokens) after one warm-up call."""
    fn()
    calls, t0 = 0, time.perf_counter()
    while calls < max_calls and (calls == 0 or time.perf_counter() - t0 < min_seconds):
        fn()
        calls += 1
    return n_tokens * calls / (time.perf_counter() - t0)


def words_of_length(corpus: list[list[str]], T: int, n: int) -> list[list[str]]:
    """n sentences of exactly T words, cut from the corpus's running text."""
    flat = [w for s in corpus for w in s]
    need = T * n
    flat = (flat * (need // len(flat) + 1))[:need]
    return [flat[i * T : (i + 1) * T] for i in range(n)]


def make_trainer(cfg: TrainConfig) -> Trainer:
    return Trainer(cfg, progress=False)


def measure_backbone(tr: Trainer, corpus, args) -> dict:
    """Training and inference tokens/s on the corpus and at each length in args.lengths."""
    res: dict = {"encoder_params": encoder_params(tr.model),
                 "char_cnn_params": sum(p.numel() for p in tr.model.bilm.char_cnn.parameters())}
    batches = batches_for_epoch(tr.lengths, tr.cfg.batch_tokens, tr.cfg.seed, 0)
    state = {"i": 0}

    def train_corpus():
        state["i"] = (state["i"] + 1) % len(batches)
        return tr.train_step(batches[state["i"]])

    n_train = int(np.mean([tr.lengths[b].sum() for b in batches]))
    res["train_tokens_per_s"] = timed(train_corpus, n_train, args.min_seconds)
    bilm = tr.model.bilm.eval()
    infer_batches = [batch_to_ids(corpus[i : i + 64]) for i in range(0, min(len(corpus), args.infer_sentences), 64)]
    n_infer = sum(len(s) for s in corpus[: len(infer_batches) * 64])

    def infer_corpus():
        with torch.inference_mode():
            for ids in infer_batches:
                bilm(ids)

    res["infer_tokens_per_s"] = timed(infer_corpus, n_infer, args.min_seconds)
    res["by_length"] = {}
    sentences = tr.corpus.sentences
    flat = np.concatenate(sentences)
    for T in args.lengths:
        B = max(1, args.batch_tokens // T)
        tr.corpus.sentences = [flat[(i * T) % (len(flat) - T) :][:T] for i in range(B)]  # type ids, T words each
        train = timed(lambda: tr.train_step(np.arange(B)), B * T, args.min_seconds)
        ids = batch_to_ids(words_of_length(corpus, T, B))

        def infer():
            with torch.inference_mode():
                bilm(ids)

        res["by_length"][T] = {"batch": B, "train_tokens_per_s": train,
                               "infer_tokens_per_s": timed(infer, B * T, args.min_seconds)}
    tr.corpus.sentences = sentences
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--config", default=str(REPO / "configs/bilm/charonly_7m.yaml"), help="LSTM config (model keys)")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--max-positions", type=int, default=256)
    ap.add_argument("--chunk-overlap", type=int, default=128)
    ap.add_argument("--lengths", type=int, nargs="+", default=[10, 50, 200, 1000])
    ap.add_argument("--batch-tokens", type=int, default=4000)
    ap.add_argument("--sentences", type=int, default=4000, help="synthetic training corpus size")
    ap.add_argument("--infer-sentences", type=int, default=1024)
    ap.add_argument("--min-seconds", type=float, default=5.0, help="time per figure (after a warm-up call)")
    ap.add_argument("--tiny", action="store_true", help="tiny models and budgets: checks the script in seconds")
    ap.add_argument("--json", help="write the figures to this JSON file (and a .md beside it)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model_keys = {k: v for k, v in TrainConfig.from_yaml(args.config).to_dict().items()
                  if k in ("char_embedding_dim", "filters", "n_highway", "lstm_dim", "projection_dim", "n_layers",
                           "cell_clip", "proj_clip", "vocab_size", "n_negative_samples")}
    if args.tiny:
        model_keys.update(char_embedding_dim=4, filters=[[1, 8], [2, 8]], lstm_dim=32, projection_dim=16,
                          vocab_size=500, n_negative_samples=64)
        args.heads, args.max_positions, args.chunk_overlap = 2, 64, 16
        args.batch_tokens, args.sentences, args.infer_sentences, args.min_seconds = 300, 200, 64, 0.0
    corpus = synthetic_corpus(args.sentences)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "corpus.txt"
        text.write_text("\n".join(" ".join(s) for s in corpus) + "\n", encoding="utf-8")
        base = dict(model_keys, train_files=[str(text)], heldout_file=None, threads=args.threads,
                    batch_tokens=args.batch_tokens, max_sentence_length=max(args.lengths), dropout=0.05)
        lstm = make_trainer(TrainConfig.from_dict(dict(base, out_dir=f"{tmp}/lstm")))
        P, L = model_keys["projection_dim"], model_keys["n_layers"]
        ff = matched_ff_dim(encoder_params(lstm.model), P, L)
        tcfg = dict(base, out_dir=f"{tmp}/transformer", backbone="transformer", transformer_heads=args.heads,
                    transformer_ff_dim=ff, transformer_max_positions=args.max_positions,
                    transformer_chunk_overlap=args.chunk_overlap)
        for name, make in (("lstm", lambda: lstm), ("transformer", lambda: make_trainer(TrainConfig.from_dict(tcfg)))):
            tr = make()
            results[name] = measure_backbone(tr, corpus, args)
            results[name]["model"] = tr.model.bilm.options.to_dict()
            del tr
    res = {"threads": args.threads, "lengths": args.lengths, "batch_tokens": args.batch_tokens,
           "min_seconds": args.min_seconds, "tiny": args.tiny, "machine": machine(), "commit": git_commit(),
           "date": now(), "results": results}
    lines = [f"# LSTM vs Transformer biLM backbones ({args.threads} thread(s))", "",
             f"Measured by `python bench/backbone_compare.py` at `{res['commit']}`, {res['date']}, "
             f"{res['machine']['cpu_model']}.", "",
             "| backbone | encoder params | train tok/s | inference tok/s |", "|---|---|---|---|"]
    for name, r in results.items():
        lines.append(f"| {name} | {r['encoder_params']:,} | {r['train_tokens_per_s']:,.0f} | {r['infer_tokens_per_s']:,.0f} |")
    lines += ["", "Sentence length T (words; batches of ~%d tokens): tokens/s, training / inference" % args.batch_tokens,
              "", "| T | " + " | ".join(results) + " |", "|---|" + "---|" * len(results)]
    for T in args.lengths:
        cells = [f"{r['by_length'][T]['train_tokens_per_s']:,.0f} / {r['by_length'][T]['infer_tokens_per_s']:,.0f}"
                 for r in results.values()]
        lines.append(f"| {T} | " + " | ".join(cells) + " |")
    print("\n".join(lines))
    if args.json:
        write_json(Path(args.json), res)
        write_atomic(Path(args.json).with_suffix(".md"), "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

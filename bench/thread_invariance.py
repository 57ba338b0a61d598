"""Do the biLM's features depend on the number of torch threads that computed them?

    python bench/thread_invariance.py --sentences data/conll2003/valid.txt --out results/bench/thread_invariance.md

Embeds the same sentences (the first ``--limit`` of a CoNLL file, or one tokenized sentence per line of a text
file) with 1 and with 2 torch threads, each in its own process, in the default and the reference precision mode,
(fp32: the default) and writes the largest absolute difference and the share of values that differ, with the CPU model and flags.
A difference means that results computed downstream (e.g. a comparison whose features were cached with 2 threads
against one that computed them with 1) can differ in the last digits of a score.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import git_commit, machine, now, write_atomic  # noqa: E402

WORKER = """
import sys, numpy as np, torch
torch.set_num_threads(int(sys.argv[1]))
from elmo_features import Embedder
sentences = [line.split() for line in open(sys.argv[2], encoding="utf-8") if line.strip()]
if sys.argv[3] == "encoder":  # a frozen Transformer encoder's hidden states, for comparison
    from elmo_features.encoders.embedder import TransformerEmbedder
    from elmo_features.encoders.loading import load_encoder
    out = TransformerEmbedder(load_encoder(sys.argv[4])).embed_sentences(sentences)
else:
    out = Embedder(sys.argv[4], precision=sys.argv[3]).embed_sentences(sentences)
np.save(sys.argv[5], np.concatenate([a.reshape(-1) for a in out]))
"""


def read_sentences(path: Path, limit: int) -> list[list[str]]:
    """Sentences of a CoNLL file (first column, blank-line separated) or of a one-sentence-per-line text."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if any("\t" in ln or len(ln.split()) == 4 for ln in lines[:20]):  # CoNLL: token per line
        out, cur = [], []
        for ln in lines + [""]:
            if not ln.strip():
                if cur:
                    out.append(cur)
                cur = []
            elif not ln.startswith("-DOCSTART-"):
                cur.append(ln.split()[0])
        return out[:limit]
    return [ln.split() for ln in lines if ln.strip()][:limit]


def embed(threads: int, precision: str, text: Path, bilm: str, tmp: Path) -> np.ndarray:
    """The vectors of ``text`` made in a process of ``threads`` torch threads (``precision`` "encoder": ``bilm`` is
    an encoder name)."""
    out = tmp / f"{precision}-{bilm}-{threads}.npy"
    subprocess.run([sys.executable, "-c", WORKER, str(threads), str(text), precision, bilm, str(out)], check=True)
    return np.load(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", required=True, help="a CoNLL file or tokenized text, one sentence per line")
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--bilm", default="default")
    ap.add_argument("--encoder", action="append", default=[],
                    help="also a frozen Transformer encoder (e.g. minilm-l6), for comparison; repeatable")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    sentences = read_sentences(Path(args.sentences), args.limit)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        text = tmp / "sentences.txt"
        text.write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
        for precision in ("fp32", "reference"):
            a, b = embed(1, precision, text, args.bilm, tmp), embed(2, precision, text, args.bilm, tmp)
            rows.append(f"| biLM `{args.bilm}`, {precision} | {np.abs(a - b).max():.2e} | "
                        f"{100 * float((a != b).mean()):.3f}% | {a.size:,} |")
        for name in args.encoder:
            a, b = embed(1, "encoder", text, name, tmp), embed(2, "encoder", text, name, tmp)
            rows.append(f"| encoder `{name}` | {np.abs(a - b).max():.2e} | {100 * float((a != b).mean()):.3f}% | "
                        f"{a.size:,} |")
    m = machine()
    report = "\n".join([
        "# Thread invariance of the features (1 against 2 torch threads)", "",
        f"Written by `python bench/thread_invariance.py --sentences {args.sentences} --limit {args.limit}"
        f"{'' if args.bilm == 'default' else ' --bilm ' + args.bilm}{''.join(' --encoder ' + e for e in args.encoder)}"
        f"{' --out ' + args.out if args.out else ''}` on {now()}, commit `{git_commit()}`.", "",
        f"* CPU: {m['cpu_model']}, {m['cpu_cores']} cores; flags: {m['cpu_flags']}",
        f"* {len(sentences)} sentences, every layer of every token", "",
        "| features | largest absolute difference | values that differ | values |", "|---|---|---|---|",
        *rows, ""])
    if args.out:
        write_atomic(Path(args.out), report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

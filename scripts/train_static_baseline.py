"""Train static word vectors (word2vec) on a tokenized corpus: a same-data baseline for the default biLM.

GloVe 6B was trained on 6 billion tokens; the default biLM on 7 million. Vectors trained here on the
biLM's own corpus separate "contextual vs static" from "how much text the features were trained on".
Lowercased (like GloVe 6B), one sentence per line, tokens separated by spaces, plain or .gz files.
Needs `pip install gensim` (not a project dependency). Writes word2vec text format atomically plus a
SOURCE.md with the command.

    python scripts/train_static_baseline.py ../shared/data/corpus/train.txt.gz \
        --out data/w2v-bilm-corpus-50d
"""
from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path

from elmo_features.util.provenance import atomic_path, write_text_atomic


class Sentences:
    """Re-iterable lowercased token lists from one or more text files."""

    def __init__(self, paths: list[Path]):
        self.paths = paths

    def __iter__(self):
        for p in self.paths:
            opener = gzip.open if p.suffix == ".gz" else open
            with opener(p, "rt", encoding="utf-8") as f:
                for line in f:
                    toks = line.lower().split()
                    if toks:
                        yield toks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True, help="output folder (vectors.txt, SOURCE.md)")
    ap.add_argument("--dim", type=int, default=50)
    ap.add_argument("--window", type=int, default=5)
    ap.add_argument("--min-count", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--sg", type=int, default=1, help="1 = skip-gram, 0 = CBOW")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    for p in args.files:
        if not p.is_file():
            raise SystemExit(f"corpus file not found: {p}")
    try:
        from gensim.models import Word2Vec
    except ImportError:
        raise SystemExit("this script needs gensim: pip install gensim") from None

    t0 = time.time()
    model = Word2Vec(Sentences(args.files), vector_size=args.dim, window=args.window,
                     min_count=args.min_count, sg=args.sg, epochs=args.epochs, workers=args.workers,
                     seed=args.seed)
    kv = model.wv
    args.out.mkdir(parents=True, exist_ok=True)
    with atomic_path(args.out / "vectors.txt") as tmp:
        kv.save_word2vec_format(str(tmp), binary=False)
    cmd = " ".join(["python"] + sys.argv)
    write_text_atomic(args.out / "SOURCE.md",
        f"# word2vec trained by elmo-tasks\n\n- command: `{cmd}`\n- corpus: {', '.join(map(str, args.files))}"
        f" ({model.corpus_total_words:,} tokens per epoch)\n- vocabulary: {len(kv):,} lowercased words"
        f" (min count {args.min_count})\n- {args.dim}d, window {args.window}, "
        f"{'skip-gram' if args.sg else 'CBOW'}, {args.epochs} epochs, seed {args.seed}, "
        f"{time.time() - t0:.0f} s\n")
    print(f"wrote {args.out / 'vectors.txt'}: {len(kv):,} words x {args.dim} ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

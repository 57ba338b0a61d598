"""How much does lower-cased input cost the cased biLM? Held-out perplexity on the same sentences, as written
and lower-cased (the sentence-polarity data is lower-cased; CoNLL-2003 is not).

    python scripts/lowercase_ppl.py --export runs/bilm/default_cont2/export [--sentences 1000] \
        [--out results/sentiment_polarity/lowercase_ppl]

Needs the training run's export (the softmax is not shipped with the embedded model). Writes OUT.json and
OUT.md with the command, commit and machine.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from elmo_features.util.provenance import git_commit, machine, timestamp, write_text_atomic  # noqa: E402
from elmo_features.training.cli import load_language_model  # noqa: E402
from elmo_features.training.data import read_sentences  # noqa: E402
from elmo_features.training.evaluate import perplexity  # noqa: E402

HELDOUT = REPO.parent / "shared" / "data" / "corpus" / "heldout.txt.gz"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", required=True, help="a train-bilm export folder (options.json, weights.hdf5 with the softmax, vocab.txt)")
    ap.add_argument("--sentences", type=int, default=1000, help="the first N held-out sentences")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="results/sentiment_polarity/lowercase_ppl")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ex = Path(args.export)
    model, vocab = load_language_model(ex / "options.json", ex / "weights.hdf5", ex / "vocab.txt", None)
    sents = list(itertools.islice(read_sentences([HELDOUT]), args.sentences))  # the corpus text policy
    res = {"as written": perplexity(model, sents, vocab),
           "lower-cased": perplexity(model, [[w.lower() for w in s] for s in sents], vocab)}
    cmd = "python scripts/lowercase_ppl.py " + " ".join(sys.argv[1:])
    m = machine()
    out = {"command": cmd, "git_commit": git_commit(), "machine": m, "date": timestamp(),
           "heldout": str(HELDOUT.name), "sentences": len(sents), "results": res}
    md = ["# Lower-cased input and the cased biLM", "",
          f"`{cmd}` at commit `{out['git_commit']}`, {out['date']}, {m['cpu_cores']} CPU cores ({m['cpu_model']}).",
          f"The first {len(sents):,} sentences of `{HELDOUT.name}`, full softmax, mean of forward and backward; "
          "`no UNK` leaves out the predictions of out-of-vocabulary words (the vocabulary is cased, so lower-casing "
          "turns more words into `<UNK>`).", "",
          "| input | perplexity | forward (no UNK) | backward (no UNK) | UNK rate |", "|---|---|---|---|---|"]
    for k, r in res.items():
        md.append(f"| {k} | {r['mean']:.1f} | {r['forward_no_unk']:.1f} | {r['backward_no_unk']:.1f} | "
                  f"{100 * r['unk_rate']:.2f}% |")
    write_text_atomic(Path(args.out + ".json"), json.dumps(out, indent=1) + "\n")
    write_text_atomic(Path(args.out + ".md"), "\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()

"""Ship a trained biLM as an embedded model and write its report to results/bilm/.

    python scripts/ship_default_bilm.py --run runs/bilm/default [--name default] [--heldout ../shared/data/corpus/heldout.txt.gz]

1. Loads the run's latest checkpoint, exports the biLM (no softmax, float16 storage; with its frozen
   token vectors when it has the static-vector prior) to elmo_features/models/NAME/{options.json,
   weights.hdf5, vocab.txt}.
2. Measures held-out perplexity of exactly the shipped weights (fp16-rounded) plus the run's softmax with the
   full softmax (forward, backward, mean), and of the fp32 checkpoint, over the whole held-out file.
3. Writes results/bilm/NAME.{md,json} and results/bilm/NAME_learning_curve.png.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from elmo_features.formats.default_model import DEFAULT_MODEL_DIR  # noqa: E402
from elmo_features.util.provenance import atomic_path, git_commit, machine, timestamp, write_text_atomic  # noqa: E402
from elmo_features.training.config import TrainConfig  # noqa: E402
from elmo_features.training.data import read_sentences  # noqa: E402
from elmo_features.training.evaluate import perplexity  # noqa: E402
from elmo_features.training.export import export_model  # noqa: E402
from elmo_features.training.trainer import build_language_model  # noqa: E402
from elmo_features.formats.weights import load_weights_into  # noqa: E402
from elmo_tasks.experiment.plots import pyplot  # noqa: E402


def plot_curve(history: list[dict], path: Path, title: str) -> None:
    plt = pyplot()

    x = [h["tokens"] / 1e6 for h in history]
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, style in (("forward", "--"), ("backward", ":"), ("mean", "-")):
        ax.plot(x, [h[key] for h in history], style, marker="o", ms=3, label=key)
    ax.set_yscale("log")
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("held-out perplexity (full softmax, log scale)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", default="runs/bilm/default")
    ap.add_argument("--heldout", default="../shared/data/corpus/heldout.txt.gz")
    ap.add_argument("--name", default="default", help="embedded model name: elmo_features/models/NAME")
    ap.add_argument("--config", help="the config file the run was trained with, for the report "
                    "(default: configs/bilm/NAME.yaml)")
    ap.add_argument("--out", help="export folder (default: elmo_features/models/NAME)")
    ap.add_argument("--results", default="results/bilm")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    run = Path(args.run)
    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    cfg = TrainConfig.from_dict(ckpt["config"])
    vocab = (run / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    model, digest = build_language_model(cfg, vocab)
    if digest != ckpt["state"].get("token_vectors_digest"):
        sys.exit(f"{run}: the token vectors ({cfg.token_vectors}) differ from the ones the run was trained with")
    model.load_state_dict(ckpt["model"])
    model.eval()
    st = ckpt["state"]
    out = Path(args.out) if args.out else DEFAULT_MODEL_DIR.parent / args.name
    export_model(model, vocab, out, with_softmax=False, dtype="float16")
    sentences = list(read_sentences([args.heldout]))
    t0 = time.time()
    full = perplexity(model, sentences, vocab)
    load_weights_into(model.bilm, out / "weights.hdf5")  # the shipped fp16-rounded weights
    shipped = perplexity(model, sentences, vocab)
    eval_s = time.time() - t0
    n_params = sum(p.numel() for p in model.bilm.parameters())
    n_softmax = model.softmax_w.numel() + model.softmax_b.numel()
    commit = git_commit()
    res = {
        "run": str(run), "finished": st["tokens"] >= cfg.max_train_tokens, "tokens_seen": st["tokens"],
        "planned_tokens": cfg.max_train_tokens, "steps": st["step"], "epochs": st["tokens"] / 10463347,
        "train_wall_seconds": round(st["elapsed"], 1), "threads": cfg.threads,
        "bilm_parameters": n_params, "softmax_parameters": n_softmax, "vocab_size": len(vocab),
        "heldout_file": args.heldout, "heldout_sentences": len(sentences),
        "perplexity_fp32": full, "perplexity_shipped_fp16": shipped,
        "shipped_weights_bytes": (out / "weights.hdf5").stat().st_size,
        "commit": commit, "machine": machine(), "date": timestamp(), "eval_seconds": round(eval_s, 1),
    }
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    name = args.name
    if st["history"]:
        plot_curve(st["history"], results / f"{name}_learning_curve.png",
                   f"biLM '{name}': learning curve (first 500 held-out sentences)")
    config_file = args.config or f"configs/bilm/{name}.yaml"
    start = (f" It started from the model in `{cfg.init_from}` (warm start: the run's own token count below "
             f"comes on top of what that model had seen)." if cfg.init_from else "")
    prior = (f"Static-vector prior: {model.bilm.options.token_vectors.n_words:,} frozen "
             f"{model.bilm.options.token_vectors.dim}-d vectors from `{cfg.token_vectors}` "
             f"(stored in the weights file) concatenated to the char-CNN output.\n"
             if cfg.token_vectors else "Token layer: characters only (the official ELMo format).\n")
    p, s = full, shipped
    md = f"""# The embedded biLM `{name}`

Measured by `python {' '.join(sys.argv)}` at commit
`{commit}` on {res['date']}, {res['machine']['cpu_cores']} CPU cores ({res['machine']['cpu_model']}). The training command was
`elmo-tasks train-bilm --config {config_file}` (resumed with `--resume` where it was interrupted).{start}

{prior}
| | value |
|---|---|
| training status | {'finished' if res['finished'] else 'in progress (this is an intermediate checkpoint)'} |
| tokens seen | {st['tokens']:,} of {cfg.max_train_tokens:,} planned ({res['epochs']:.2f} epochs of train.txt.gz) |
| optimizer steps | {st['step']:,} |
| training wall time | {st['elapsed'] / 3600:.2f} h ({cfg.threads} torch thread(s), shared machine) |
| biLM parameters (shipped) | {n_params:,}; weights file {res['shipped_weights_bytes'] / 1e6:.1f} MB (float16{', incl. the token vectors' if cfg.token_vectors else ''}) |
| softmax parameters (not shipped) | {n_softmax:,} ({len(vocab):,} words incl. `<S>`, `</S>`, `<UNK>`) |

Held-out perplexity over all {len(sentences):,} sentences of `heldout.txt.gz`, full softmax, every
prediction counted including `</S>`/`<S>`; out-of-vocabulary words are predicted as `<UNK>`
(UNK rate {p['unk_rate']:.2%}); `no UNK` leaves those predictions out:

| weights | forward | backward | mean | forward (no UNK) | backward (no UNK) |
|---|---|---|---|---|---|
| fp32 checkpoint | {p['forward']:.1f} | {p['backward']:.1f} | {p['mean']:.1f} | {p['forward_no_unk']:.1f} | {p['backward_no_unk']:.1f} |
| shipped (fp16 storage) | {s['forward']:.1f} | {s['backward']:.1f} | {s['mean']:.1f} | {s['forward_no_unk']:.1f} | {s['backward_no_unk']:.1f} |

Learning curve (first 500 held-out sentences, measured during training): `{name}_learning_curve.png`,
numbers in `{args.run}/curve.json` copied into `{name}.json`.
"""
    res["history"] = st["history"]
    res.update(config=cfg.to_dict())
    write_text_atomic(results / f"{name}.json", json.dumps(res, indent=2) + "\n")
    write_text_atomic(results / f"{name}.md", md)
    print(md)


if __name__ == "__main__":
    main()

"""``elmo-tasks train-bilm`` and ``elmo-tasks eval-bilm``."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import h5py
import torch
import yaml


def _parse_set(items: list[str]) -> dict:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise SystemExit(f"--set expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k] = yaml.safe_load(v)
    return out


def cmd_train(args) -> int:
    from .config import TrainConfig
    from .trainer import Trainer

    try:
        cfg = TrainConfig.from_yaml(args.config, _parse_set(args.set))
        if not cfg.train_files:
            raise ValueError(f"{args.config}: train_files is empty")
        trainer = Trainer(cfg, resume=args.resume, progress=not args.no_progress)
    except (ValueError, FileNotFoundError, FileExistsError) as e:  # bad config or run folder: one line, exit 2
        print(f"elmo-tasks train-bilm: error: {e}", file=sys.stderr)
        return 2
    result = trainer.run()
    print(json.dumps(result))
    if not result["finished"]:
        print(f"stopped; continue with: elmo-tasks train-bilm --config {args.config} --resume")
    return 0


def load_language_model(options: str, weights: str, vocab_path: str, softmax: str | None = None):
    """A BiLanguageModel (biLM + softmax) from exported files, for perplexity."""
    from ..options import BiLMOptions
    from ..weights import WeightFileError, load_weights_into
    from .data import read_vocab
    from .lm import BiLanguageModel

    vocab = read_vocab(vocab_path)
    model = BiLanguageModel(BiLMOptions.from_file(options), len(vocab))
    load_weights_into(model.bilm, weights)
    src = softmax or weights
    with h5py.File(src, "r") as f:
        for name, param in (("softmax/W", model.softmax_w), ("softmax/b", model.softmax_b)):
            if name not in f:
                raise WeightFileError(f"{src}: missing dataset '{name}' (needed for perplexity; pass --softmax)")
            arr = torch.from_numpy(f[name][...].astype("float32"))
            if arr.shape != param.shape:
                raise WeightFileError(f"{src}: dataset '{name}' has shape {tuple(arr.shape)}, "
                                      f"but the vocabulary ({vocab_path}) needs {tuple(param.shape)}")
            param.data.copy_(arr)
    model.eval()
    return model, vocab


def cmd_eval(args) -> int:
    from .data import read_sentences
    from .evaluate import perplexity

    torch.set_num_threads(args.threads)
    model, vocab = load_language_model(args.options, args.weights, args.vocab, args.softmax)
    sentences = list(read_sentences([args.file]))
    if args.max_sentences:
        sentences = sentences[: args.max_sentences]
    res = perplexity(model, sentences, vocab)
    res["sentences"] = len(sentences)
    print(json.dumps(res, indent=2))
    return 0


def register(sub) -> None:
    p = sub.add_parser("train-bilm", help="train a biLM (bilm-tf architecture) on tokenized text")
    p.add_argument("--config", required=True, help="YAML training config (configs/bilm/*.yaml)")
    p.add_argument("--resume", action="store_true", help="continue the run in the config's out_dir")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_train)
    e = sub.add_parser("eval-bilm", help="held-out perplexity (forward, backward, mean) with the full softmax")
    e.add_argument("file", help="tokenized text, one sentence per line (plain or .gz)")
    e.add_argument("--options", required=True)
    e.add_argument("--weights", required=True)
    e.add_argument("--vocab", required=True)
    e.add_argument("--softmax", help="HDF5 with softmax/W and softmax/b if not in --weights")
    e.add_argument("--max-sentences", type=int, default=0)
    e.add_argument("--threads", type=int, default=2)
    e.set_defaults(func=cmd_eval)

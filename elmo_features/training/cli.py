"""``elmo-tasks train-bilm`` and ``elmo-tasks eval-bilm``."""
from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import sys
from pathlib import Path

import h5py
import numpy as np
import torch

from elmo_features.util.cli_types import (add_progress_argument, add_threads_argument, non_negative_int, progress_shown,
                                          rebuild_command)
from elmo_features.util.errors import DivergedError, OutputExistsError, UsageError
from elmo_features.util import stop
from elmo_features.util.config_files import apply_set
from elmo_features.util.paths import (beside_config_hint, check_flags_given, check_input_dir, check_input_file,
                                      check_input_path, check_output_dir)
from elmo_features.training.export import check_export_folder
from elmo_features.util.threads import set_threads


def _parse_set(items: list[str]) -> dict:
    """The ``--set key=value`` overrides (the one syntax of every command:
    ``elmo_features.util.config_files.apply_set``)."""
    out: dict = {}
    for item in items or []:
        apply_set(out, item)
    return out


def resume_command(args) -> str:
    """The command that continues this run: the same config and overrides, plus --resume."""
    return rebuild_command(["elmo-tasks", "train-bilm", "--config", args.config, "--resume"], args,
                           {"progress": "auto"}, skip=("command", "config", "resume"), repeated={"set": "--set"})


def fixed_keys_changed(cfg) -> list[str]:
    """The keys a resumed run cannot change (all but ``config.RESUME_FREE``) whose values differ between ``cfg`` and
    the config.yaml of the run already in ``cfg.out_dir`` (none when it cannot be read)."""
    from elmo_features.training.config import resume_changes, saved_config

    return resume_changes(saved_config(Path(cfg.out_dir)), cfg)


def _refuse_pattern(path, what: str) -> None:
    """A train file given as a shell pattern (AllenNLP's ``--train_prefix 'shards/*'`` habit) that is no file itself,
    as a UsageError naming what it matches: the files are listed, so that a resumed run reads the same ones."""
    text = str(path)
    if any(c in text for c in "*?[") and not Path(text).expanduser().exists():
        matches = sorted(glob.glob(str(Path(text).expanduser())))
        todo = ("list the files, e.g. --set \"train_files=[$(ls " + text + " | paste -sd, -)]\"" if matches else
                "list the files")
        raise UsageError(f"{what}: {text} is a pattern, and patterns are not expanded (it matches {len(matches)} "
                         f"file(s)); {todo}")


def check_train_inputs(cfg, source: str, packaged: bool = False, resume: bool = False) -> None:
    """Every file the run reads and its out_dir, before any work (``packaged``: the config ships inside the package,
    a record of how a shipped biLM was trained, whose corpus a user does not have)."""
    if not cfg.train_files:
        raise UsageError(f"{source}: train_files is empty; list the training text files")
    hint = ("give your own tokenized text (one sentence per line, plain or .gz): --set 'train_files=[FILE,...]' "
            "--set heldout_file=FILE")
    if packaged:
        hint = (f"the packaged config {source} records the development corpus a shipped biLM was trained on, which "
                f"is not distributed; {hint}")
    for i, p in enumerate(cfg.train_files):
        _refuse_pattern(p, f"{source}: train_files[{i}]")
        check_input_file(p, f"{source}: train_files[{i}]", beside_config_hint(p, source) or hint)
    if cfg.heldout_file:
        check_input_file(cfg.heldout_file, f"{source}: heldout_file",
                         beside_config_hint(cfg.heldout_file, source) or hint)
    if cfg.init_from and not resume:  # read before the first step only
        check_input_dir(cfg.init_from, f"{source}: init_from", needs=("options.json", "weights.hdf5"),
                        hint="give an exported biLM folder (a train-bilm run's OUT_DIR/export) or --set init_from=null"
                             + (f"; the packaged config {source} names the run folder of a shipped biLM's training"
                                if packaged else ""))
        from elmo_features.training.warm_start import check_init_from

        check_init_from(cfg, source)  # the export's model is this config's (before the corpus is prepared)
    if cfg.vocab_file:
        check_input_file(cfg.vocab_file, f"{source}: vocab_file")
    if cfg.token_vectors:
        check_input_path(cfg.token_vectors, f"{source}: token_vectors",
                         "run `elmo-tasks data get glove-6b-50d` or give a vectors folder / GloVe text file")
    check_output_dir(cfg.out_dir, f"{source}: out_dir")
    check_export_folder(Path(cfg.out_dir) / "export")  # written at each held-out evaluation: found out now


def cmd_train(args) -> int:
    from elmo_features.training.config import TrainConfig
    from elmo_features.training.trainer import Trainer

    check_flags_given(args, "config")
    find = getattr(args, "find_config", None)  # elmo-tasks: a packaged config's name works as well as a path
    path = find(args.config) if find is not None else check_input_file(args.config, "--config")
    check_input_file(path, "--config")
    overrides = _parse_set(args.set)
    if args.threads:
        overrides["threads"] = args.threads
    cfg = TrainConfig.from_yaml(path, overrides)
    check_train_inputs(cfg, args.config, packaged=Path(path) != Path(args.config).expanduser(), resume=args.resume)
    ckpt = Path(cfg.out_dir) / "checkpoint.pt"  # a stop before the training loop (it saves on a signal itself)
    args.interrupt_hint = lambda: (f"continue with: {resume_command(args)}" if ckpt.exists() else
                                   "no checkpoint was saved yet; rerun the same command to start again")
    from elmo_features.util import distributed

    dist = distributed.init() if distributed.torchrun_world() > 1 else None  # torchrun: data-parallel ranks
    if dist is not None:  # every rank trains the same model (a rank given other settings would train another)
        distributed.check_same_config({k: v for k, v in dataclasses.asdict(cfg).items() if k != "threads"},
                                      resume=args.resume)
    ok = False
    try:
        try:
            trainer = Trainer(cfg, resume=args.resume, progress=progress_shown(args.progress), dist=dist)
        except OutputExistsError as e:
            if not ckpt.exists():  # an earlier run's results without a checkpoint: nothing to --resume
                raise
            changed = fixed_keys_changed(cfg)
            if changed:  # --resume would be refused: say so instead of suggesting it
                raise OutputExistsError(f"{e}; that run's config differs from this one in keys a run cannot change "
                                        f"({'; '.join(changed)}): choose another out_dir") from None
            raise OutputExistsError(f"{e}; to continue it: {resume_command(args)}") from None
        result = trainer.run()
        if getattr(trainer, "stop_signal", None):  # stopped by a signal: later ones must not break the way out
            stop.request(trainer.stop_signal)
        ok = True
    finally:
        distributed.finish(sync=ok)
    if dist is None or dist.is_main:
        print(json.dumps(result))
        if not result["finished"]:
            print(f"stopped; continue with: {resume_command(args)}", flush=True)
    signum = getattr(trainer, "stop_signal", None)  # Ctrl-C / SIGTERM: saved, but not a normal end
    return 128 + int(signum) if signum else 0


def load_language_model(options: str, weights: str, vocab_path: str, softmax: str | None = None):
    """A BiLanguageModel (biLM + softmax) from exported files, for perplexity."""
    from elmo_features.model.options import BiLMOptions
    from elmo_features.formats.weights import WeightFileError, check_softmax_bilm, load_weights_into
    from elmo_features.training.data import read_vocab, vocab_sha256
    from elmo_features.training.lm import BiLanguageModel

    vocab = read_vocab(vocab_path)
    model = BiLanguageModel(BiLMOptions.from_file(options), len(vocab))
    load_weights_into(model.bilm, weights)
    src = softmax or weights
    try:
        with h5py.File(src, "r") as f:
            for name, param in (("softmax/W", model.softmax_w), ("softmax/b", model.softmax_b)):
                if name not in f or not isinstance(f[name], h5py.Dataset):
                    raise WeightFileError(f"{src}: missing dataset '{name}' (needed for perplexity; pass --softmax)")
                if tuple(f[name].shape) != tuple(param.shape):
                    raise WeightFileError(f"{src}: dataset '{name}' has shape {tuple(f[name].shape)}, "
                                          f"but the vocabulary ({vocab_path}) needs {tuple(param.shape)}")
                if f[name].dtype.kind != "f":
                    raise WeightFileError(f"{src}: dataset '{name}' has dtype {f[name].dtype}, expected floating point")
                arr = f[name][...].astype("float32")
                if not np.isfinite(arr).all():
                    raise WeightFileError(f"{src}: dataset '{name}' holds NaN or Inf values")
                param.data.copy_(torch.from_numpy(arr))
            recorded = f.get("softmax/vocab_sha256")  # written by train-bilm's export (not in official files)
            if isinstance(recorded, h5py.Dataset):
                if vocab_sha256(vocab) != recorded.asstr()[()]:
                    raise WeightFileError(f"{vocab_path}: not the vocabulary the softmax in {src} was trained with "
                                          "(another word order or other words: each row of the softmax is a word, so "
                                          "the perplexity would be wrong); give the vocab.txt exported with it")
            check_softmax_bilm(f, src, weights)
    except OSError as e:
        raise WeightFileError(f"{src}: unreadable HDF5 file ({' '.join(str(e).split())}); the file is truncated or "
                              "not a weights file") from None
    model.eval()
    return model, vocab


def cmd_eval(args) -> int:
    from elmo_features.training.data import read_sentences
    from elmo_features.training.evaluate import perplexity
    from elmo_features.training.run_checks import not_finite

    check_flags_given(args, "options", "weights", "vocab", "softmax")
    for flag in ("file", "options", "weights", "vocab", "softmax"):
        if getattr(args, flag):
            check_input_file(getattr(args, flag), "FILE" if flag == "file" else f"--{flag}")
    set_threads(args.threads)
    command = rebuild_command(["elmo-tasks", "eval-bilm", args.file], args, {"max_sentences": 0},
                              skip=("command", "file"))
    args.interrupt_hint = f"nothing was written (eval-bilm only prints its result); to run again: {command}"
    model, vocab = load_language_model(args.options, args.weights, args.vocab, args.softmax)
    sentences = list(read_sentences([args.file]))
    if args.max_sentences:
        sentences = sentences[: args.max_sentences]
    res = perplexity(model, sentences, vocab)
    problem = not_finite(res)
    if problem:  # (and "Infinity" is not JSON)
        raise DivergedError(f"{args.file}: {problem} (the model gives some of its tokens probability 0): "
                            f"{args.weights} holds a diverged model, or one that does not fit {args.vocab}; give the "
                            "export of a training that did not diverge, with its own vocab.txt")
    res["sentences"] = len(sentences)
    if res["unk_rate"] > 0.10:  # (train-bilm's held-out warning: UNK_WARN)
        print(f"warning: {args.file}: {res['unk_rate']:.0%} of the predictions are <UNK> (words outside {args.vocab}): "
              "the perplexity mostly measures predicting <UNK>; see forward_no_unk / backward_no_unk", file=sys.stderr)
    print(json.dumps(res, indent=2, allow_nan=False))
    return 0


def register(sub) -> None:
    p = sub.add_parser("train-bilm", help="train a biLM (bilm-tf architecture) on tokenized text",
                       description="Train a biLM (the bilm-tf architecture of ELMo) on tokenized text, with "
                                   "checkpoints and exact resume; exports options.json, weights.hdf5 and vocab.txt "
                                   "that embed --options/--weights and the configs take.")
    p.add_argument("--config", required=True, help="YAML training config: a file, or a packaged config's name "
                   "(elmo-tasks configs list --all shows them: bilm/*)")
    p.add_argument("--resume", action="store_true", help="continue the run in the config's out_dir")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key; may be repeated")
    add_progress_argument(p)
    add_threads_argument(p, default="the config's threads key; null: the cores this process may use, shared among "
                                    "the local processes of a torchrun launch")
    p.add_argument("--no-progress", dest="progress", action="store_const", const="off",
                   help=argparse.SUPPRESS)  # the older spelling of --progress off
    p.set_defaults(func=cmd_train)
    e = sub.add_parser("eval-bilm", help="held-out perplexity (forward, backward, mean) with the full softmax",
                       description="Perplexity of a trained biLM on held-out text (forward, backward and their mean, "
                                   "with the full softmax), printed as JSON.")
    e.add_argument("file", help="tokenized text, one sentence per line (plain or .gz)")
    e.add_argument("--options", required=True, help="the biLM's options.json (as train-bilm exports it)")
    e.add_argument("--weights", required=True, help="the biLM's weights.hdf5")
    e.add_argument("--vocab", required=True, help="the vocab.txt the biLM was trained with (one token per line)")
    e.add_argument("--softmax", help="HDF5 with softmax/W and softmax/b if not in --weights")
    e.add_argument("--max-sentences", type=non_negative_int, default=0, help="0 = all")
    add_threads_argument(e)
    e.set_defaults(func=cmd_eval)

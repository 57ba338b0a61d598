"""One run end to end: read data, precompute features, train, evaluate, save; reload a run and predict.

A run folder holds ``config.yaml`` (the resolved config), ``vocab.json`` (label set etc. from the data),
``model.pt`` (the state_dict of the trainable mix + head only, loadable with ``weights_only=True``, and the sha256
of vocab.json's content, checked on reload),
``metrics.json`` and ``predictions.json`` (dev/test predictions, used to check reloads).
"""
from __future__ import annotations

import json
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from elmo_features.util.paths import RUN_MODEL_FILES, check_output_dir
from elmo_features.util.errors import (CheckpointError, ConfigError, ElmoTasksError, StaleCacheError, UsageError,
                                       first_line)
from elmo_features.util.locking import OutputLock
from elmo_features.util.provenance import git_commit, machine, package_version
from elmo_features.util.schema import saved_config
from elmo_features.util.wording import mapping_text

from elmo_tasks.components import component_config
from elmo_tasks.experiment.records import data_locations, read_metrics
from elmo_tasks.experiment.config import RunConfig, check_reader_fits_head, load_raw, resolve
from elmo_tasks.data import get_reader
from elmo_tasks.data.types import DataFormatError
from elmo_tasks.experiment.checkpoint import check_vocab_digest, check_weights_digest
from elmo_tasks.experiment.run_folder import RunFolder
from elmo_tasks.features.base import (FeatureContext, build_features, check_items, section_fingerprints,
                                 section_frozen_description)
from elmo_tasks.plugins import plugin_digests
from elmo_tasks.features.fingerprints import report_fingerprints
from elmo_tasks.heads.base import Head
from elmo_tasks.registry import HEADS
from elmo_tasks.experiment.preflight import (CHECKPOINT_FORMAT, check_config_digest, check_plugin_versions,
                                       clear_unfinished_run, warn_shared_files)
from elmo_tasks.experiment.training import Split, TaskModel, evaluate, predict, set_seed, train

if TYPE_CHECKING:
    from elmo_tasks.experiment.data_parallel import DataParallel

# ---------------------------------------------------------------- data

def read_file(reader: str, path: str | Path, options: dict, memo: dict | None = None) -> list:
    """Examples of a data file via the named reader; with ``memo`` (a FeatureContext's ``memo.examples``) each
    file version is read once (e.g. once per comparison)."""
    if memo is None:
        return _checked_read(reader, path, options)
    p = Path(path)
    stamp = p.stat().st_mtime_ns if p.exists() else None
    key = json.dumps([reader, str(p.resolve()), stamp, options], sort_keys=True, default=str)
    if key not in memo:
        memo[key] = _checked_read(reader, path, options)  # (a list: a reader that yields is read once)
    return list(memo[key])


def _checked_read(reader: str, path: str | Path, options: dict) -> list:
    """The reader's examples as a list; a plugin reader that gives none is named (not the file, which may hold data)."""
    fn = get_reader(reader)
    module = getattr(fn, "__module__", "") or ""
    try:
        examples = list(fn(path, **options))
    except ElmoTasksError as e:  # a plugin reader's examples refused as they are made: where they came from
        if module == "elmo_tasks" or module.startswith("elmo_tasks.") or str(path) in str(e):
            raise
        raise DataFormatError(f"{path}: the reader {reader} (plugin module {module}): {first_line(e)}") from None
    if not examples and not (module == "elmo_tasks" or module.startswith("elmo_tasks.")) and Path(path).is_file() \
            and Path(path).stat().st_size:
        raise DataFormatError(f"{path}: the reader {reader} (plugin module {module}) gave no examples from this "
                              "non-empty file; check the reader")
    return examples


def read_examples(cfg: RunConfig, split: str, head_cls: type[Head], memo: dict | None = None) -> tuple[list, dict]:
    """Examples of one split (empty sentences dropped and counted; malformed ones rejected) + stats."""
    path = getattr(cfg.data, split)
    try:
        examples = read_file(cfg.data.reader, path, cfg.data.reader_options, memo)
    except FileNotFoundError as e:
        hint = " (fetch the public data sets with `elmo-tasks data get NAME`)" if "data" in Path(path).parts else ""
        raise FileNotFoundError(f"{cfg.name}: data.{split}: {e}{hint}") from None
    except ConfigError as e:  # a reader option the reader cannot use: the reader knows the option, not the config
        raise ConfigError(f"{cfg.name}: data.reader_options: {e}") from None
    limit = getattr(cfg.data, f"max_{split}")
    if limit is not None:
        examples = examples[:limit]
    return check_examples(examples, path, split, head_cls)


def check_examples(examples: list, path: str | Path, split: str, head_cls: type[Head]) -> tuple[list, dict]:
    """Reject malformed examples (naming the file and example number); drop and count empty ones."""
    kept = []
    for i, ex in enumerate(examples):
        head_cls.check_example(ex, f"{path}: {split} example {i + 1}")
        blank = next((j for j, t in enumerate(ex.tokens) if not isinstance(t, str) or not t.strip()), None)
        if blank is not None:  # (a plugin reader's; the toolkit's readers split on whitespace)
            raise DataFormatError(f"{path}: {split} example {i + 1}: token {blank + 1} is {ex.tokens[blank]!r}, not a "
                                  "word (empty, whitespace or not a string); check the reader")
        if len(ex.tokens) > 0:
            kept.append(ex)
    if not kept:
        raise DataFormatError(f"{path}: no non-empty {split} examples (an empty file, or only blank lines?); "
                              f"give a {split} file with data")
    stats = {"path": str(path), "examples": len(kept), "tokens": sum(len(ex.tokens) for ex in kept),
             "empty_dropped": len(examples) - len(kept)}
    if not str(path).startswith("<"):  # a file: where it was (a relative path names another file elsewhere)
        stats["resolved"] = os.path.abspath(path)
    return kept, stats


def build_model(cfg: RunConfig, vocab: dict, context: FeatureContext) -> TaskModel:
    """Feature source + head from a resolved config and the head's vocab (seeded: deterministic init), on
    ``context.device``."""
    set_seed(cfg.training.seed)
    features = build_features(cfg.features, context)
    head_cls = HEADS.get(cfg.head["name"])
    head = head_cls(component_config(HEADS, cfg.head), features.output_dim, vocab)
    return TaskModel(features, head).to(context.device)


def make_split(model: TaskModel, name: str, examples: list) -> Split:
    sentences = [list(ex.tokens) for ex in examples]
    return Split(name, examples, check_items(model.features, sentences, model.features.precompute(sentences, name),
                                             name))


# ---------------------------------------------------------------- run

def run_experiment(cfg: RunConfig, out_dir: str | Path, context: FeatureContext | None = None,
                   progress: bool | None = None, command: str = "", examples: dict[str, list] | None = None,
                   dist: DataParallel | None = None, features: dict[str, list] | None = None) -> dict:
    """Train and evaluate one head on one feature source; write the run folder; return metrics.json's dict.

    ``examples`` ({"train": [...], "dev": [...], "test": [...]}) replaces reading cfg.data's files
    (programmatic use and tests); they are checked and empty ones dropped the same way. ``features`` gives the
    frozen items of those examples per split, in their order, already computed (e.g. token subsets of a long data
    set, tasks/features/subset.py); a split whose examples lost an empty one computes its own.
    With ``dist`` (torchrun): data-parallel training and evaluation (``elmo_tasks.experiment.data_parallel``); every rank
    computes (or reads from the cache) the frozen features; rank 0 alone writes the run folder.
    """
    check_run_args(cfg, examples, features)
    if context is not None and not isinstance(context, FeatureContext):  # (before the run folder is made)
        raise TypeError(f"run_experiment: context must be a FeatureContext or None, got {type(context).__name__}")
    main = dist is None or dist.is_main
    if not isinstance(out_dir, (str, os.PathLike)) or str(out_dir) == "":
        raise TypeError(f"out_dir: expected the run folder's path (a str or Path), got {type(out_dir).__name__} "
                        f"{out_dir!r:.40}")
    out_dir = check_output_dir(out_dir, "out_dir (the run folder, which holds config.yaml, model.pt, ...)")
    if not main:
        return _run_experiment(cfg, out_dir, context, progress, command, examples, dist, features)
    # one writer per run folder: a second process (e.g. two resumed comparisons) is refused, not interleaved
    with OutputLock(out_dir / "run.lock", f"the run folder {out_dir}"):
        clear_unfinished_run(out_dir)
        return _run_experiment(cfg, out_dir, context, progress, command, examples, dist, features)


def check_run_args(cfg: RunConfig, examples: dict | None, features: dict | None) -> None:
    """``run_experiment``'s arguments, before any work: TypeError naming the argument (a config file's dict, a string
    for a split's examples, a misspelt split)."""
    if not isinstance(cfg, RunConfig):
        raise TypeError(f"cfg: expected a RunConfig (elmo_tasks.experiment.config.load_config(path), or resolve(dict) for "
                        f"a config dict), got {type(cfg).__name__}")
    for name, given in (("examples", examples), ("features", features)):
        if given is not None and not isinstance(given, dict):
            raise TypeError(f"{name}: expected a dict of splits ({{'train': [...], 'dev': [...]}}), got "
                            f"{type(given).__name__}")
        for split, items in (given or {}).items():
            if split not in ("train", "dev", "test"):
                raise TypeError(f"{name}: unknown split {split!r}; the splits are 'train', 'dev' and 'test'")
            if name == "features":  # (per-example items of a source: checked by the source)
                continue
            if not isinstance(items, (list, tuple)):
                raise TypeError(f"examples[{split!r}]: expected a list, got {type(items).__name__} {items!r:.40}")
            bad = [ex for ex in items if not isinstance(getattr(ex, "tokens", None), (list, tuple))]
            if bad:
                raise TypeError(f"examples[{split!r}][{items.index(bad[0])}]: expected an example of the data reader "
                                f"(with .tokens), got {type(bad[0]).__name__} {bad[0]!r:.40}")


def read_run_data(cfg: RunConfig, examples: dict[str, list] | None, context: FeatureContext,
                  main: bool) -> tuple[dict, dict, dict]:
    """The run's checked examples per split, their stats and the head's vocab: every data check before any work."""
    head_cls = HEADS.get(cfg.head["name"])
    if examples is None:  # the reader is used: its kind of example is the head's
        check_reader_fits_head(cfg.data.reader, cfg.head["name"], cfg.name)
    data, stats = {}, {}
    for split in ("train", "dev", "test"):
        if examples is not None:
            if split in examples:
                data[split], stats[split] = check_examples(examples[split], f"<{split} examples>", split, head_cls)
        elif getattr(cfg.data, split) is not None:
            data[split], stats[split] = read_examples(cfg, split, head_cls, context.memo.examples)
    if "train" not in data:
        raise ConfigError(f"{cfg.name}: no training data; set data.train")
    vocab = head_cls.build_vocab(component_config(HEADS, cfg.head), data["train"], dict(cfg.data.reader_options))
    labels = vocab.get("labels")
    if isinstance(labels, list) and len(labels) == 1:  # every score would be 1.0 (or 0.0) and mean nothing
        raise DataFormatError(f"every training example has the label {labels[0]!r}: a head trained on one label "
                              "measures nothing; check the data and the reader's options (the label column)",
                              cfg.data.train or "the training examples")
    for split in ("dev", "test"):
        if split in data:  # e.g. an NER set without entities: span F1 is undefined on it
            head_cls.check_scored_examples(vocab, data[split], f"{stats[split]['path']} (data.{split})")
    if examples is None and main:  # after the errors: a run that cannot start says only why
        warn_shared_files(cfg, data)
    return data, stats, vocab


def _splits(model: TaskModel, data: dict[str, list], examples: dict[str, list] | None,
            features: dict[str, list] | None) -> dict[str, Split]:
    """Each split's examples and frozen items: the given ``features`` where its examples are the given ones, all
    of them (none was dropped as empty), else computed."""
    given = {name: items for name, items in (features or {}).items()
             if examples is not None and name in data and len(data[name]) == len(examples[name])}
    return {name: Split(name, ex, list(given[name])) if name in given else make_split(model, name, ex)
            for name, ex in data.items()}


def _evaluate_splits(model: TaskModel, splits: dict[str, Split], cfg: RunConfig, progress: bool | None,
                     dist: DataParallel | None, folder: RunFolder) -> tuple[dict, dict]:
    """Scores (with the count of gold labels never seen in training) and predictions on dev and test."""
    metrics, predictions = {}, {}
    for name in ("dev", "test"):
        if name in splits:
            scores, preds = evaluate(model, splits[name], cfg.training.eval_batch_size, progress, dist)
            unseen = model.head.unseen(splits[name].examples)
            scores["unseen_labels"] = sum(unseen.values())
            if unseen:
                folder.note(f"{name}: {sum(unseen.values())} gold labels never seen in training (counted as errors): "
                            f"{mapping_text(dict(unseen.most_common()), limit=10)}")
            metrics[name] = scores
            metrics[f"{name}_unseen_labels"] = dict(unseen)
            predictions[name] = preds
    return metrics, predictions


def _run_experiment(cfg: RunConfig, out_dir: Path, context: FeatureContext | None, progress: bool | None,
                    command: str, examples: dict[str, list] | None, dist: DataParallel | None,
                    features: dict[str, list] | None = None) -> dict:
    folder = RunFolder(out_dir, writes=dist is None or dist.is_main)
    t_start = time.perf_counter()
    commit = git_commit()  # the code that runs: taken now, not when the run ends (HEAD may move meanwhile)
    seconds: dict[str, float] = {}
    context = context or FeatureContext()
    data, stats, vocab = read_run_data(cfg, examples, context, folder.writes)
    seconds["data"] = round(time.perf_counter() - t_start, 2)

    t_feat = time.perf_counter()  # loading the biLM / vectors and computing (or reading) frozen features
    model = build_model(cfg, vocab, context)
    folder.start(cfg, vocab)
    # with ranks, the cache's per-entry lock: one rank computes an entry, the others wait for it and read it
    with dist.all_ok("run-features", "computing the frozen features") if dist else nullcontext():
        splits = _splits(model, data, examples, features)
    seconds["features"] = round(time.perf_counter() - t_feat, 2)

    result = train(model, splits["train"], splits.get("dev"), cfg.training, progress,
                   on_improve=lambda epoch, dev: folder.save_model(model), dist=dist)
    folder.save_model(model)  # the best state (loaded back by train)

    plugins = plugin_digests(cfg.to_dict())  # the plugin code's version: compare --resume refuses another one
    metrics: dict[str, Any] = {"name": cfg.name, "command": command, "cwd": os.getcwd(),
                               "version": package_version(), "git_commit": commit, "machine": machine(),
                               "data": stats, "data_files": data_locations(stats, cfg, folder.path),
                               **({"plugin_modules": plugins} if plugins else {})}
    scores, predictions = _evaluate_splits(model, splits, cfg, progress, dist, folder)
    metrics.update(scores)
    metrics.update({"primary_metric": model.head.primary_metric, "best_epoch": result.best_epoch,
                    "epochs_run": len(result.history), "stopped_early": result.stopped_early,
                    "history": result.history, "features": model.features.report(),
                    "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
                    "seconds": {**seconds, "train": result.seconds, "train_cpu": result.cpu_seconds,
                                "total": round(time.perf_counter() - t_start, 2)}})
    if dist is not None:  # batch_size is per rank: the global batch has batch_size x ranks sentences
        metrics["ranks"] = dist.world_size
    folder.finish(predictions, metrics)
    return metrics


# ---------------------------------------------------------------- reload and predict

def load_run(run_dir: str | Path, context: FeatureContext | None = None) -> tuple[RunConfig, TaskModel]:
    """Rebuild a trained model from its run folder (config.yaml + vocab.json + model.pt)."""
    if not isinstance(run_dir, (str, os.PathLike)) or str(run_dir) == "":
        raise TypeError(f"load_run: run_dir must be a run folder's path (a str or Path), got {type(run_dir).__name__} "
                        f"{run_dir!r:.40}")
    run_dir = Path(run_dir)
    for f in RUN_MODEL_FILES:
        if not (run_dir / f).exists():
            raise FileNotFoundError(f"{run_dir} is not a finished run folder: {f} is missing")
    with saved_config():  # a rule added since it ran warns (the trained model stays usable)
        cfg = resolve(load_raw(run_dir / "config.yaml"), source=str(run_dir / "config.yaml"))
    vocab = json.loads((run_dir / "vocab.json").read_text(encoding="utf-8"))
    context = context or FeatureContext()
    ckpt = torch.load(run_dir / "model.pt", map_location="cpu", weights_only=True)
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        found = ckpt.get("format") if isinstance(ckpt, dict) else type(ckpt).__name__
        raise CheckpointError(f"{run_dir / 'model.pt'}: unknown checkpoint format {found!r}; rerun the run")
    check_weights_digest(run_dir, ckpt)
    check_config_digest(run_dir, load_raw(run_dir / "config.yaml"), ckpt)  # (first: a model.pt of another run
    check_vocab_digest(run_dir, vocab, ckpt)  # disagrees on the config too, which names the copy)
    check_plugin_versions(run_dir, cfg.to_dict())  # the plugin code is part of the model
    changed = frozen_change(run_dir, cfg, context)
    try:
        model = build_model(cfg, vocab, context)
        model.load_state_dict(ckpt["state_dict"])
    except (RuntimeError, KeyError, TypeError, ValueError) as e:
        if not changed or isinstance(e, CheckpointError):
            raise
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        raise StaleCacheError(f"{changed}, and the trained head no longer fits it ({first}): restore that input, "
                              "or rerun the run on the new one") from e
    model.eval()
    if changed:
        print(f"warning: {changed}; predictions may differ from the run's", file=sys.stderr)
    return cfg, model


def frozen_change(run_dir: Path, cfg: RunConfig, context: FeatureContext) -> str:
    """'' when the features section loads the frozen inputs the run was trained on (its metrics.json records their
    fingerprints), else a sentence naming the input that changed."""
    path = run_dir / "metrics.json"
    if not path.exists():
        return ""
    saved = report_fingerprints(read_metrics(path).get("features") or {})
    if not saved:  # a run that recorded no fingerprint (made before they were): nothing to compare with
        return ""
    now = section_fingerprints(cfg.features, context.memo)
    if saved == now:
        return ""
    short = lambda fps: ", ".join(f[:12] for f in fps) or "none"
    return (f"the frozen input of {run_dir}'s features changed since it was trained: "
            f"{section_frozen_description(cfg.features)} (fingerprint {short(saved)} then, {short(now)} now)")


def predict_examples(cfg: RunConfig, model: TaskModel, examples: list, progress: bool | None = None) -> list:
    """Predictions for examples (in order) with a loaded model: examples of the run's reader (with ``.tokens``), or
    token lists (made into the head's unlabelled examples)."""
    return predict(model, make_split(model, "predict", as_examples(model, examples)), cfg.training.eval_batch_size,
                   progress)


def as_examples(model: TaskModel, examples: list) -> list:
    """``examples`` with each token list made an unlabelled example of the head; TypeError naming anything else."""
    if isinstance(examples, (str, bytes)) or not hasattr(examples, "__iter__"):
        raise TypeError(f"examples: expected a list of examples or of token lists, got {type(examples).__name__}")
    out = []
    for i, ex in enumerate(examples):
        if isinstance(ex, (list, tuple)) and all(isinstance(t, str) for t in ex):
            ex = model.head.blank_example(list(ex))
        elif not isinstance(getattr(ex, "tokens", None), (list, tuple)):
            raise TypeError(f"examples[{i}]: expected an example of the run's data reader (with .tokens) or a list "
                            f"of token strings (e.g. {'great film'.split()!r}), got {type(ex).__name__} {ex!r:.60}")
        if not ex.tokens or any(not str(t).strip() for t in ex.tokens):  # (predict refuses a blank line too)
            raise UsageError(f"examples[{i}]: an empty sentence or an empty token ({list(ex.tokens)!r:.60}); every "
                             "sentence needs tokens that are not blank")
        out.append(ex)
    return out

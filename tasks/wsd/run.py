"""The WSD comparison end to end: baselines, 1-NN per layer / average / mix, the trained head and per-layer probes,
for every feature source; key files, scores.json, table5.md and a plot."""
from __future__ import annotations

import copy
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from elmo_features.util.provenance import git_commit, machine, package_version
from elmo_features.util.errors import ConfigError

from elmo_tasks.experiment.config import DataConfig, RunConfig
from elmo_tasks.wsd.data.examples import (WsdSentence, all_targets, check_candidates, check_training_set,
                                     load_inventory, to_examples, warn_unknown_keys)
from elmo_tasks.wsd.data.reader import POS_TAGS, WsdFormatError, find_dataset_files, load_dataset
from elmo_tasks.wsd.data.scorer import Score, merge_scores, score, write_key_file
from elmo_tasks.experiment.preflight import same_content
from elmo_tasks.experiment.run import load_run, make_split, run_experiment
from elmo_tasks.experiment.run_folder import save_json
from elmo_tasks.features.base import FeatureContext, FeatureSource, build_features
from elmo_tasks.features.subset import subset_items
from elmo_tasks.registry import HEADS
from elmo_tasks.experiment.training import predict
from elmo_tasks.wsd.baselines import MostFrequentSense, first_sense_answers
from elmo_tasks.wsd.config import WsdConfig
from elmo_tasks.wsd.vectors import CHUNK, instance_layers
from elmo_tasks.wsd.knn import SenseSums, mix_layers, nearest_sense
from elmo_tasks.wsd.plot import plot_f1_per_layer
from elmo_tasks.wsd.example_sums import example_sums
from elmo_tasks.wsd.sense_method import (ROWS as SENSE_ROWS, HeldOut, check_hold_out, hold_out, load_graph, plan_senses,
                                    sense_rows)
from elmo_tasks.wsd.senses import Graph
from elmo_tasks.wsd.table import write_table

ALL = "ALL"


@dataclass
class TestSet:
    """A test data set: its examples and gold keys."""

    name: str
    folder: str
    examples: list[WsdSentence]
    unknown_keys: list[str] = field(default_factory=list)  # "file:line: key" of gold keys not in WordNet
    no_candidates: int = 0  # instances whose lemma+pos has no WordNet candidate

    @property
    def targets(self):
        return all_targets(self.examples)


@dataclass
class Report:
    """Everything measured, row by row (row = a method on a feature source)."""

    tests: list[TestSet]
    out_dir: Path
    rows: list[dict] = field(default_factory=list)
    layers: dict[str, int] = field(default_factory=dict)  # source -> its number of layers (for the rows it cannot make)

    @property
    def keys_dir(self) -> Path:
        """Where this run's key files go until the table is written (then they become OUT/keys, whole)."""
        return self.out_dir / ".keys.partial"

    def add(self, row_id: str, label: str, answers: dict[str, dict[str, str | None]], group: str,
            source: str | None = None, layer: int | str | None = None, **extra: Any) -> dict:
        """Score one method on every test set (+ ALL) and write its key files.

        answers: test set name -> instance id -> key (ids repeat across test sets, so never merge them)."""
        scores: dict[str, Score] = {}
        by_pos: dict[str, list[Score]] = {}
        for ts in self.tests:
            ids = [t.id for t in ts.targets]
            got = answers[ts.name]
            write_key_file(self.keys_dir / row_id / f"{ts.name}.key.txt", got, ids)
            gold = {t.id: t.gold for t in ts.targets if t.gold}
            if gold:
                scores[ts.name] = score(gold, {i: got[i] for i in ids if got.get(i)})
                for pos in POS_TAGS:  # the framework's breakdown by part of speech
                    part = {t.id: t.gold for t in ts.targets if t.gold and t.pos == pos}
                    if part:
                        by_pos.setdefault(pos, []).append(score(part, {i: got[i] for i in part if got.get(i)}))
        if scores:
            scores[ALL] = merge_scores(scores.values())
        row = {"id": row_id, "label": label, "group": group, "source": source, "layer": layer,
               "scores": {k: s.as_dict() for k, s in scores.items()},
               "pos_scores": {pos: merge_scores(ss).as_dict() for pos, ss in by_pos.items()}, **extra}
        self.rows.append(row)
        f1 = row["scores"].get(ALL, {}).get("F1")
        print(f"{label}: ALL F1 {f1}" if f1 is not None else f"{label}: predictions written (no gold keys)", flush=True)
        return row


def replace_folder(new: Path, final: Path) -> None:
    """Put the folder ``new`` at ``final``, removing what was there (an earlier table's key files)."""
    old = final.with_name(final.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if final.exists():
        os.replace(final, old)
    if new.exists():
        os.replace(new, final)
    if old.exists():
        shutil.rmtree(old)


def _read_tests(test_dirs: list[str], inventory) -> list[TestSet]:
    tests, seen = [], {}
    for d in test_dirs:
        ds = load_dataset(d, require_gold=False)
        if ds.gold is None:
            print(f"note: {d} has no {ds.name}.gold.key.txt: it is not scored (the table shows '–'); the answers for "
                  f"it are written to keys/ROW/{ds.name}.key.txt of the output folder", file=sys.stderr)
        name = ds.name
        if name in seen:
            seen[name] += 1
            name = f"{name}_{seen[name]}"
        else:
            seen[name] = 1
        ts = TestSet(name, str(d), to_examples(ds, inventory))
        ts.unknown_keys = warn_unknown_keys(ds, inventory, f"test set {name}")
        if not ts.examples:
            raise WsdFormatError(f"{d}: test set {ds.name} has no <instance> elements")
        ts.no_candidates = check_candidates(ts.examples, f"test set {name}", find_dataset_files(ds.folder)[1],
                                            inventory.source)
        tests.append(ts)
    return tests


def _one_hot(L: int, layer: int) -> list[float]:
    return [1.0 if i == layer else 0.0 for i in range(L)]


def _knn_rows(report: Report, cfg: WsdConfig, name: str, sums: SenseSums, test_vecs: list[np.ndarray],
              which: list[tuple[str, str, list[float], Any]]) -> None:
    """1-NN rows for the mixes in ``which`` = [(row suffix, label, layer weights, layer tag)]."""
    for suffix, label, weights, layer in which:
        centroids = sums.centroids(weights)  # (K, D)
        answers, backoff = {}, 0
        for ts, vecs in zip(report.tests, test_vecs):
            answers[ts.name], b = nearest_sense(ts.targets, mix_layers(vecs, weights), sums.keys, centroids)
            backoff += b
        report.add(f"{name}-knn-{suffix}", f"{name} 1-NN, {label}", answers, "knn", name, layer,
                   weights=[round(w, 6) for w in weights], backoff=backoff)


def _train_head(cfg: WsdConfig, section: dict, train_dir: str, train_ex: list[WsdSentence],
                report: Report, context: FeatureContext, progress: bool | None, run_dir: Path,
                command: str, items: list | None = None) -> tuple[dict[str, dict[str, str | None]], dict]:
    """Train cfg.head on ``section`` features with ``run_experiment`` (the path of every head: ``run_dir`` is a
    run folder as ``elmo-tasks run`` writes it), then answer every test set with the saved run, as
    ``elmo-tasks predict`` would. Every ``head_dev_every``-th training sentence is the early-stopping dev set."""
    run_cfg = RunConfig(f"{cfg.name}-{run_dir.name}",
                        DataConfig(reader="raganato", train=str(train_dir), reader_options={"wordnet": cfg.wordnet}),
                        copy.deepcopy(section), copy.deepcopy(cfg.head), copy.deepcopy(cfg.training))
    every = cfg.head_dev_every
    is_dev = [bool(every) and i % every == every - 1 for i in range(len(train_ex))]
    examples = {"train": [ex for ex, d in zip(train_ex, is_dev) if not d]}
    features = None if items is None else {"train": [x for x, d in zip(items, is_dev, strict=True) if not d]}
    if every and not any(is_dev):  # (probes and the mix head train the same way: said once per head run)
        print(f"warning: head_dev_every {every}: holds out none of the {len(train_ex):,} training sentences; the head "
              "trains without a dev set (no early stopping): give a smaller head_dev_every", file=sys.stderr)
    if any(is_dev):
        examples["dev"] = [ex for ex, d in zip(train_ex, is_dev) if d]
        if features is not None:
            features["dev"] = [x for x, d in zip(items, is_dev) if d]
    metrics = run_experiment(run_cfg, run_dir, context, progress, command, examples=examples, features=features)
    _, model = load_run(run_dir, context)
    answers: dict[str, dict[str, str | None]] = {}
    for ts in report.tests:
        preds = predict(model, make_split(model, ts.name, ts.examples), cfg.training.eval_batch_size, progress)
        answers[ts.name] = {t.id: p for ex, ps in zip(ts.examples, preds) for t, p in zip(ex.targets, ps)}
    best = metrics["history"][metrics["best_epoch"] - 1] if metrics["best_epoch"] else {}
    info = {"features": _merge_reports(metrics["features"], model.features.report()),
            "best_epoch": metrics["best_epoch"], "epochs_run": metrics["epochs_run"], "best_dev": best.get("dev", {}),
            "history": metrics["history"], "train_seconds": round(metrics["seconds"]["train"], 1),
            "run_dir": str(run_dir)}
    return answers, info


def _merge_reports(trained: dict, reloaded: dict) -> dict:
    """The trained model's feature report plus the per-split entries (e.g. static OOV rates) of the test sets
    the reloaded model embedded."""
    out = dict(trained)
    for k, v in reloaded.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = {**out[k], **v}
    return out


def train_ds_name(train_dir: str) -> str:
    """The training set's name for labels (its folder name)."""
    return Path(train_dir).name


def dev_layer_choice(held_out: HeldOut) -> dict:
    """The layer whose 1-NN is most accurate on the held-out training sentences, with sense averages from the
    other sentences (no test data involved). Returns {"layer", "dev_accuracy": [per layer], "instances"}."""
    held, sums = held_out.targets, held_out.sums
    L = held_out.vecs.shape[1]
    acc = []
    for l in range(L):
        answers, _ = nearest_sense(held, held_out.vecs[:, l], sums.keys, sums.centroids(_one_hot(L, l)))
        acc.append(float(np.mean([answers[t.id] in t.gold for t in held])))
    best = int(np.argmax(acc))
    return {"layer": best, "dev_accuracy": [round(a, 4) for a in acc], "instances": len(held),
            "every": held_out.every, "by": held_out.by}


def _chunked_source(cfg: WsdConfig, section: dict, train_ex: list[WsdSentence],
                    context: FeatureContext) -> tuple[FeatureSource, int | None, list | None]:
    """The source of a section, the chunk size to read its arrays with (None: all at once), and the list that
    collects the head's training items (None: no head, or it needs the whole per-word arrays). The per-word arrays
    are read chunk by chunk and none is kept (SemCor's of a 13-layer encoder are ~30 GB) when there is no head, or
    when the head reads some tokens only and the source computes features token by token: then only those tokens'
    rows are kept for its training."""
    if cfg.head is None:
        return build_features(section, replace(context, memo=context.memo.streaming())), CHUNK, None
    head_cls = HEADS.get(cfg.head["name"])
    source = build_features(section, replace(context, memo=context.memo.streaming()))
    if source.tokenwise and all(head_cls.token_positions(ex) is not None for ex in train_ex):
        return source, CHUNK, []
    return build_features(section, context), None, None  # the head's training reads the remembered arrays again


def _keep_head_rows(source: FeatureSource, head_cls: type, part: list[WsdSentence], layers: list[np.ndarray],
                    items: list) -> None:
    """Append the rows the head reads of one chunk's items (the precomputed items of its per-word arrays)."""
    items += subset_items(source.items_of_layers(layers), [head_cls.token_positions(ex) for ex in part])


def _source_rows(report: Report, cfg: WsdConfig, name: str, train_dir: str, train_ex: list[WsdSentence],
                 context: FeatureContext, progress: bool | None, runs_dir: Path, command: str,
                 graph: Graph | None = None) -> None:
    """Every row of one feature source."""
    section = cfg.sources[name]
    source, chunk, head_items = _chunked_source(cfg, section, train_ex, context)
    keep = None if head_items is None else lambda part, layers: _keep_head_rows(
        source, HEADS.get(cfg.head["name"]), part, layers, head_items)
    t0 = time.perf_counter()
    if not cfg.knn and head_items is not None:  # the head alone: no instance vector is kept (no row reads them)
        instance_layers(source, train_ex, "train", chunk, keep, vectors=False)
        L = head_items[0].values.shape[0] if head_items and head_items[0].values.ndim == 3 else 1
        print(f"{name}: {L} layer(s), the head's rows kept ({time.perf_counter() - t0:.0f}s features)", flush=True)
        _head_rows(report, cfg, name, section, train_dir, train_ex, context, progress, runs_dir, command, None, [],
                   source, head_items, L)
        return
    train_vecs = instance_layers(source, train_ex, "train", chunk, keep)
    sums = SenseSums.from_targets(all_targets(train_ex), train_vecs)  # (K, L, D) sums
    want_dev = "dev_layer" in cfg.knn and train_vecs.shape[1] > 1
    held_out = hold_out(train_ex, train_vecs, cfg.head_dev_every, cfg.dev_split) if graph or want_dev else None
    del train_vecs
    dev_choice = dev_layer_choice(held_out) if want_dev else None
    test_vecs = [instance_layers(source, ts.examples, ts.name, chunk) for ts in report.tests]
    L = sums.sums.shape[1]
    print(f"{name}: {L} layer(s) of dim {sums.sums.shape[2]}, {len(sums.keys)} training senses "
          f"({time.perf_counter() - t0:.0f}s features)", flush=True)
    which = [(f"layer{l}", f"layer {l}" if L > 1 else "vectors", _one_hot(L, l), l)
             for l in range(L) if "layers" in cfg.knn]
    if "average" in cfg.knn and L > 1:
        which.append(("average", "average of layers", [1.0 / L] * L, "average"))
    report.layers[name] = L
    if "fixed_mix" in cfg.knn and L > 1:
        if len(cfg.fixed_mix) != L:
            raise ConfigError(f"fixed_mix: {len(cfg.fixed_mix)} weights, but source {name} has {L} layers; give one "
                              "weight per layer (or drop the fixed_mix row from knn)")
        s = sum(cfg.fixed_mix)
        which.append(("fixed_mix", "fixed mix", [w / s for w in cfg.fixed_mix], "fixed_mix"))
    if dev_choice is not None:
        l = dev_choice["layer"]
        which.append(("dev_layer", f"layer chosen on held-out {train_ds_name(train_dir)} {dev_choice['by']} ({l})",
                      _one_hot(L, l), l))
    _knn_rows(report, cfg, name, sums, test_vecs, which)
    if dev_choice is not None:
        report.rows[-1]["dev_choice"] = dev_choice
    weights = _head_rows(report, cfg, name, section, train_dir, train_ex, context, progress, runs_dir, command,
                         sums, test_vecs, source, head_items, L) if cfg.head is not None else None
    del head_items
    if graph is not None:  # sense vectors: layers chosen on the held-out sentences, a learned mix among them
        extra = [(f"mix learned by {cfg.head['name']}", weights)] if weights else []
        t1 = time.perf_counter()
        examples = example_sums(section, graph, context, progress)
        print(f"{name}: WordNet's examples embedded ({time.perf_counter() - t1:.0f}s)", flush=True)
        texts = cfg.gloss_texts if {"senses_glosses", "senses_prior"} & set(cfg.knn) else []
        plan = plan_senses(section, graph, held_out, context, texts, progress, extra, examples)
        sense_rows(report, cfg, name, graph, sums, plan, test_vecs)


def _head_rows(report: Report, cfg: WsdConfig, name: str, section: dict, train_dir: str,
               train_ex: list[WsdSentence], context: FeatureContext, progress: bool | None, runs_dir: Path,
               command: str, sums: SenseSums | None, test_vecs: list[np.ndarray], source, items: list | None,
               L: int) -> list[float] | None:
    """The trained head's row, its learned mix as a 1-NN row, and the per-layer probes; returns the learned mix
    weights (None when the head learns none). ``items``: the head's training items, kept while embedding."""
    head = cfg.head["name"]
    answers, info = _train_head(cfg, section, train_dir, train_ex, report, context, progress,
                                runs_dir / f"{name}-{head}", command, items)
    weights = info["features"].get("mix_weights")
    report.add(f"{name}-{head}", f"{name} {head}" + (", scalar mix" if weights else ""), answers, "head", name,
               "mix" if weights else None, head=info)
    if weights and "learned_mix" in cfg.knn:
        _knn_rows(report, cfg, name, sums, test_vecs, [("learned_mix", f"mix learned by {head}", weights, "mix")])
    if cfg.probes and L > 1 and source.offers_layers and "layer" in section:
        for l in range(L):
            probe = {**copy.deepcopy(section), "layer": l, "mix": None}
            layer_items = [s.layer(l) for s in items] if items and items[0].values.ndim == 3 else None  # (k, D)
            answers, info = _train_head(cfg, probe, train_dir, train_ex, report, context, progress,
                                        runs_dir / f"{name}-{head}-layer{l}", command, layer_items)
            report.add(f"{name}-{head}-layer{l}", f"{name} {head}, layer {l} (probe)", answers, "probe", name, l,
                       head=info)
    return weights


def wsd_identity(cfg: WsdConfig, train_dir: str, test_dirs: list[str]) -> dict:
    """What scores.json records of the settings its table measured (JSON values): the config without its row
    choice, the train and test folders (resolved) and the section of every feature source it has rows of."""
    settings = {k: v for k, v in cfg.to_dict().items() if k not in ("train", "test", "sources", "features")}
    return json.loads(json.dumps({"settings": settings, "train": os.path.realpath(Path(train_dir).expanduser()),
                                  "tests": [os.path.realpath(Path(d).expanduser()) for d in test_dirs],
                                  "sources": {n: cfg.sources[n] for n in cfg.features}}))


def warn_rows_of_no_source(layers: dict[str, int], knn: list[str]) -> None:
    """The knn rows that need several layers (average, fixed_mix, dev_layer) when no source has more than one: they
    make no row, so saying so once per source is a warning. With a source of several layers they have their rows, and
    a one-layer source (e.g. static vectors beside the biLMs) simply has its one `layers` row."""
    several = " or ".join(k for k in ("average", "fixed_mix", "dev_layer") if k in knn)
    if not several or not layers or max(layers.values()) > 1:
        return
    for name in layers:
        print(f"warning: source {name} has one layer: no {several} row for it (its one layer is the `layers` row of "
              "knn)", file=sys.stderr)


def warn_test_is_train(train_dir: str, test_dirs: list[str]) -> None:
    """One warning line per test folder that is the training folder, or whose data XML or gold key file has the same
    content as the training set's (a copy under another name). A training folder that is gone or changed since (the
    one a sense file records) is compared by its path alone."""
    meaning = "its scores measure fit to the training data, not generalisation"
    try:
        _, train_xml, train_key = find_dataset_files(train_dir)
    except (OSError, WsdFormatError):
        train_xml = train_key = None
    for d in test_dirs:
        if Path(d).expanduser().resolve() == Path(train_dir).expanduser().resolve():
            print(f"warning: the test folder {d} is the training folder: {meaning}", file=sys.stderr, flush=True)
            continue
        name, xml, key = find_dataset_files(d)
        same = [p for p, q in ((xml, train_xml), (key, train_key)) if p and q and same_content(p, q)]
        if same:
            print(f"warning: test set {name}: {same[0]} has the same content as the training set's "
                  f"{train_xml if same[0] == xml else train_key}: {meaning}", file=sys.stderr, flush=True)


def run_wsd(cfg: WsdConfig, train_dir: str, test_dirs: list[str], out_dir: str | Path,
            context: FeatureContext | None = None, progress: bool | None = None, command: str = "",
            runs_dir: str | Path = "runs/wsd", plot: bool = True) -> dict:
    """Run the whole comparison; write keys/, scores.json, table5.md (and f1_per_layer.png); return scores."""
    t_start = time.perf_counter()
    commit = git_commit()  # the code that runs: taken now, not when the table is written
    context = context or FeatureContext()
    out_dir, runs_dir = Path(out_dir), Path(runs_dir)
    inventory = load_inventory(cfg.wordnet)
    train_ds = load_dataset(train_dir)
    train_ex = to_examples(train_ds, inventory)
    train_unknown = warn_unknown_keys(train_ds, inventory, f"training set {train_ds.name}")
    train_targets = all_targets(train_ex)
    check_training_set(train_targets, f"training set {train_ds.name}", train_dir,
                       head=cfg.head is not None and bool(cfg.features))
    report = Report(_read_tests(test_dirs, inventory), out_dir)
    warn_test_is_train(train_dir, test_dirs)
    if report.keys_dir.exists():  # an earlier run that was interrupted before its table was written
        shutil.rmtree(report.keys_dir)
    print(f"train {train_ds.name}: {len(train_ex)} sentences, {len(train_targets)} instances; test: "
          + ", ".join(f"{ts.name} ({len(ts.targets)})" for ts in report.tests), flush=True)

    report.add("wn_first_sense", "WordNet first sense",
               {ts.name: first_sense_answers(ts.targets) for ts in report.tests}, "baseline")
    mfs = MostFrequentSense(train_targets)
    mfs_answers = {ts.name: mfs.answers(ts.targets) for ts in report.tests}
    report.add("mfs", f"{train_ds.name} most frequent sense", {k: a for k, (a, _) in mfs_answers.items()},
               "baseline", backoff=sum(b for _, b in mfs_answers.values()))
    graph = load_graph(cfg.wordnet) if any(r in cfg.knn for r in SENSE_ROWS) else None  # WordNet's data files
    if cfg.features and (graph is not None or "dev_layer" in cfg.knn):  # (rows of a source choose on them)
        check_hold_out(train_ex, cfg.head_dev_every, cfg.dev_split)  # (before any source embeds the training set)
    for name in cfg.features:
        _source_rows(report, cfg, name, train_dir, train_ex, context, progress, runs_dir, command, graph)
    warn_rows_of_no_source(report.layers, cfg.knn)

    summary = {"name": cfg.name, "command": command, "cwd": os.getcwd(), "version": package_version(),
               "git_commit": commit, "machine": machine(),
               "train": {"folder": str(train_dir), "name": train_ds.name, "sentences": len(train_ex),
                         "instances": len(train_targets)},
               "tests": [{"name": ts.name, "folder": ts.folder, "instances": len(ts.targets),
                          "gold_keys_not_in_wordnet": len(ts.unknown_keys), "first_not_in_wordnet": ts.unknown_keys[:3],
                          "instances_without_candidates": ts.no_candidates}
                         for ts in report.tests],
               "train_gold_keys_not_in_wordnet": {"count": len(train_unknown), "first": train_unknown[:3]},
               "wordnet": inventory.source, "config": cfg.to_dict(), "identity": wsd_identity(cfg, train_dir, test_dirs),
               "rows": report.rows,
               "seconds": round(time.perf_counter() - t_start, 1)}
    replace_folder(report.keys_dir, out_dir / "keys")  # never the key files of two tables mixed
    save_json(summary, out_dir / "scores.json")
    write_table(summary, out_dir / "table5.md")
    if plot:
        plot_f1_per_layer(summary, out_dir / "f1_per_layer.png")
    return summary

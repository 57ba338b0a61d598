"""``elmo-tasks compare``: one task over several feature sources x seeds -> results/<task>/summary.{md,csv,json}.

Every (source, seed) is an ordinary run (its own run folder). The summary gives mean +- sample std over
seeds of the test and dev metrics per source, the learned mix weights (softmax) and gamma, static-vector
OOV rates, per-run wall times, the exact command, git commit and machine. The summary is rewritten after
every run, so an interrupted comparison keeps what it measured.

The runs of one comparison live in ``RUNS_DIR/NAME/compare-STAMP/<source>-seed<seed>[/fold<k>]``. With
``resume=`` that folder, the runs that finished there (metrics.json, written last) with the same config are
reused and only the others run; a finished run with another config is an error. Ctrl-C / SIGTERM raise
``ComparisonInterrupted`` (a KeyboardInterrupt) saying how many runs finished and where.
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path


from elmo_features.util.errors import CheckpointError, ConfigError, ElmoTasksError
from elmo_features.util.provenance import git_commit, machine, package_version, timestamp
from elmo_features.util.threads import cpu_cores, threads_per_job

from elmo_tasks.experiment.records import read_metrics
from elmo_tasks.experiment.config import RunConfig, load_raw
from elmo_tasks.experiment.crossval import fold_indices, fold_split, pooled_splits
from elmo_tasks.experiment.run import read_examples, run_experiment
from elmo_tasks.experiment.data_record import check_data_unchanged
from elmo_tasks.experiment.compare_checks import (check_comparison_args, check_distinct_inputs, check_results_replaceable,
                                             claim_results, comparison_identity)
from elmo_tasks.features.base import FeatureContext, section_fingerprints
from elmo_tasks.features.fingerprints import report_fingerprints
from elmo_tasks.experiment.parallel import precompute_sections, prepare_features, run_jobs, run_on_ranks, shared_value, torchrun_ranks
from elmo_tasks.experiment.plots import pyplot
from elmo_tasks.experiment.summary import FROZEN_KINDS, find_in_report, summarize, write_summary
from elmo_tasks.plugins import changed_plugin, plugin_digests
from elmo_tasks.registry import HEADS


class ComparisonInterrupted(KeyboardInterrupt):
    """A comparison stopped by Ctrl-C / SIGTERM: ``finished`` of ``total`` runs done in ``grid_dir``;
    ``summary`` is the summary.md written for them (None when no run finished)."""

    def __init__(self, grid_dir: Path, finished: int, total: int, summary: Path | None):
        super().__init__(f"{finished} of {total} runs finished in {grid_dir}")
        self.grid_dir, self.finished, self.total, self.summary = grid_dir, finished, total, summary


def run_comparison(cfg: RunConfig, results_dir: str | Path, runs_dir: str | Path = "runs",
                   context: FeatureContext | None = None, progress: bool | None = None,
                   sources: list[str] | None = None, seeds: list[int] | None = None, command: str = "",
                   folds: int | None = None, jobs: int = 1, threads: int | None = None,
                   resume: str | Path | None = None) -> dict:
    """Run every (source, seed[, fold]) of ``cfg.compare`` and write the summary; returns the summary dict.
    ``folds`` (default ``cfg.compare.folds``): K-fold cross-validation over all labelled sentences.
    ``jobs`` > 1: the runs go to a local process pool (``elmo_tasks.experiment.parallel``) with ``threads`` torch threads per
    job (default: cores // jobs); the summary is the same as a serial run's. ``resume``: the compare-STAMP
    folder of an interrupted comparison (its finished runs are reused). Ctrl-C: ``ComparisonInterrupted``.
    The arguments and ``results_dir`` are checked first, as ``elmo-tasks compare`` does (``compare_checks``)."""
    t0 = time.perf_counter()
    results_dir = Path(results_dir)
    check_comparison_args(cfg, sources, seeds, folds, jobs, threads, resume)
    lock = claim_results(results_dir, cfg.name)
    try:
        return _run_comparison(cfg, results_dir, runs_dir, context or FeatureContext(), progress, sources, seeds,
                               command, folds, jobs, threads, resume, t0)
    finally:
        if lock is not None:
            lock.release()


def _run_comparison(cfg: RunConfig, results_dir: Path, runs_dir: str | Path, context: FeatureContext,
                    progress: bool | None, sources: list[str] | None, seeds: list[int] | None, command: str,
                    folds: int | None, jobs: int, threads: int | None, resume: str | Path | None, t0: float) -> dict:
    """``run_comparison`` once its checks passed and the results folder is this process's."""
    plan = plan_comparison(cfg, sources, seeds, folds, command)
    cells = plan.cells
    names = list(dict.fromkeys(cell[0] for cell in cells))
    for name in names:  # every frozen input loads (and is checked) before the first run trains: loaded once, kept
        section_fingerprints(cfg.compare.sources[name], context.memo)
    check_distinct_inputs(cfg, names, context.memo)
    reused = {} if resume is None else reused_runs(cfg, cells, cell_dirs(Path(resume), cells), plan.pool,
                                                   plan.fold_sets, context)
    check_results_replaceable(results_dir, plan.identity)  # (after the --resume checks: they name the run folder)
    grid_dir = Path(resume) if resume is not None else new_grid_dir(Path(runs_dir) / cfg.name)
    dirs = cell_dirs(grid_dir, cells)
    finished = resume is not None and any(grid_dir.rglob("metrics.json"))  # (no finished run: nothing can mix)
    check_data_unchanged(cfg, grid_dir, plan.folds, resume is not None, finished)  # --resume: the same data
    if resume is not None and not reused:
        print(f"resuming {resume}: no run in it has finished yet; running the whole comparison in it", file=sys.stderr)
    table = SummaryTable(cfg, plan.info, results_dir, t0)
    for i, record in reused.items():
        print(f"== {cfg.name}: {_cell_label(cells[i], plan.folds)}: reusing the finished run {dirs[i]}", flush=True)
        table.done(i, record)
    todo = [i for i in range(len(cells)) if i not in reused]
    try:
        pyplot()  # the summary's heavy plotting import first: a stop landing inside it can break it for good
        _execute(cfg, plan, todo, dirs, context, progress, command, jobs, threads, table.done)
        if table.summary:  # (under torchrun only rank 0 has it)
            write_summary(table.summary, results_dir)
    except KeyboardInterrupt:  # (the pool's workers are terminated by now; finished runs are in the summary)
        raise ComparisonInterrupted(grid_dir, len(table.runs), len(cells),
                                    results_dir / "summary.md" if table.runs else None) from None
    return table.summary


@dataclass
class ComparisonPlan:
    """What a comparison runs: its (source, seed, fold) cells, the pooled examples and folds, the summary header."""

    cells: list[tuple]
    folds: int
    pool: list
    fold_sets: list | None
    info: dict
    identity: dict


def plan_comparison(cfg: RunConfig, sources: list[str] | None, seeds: list[int] | None, folds: int | None,
                    command: str) -> ComparisonPlan:
    """The cells of the grid (``--sources``/``--seeds``/``--folds`` override the config) and the summary header;
    with folds, the labelled sentences of every split pooled once."""
    names = sources or list(cfg.compare.sources)
    seeds_of = {n: list(seeds) if seeds else cfg.compare.seeds_of(n) for n in names}
    identity = comparison_identity(cfg, sources, seeds, folds)
    info = {"name": cfg.name, "command": command, "cwd": os.getcwd(), "version": package_version(),
            "git_commit": git_commit(), "machine": machine(),
            "seeds": sorted({s for ss in seeds_of.values() for s in ss}), **identity}
    own = {n: ss for n, ss in seeds_of.items() if ss != info["seeds"]}
    if own:
        info["seeds_by_source"] = own
    folds = cfg.compare.folds if folds is None else folds
    pool: list = []
    if folds:
        pool = pooled_examples(cfg)
        if folds > len(pool):
            raise ConfigError(f"--folds {folds}: more folds than labelled sentences ({len(pool)} in train + dev + "
                              "test); give at most that many")
        info.update(folds=folds, fold_seed=cfg.compare.fold_seed, pool_size=len(pool))
    cells = [(n, s, f) for n in names for s in seeds_of[n] for f in (range(folds) if folds else [None])]
    fold_sets = fold_indices(len(pool), folds, cfg.compare.fold_seed) if folds else None
    return ComparisonPlan(cells, folds, pool, fold_sets, info, identity)


class SummaryTable:
    """The finished runs of a comparison; the summary is rewritten, in grid order, after every finished run (kept
    up to date if the comparison is interrupted)."""

    def __init__(self, cfg: RunConfig, info: dict, results_dir: Path, t0: float):
        self.cfg, self.info, self.results_dir, self.t0 = cfg, info, results_dir, t0
        self.runs: dict[int, dict] = {}
        self.summary: dict = {}

    def done(self, i: int, record: dict) -> None:
        self.runs[i] = record
        self.info.update(wall_seconds=round(time.perf_counter() - self.t0, 1), finished=timestamp())
        self.summary = summarize(self.cfg, [self.runs[j] for j in sorted(self.runs)], self.info)
        write_summary(self.summary, self.results_dir, plots=False)


def _execute(cfg: RunConfig, plan: ComparisonPlan, todo: list[int], dirs: list[Path], context: FeatureContext,
             progress: bool | None, command: str, jobs: int, threads: int | None, done) -> None:
    """Run the cells ``todo``: on a process pool or torchrun ranks, else one after the other."""
    if todo and (jobs > 1 or torchrun_ranks() > 1):
        context = replace(context, progress=False)  # no interleaved bars from the workers
        _run_parallel(cfg, [plan.cells[i] for i in todo], [dirs[i] for i in todo], context, command, plan.folds,
                      plan.pool, jobs, threads, plan.info, lambda j, record: done(todo[j], record))
        return
    for i in todo:
        name, seed, k = plan.cells[i]
        print(f"== {cfg.name}: {_cell_label(plan.cells[i], plan.folds)}", flush=True)
        done(i, run_one(cfg, name, seed, k, dirs[i], context, progress, command, plan.pool, plan.fold_sets))


def cell_dirs(grid_dir: Path, cells: list[tuple]) -> list[Path]:
    """The run folder of each (source, seed, fold) cell: GRID/SOURCE-seedN[/foldK]."""
    return [grid_dir / f"{n}-seed{s}" / (f"fold{k}" if k is not None else "") for n, s, k in cells]


def reused_runs(cfg: RunConfig, cells: list[tuple], dirs: list[Path], pool: list, fold_sets: list | None,
                context: FeatureContext) -> dict[int, dict]:
    """cell index -> record of the runs of an interrupted comparison that finished with this config and model."""
    now_fps: dict[str, list[str]] = {}  # the biLM fingerprints each source would use now

    def fps(n: str) -> list[str]:
        return now_fps.setdefault(n, section_fingerprints(cfg.compare.sources[n], context.memo))

    return {i: rec for i, (n, s, k) in enumerate(cells)
            if (rec := finished_record(cfg, n, s, k, dirs[i], pool, fold_sets, fps)) is not None}


def new_grid_dir(parent: Path) -> Path:
    """A new, empty RUNS_DIR/NAME/compare-STAMP[-N] folder, made by rank 0 (its name is shared with the other
    ranks): two comparisons started in the same second get one each."""
    name = None
    if int(os.environ.get("RANK", "0") or 0) == 0:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        parent.mkdir(parents=True, exist_ok=True)
        for n in range(1, 10000):
            name = f"compare-{stamp}" + (f"-{n}" if n > 1 else "")
            try:
                (parent / name).mkdir()
                break
            except FileExistsError:
                continue
    return parent / shared_value(name)


def _cell_label(cell: tuple, folds: int | None) -> str:
    name, seed, k = cell
    return f"source {name}, seed {seed}" + (f", fold {k + 1}/{folds}" if k is not None else "")


def run_one(cfg: RunConfig, name: str, seed: int, k: int | None, run_dir: Path, context: FeatureContext | None,
            progress: bool | None, command: str, pool: list | None = None, fold_sets: list | None = None) -> dict:
    """One run of the grid (fold ``k`` of ``pool`` split by ``fold_sets``, or the config's files); its record."""
    run_cfg = cfg.with_features(cfg.compare.sources[name], seed)
    if k is None:
        m = run_experiment(run_cfg, run_dir, context, progress, command=command)
    else:
        examples, _ = fold_split(pool, fold_sets, k)
        m = run_experiment(run_cfg, run_dir, context, progress, command=command, examples=examples)
    return run_record(name, seed, k, run_dir, m, pool, fold_sets)


def finished_record(cfg: RunConfig, name: str, seed: int, k: int | None, run_dir: Path, pool: list | None,
                    fold_sets: list | None, fingerprints_now) -> dict | None:
    """The record of a run that finished in ``run_dir`` (metrics.json is written last) with the config this
    cell would run, else None (not started or interrupted: it runs again). Another config, or another biLM
    behind the same config (``fingerprints_now(name)``, e.g. a new ``default``), or another version of a plugin
    module's code (its recorded ``plugin_modules`` digests; none recorded: no plugins): ConfigError."""
    metrics_path = run_dir / "metrics.json"
    if not metrics_path.is_file():
        return None
    expected = json.loads(json.dumps(cfg.with_features(cfg.compare.sources[name], seed).to_dict()))
    try:
        saved = load_raw(run_dir / "config.yaml")
        m = read_metrics(metrics_path, fix="", finished=True, needs_test=cfg.data.test is not None or k is not None)
    except (ElmoTasksError, OSError, ValueError) as e:
        raise CheckpointError(f"{run_dir}: a finished run of the comparison is damaged ({' '.join(str(e).split())}"
                              f"); delete that folder to run it again") from None
    if saved != expected:
        keys = sorted(key for key in set(saved) | set(expected) if saved.get(key) != expected.get(key))
        raise ConfigError(f"{run_dir}: finished with another config ({', '.join(keys)} differ) than this command "
                          "gives; resume with the command that started the comparison, or drop --resume")
    saved_fps, now = report_fingerprints(m.get("features") or {}), fingerprints_now(name)
    if saved_fps != now:
        short = lambda fps: ", ".join(f[:12] for f in fps) or "none recorded"
        raise ConfigError(f"{run_dir}: finished with another frozen model (fingerprint {short(saved_fps)}; this "
                          f"source now loads {short(now)}); its results would mix two models: drop --resume to run "
                          "the comparison again")
    changed = changed_plugin(m.get("plugin_modules"), plugin_digests(expected))  # the plugin code is the model too
    if changed:
        grid = run_dir.parent if k is None else run_dir.parent.parent
        raise ConfigError(f"--resume {grid}: run {run_dir.relative_to(grid)} was made with {changed}; its results "
                          "would mix two models: start a new comparison (drop --resume)")
    return run_record(name, seed, k, run_dir, m, pool, fold_sets)


def run_record(name: str, seed: int, k: int | None, run_dir: Path, m: dict, pool: list | None,
               fold_sets: list | None) -> dict:
    """The summary's record of one finished run from its metrics (``run_experiment``'s result, metrics.json)."""
    extra: dict = {}
    if k is not None:
        examples, _ = fold_split(pool, fold_sets, k)
        extra = {"fold": k, "test_correct": _correct_string(run_dir, examples["test"])}
    feats = m["features"]
    return {"source": name, "seed": seed, **extra, "run_dir": str(run_dir), "dev": m.get("dev"),
            "test": m.get("test"), "test_unseen_labels": m.get("test_unseen_labels"),
            "primary_metric": m["primary_metric"], "best_epoch": m["best_epoch"],
            "epochs_run": m["epochs_run"], "seconds": m["seconds"],
            "mix_weights": find_in_report(feats, "mix_weights"), "gamma": find_in_report(feats, "gamma"),
            "oov_rate": find_in_report(feats, "oov_rate"),
            **{f"{kind}_fingerprint": find_in_report(feats, f"{kind}_fingerprint") for kind, _ in FROZEN_KINDS}}


def pooled_examples(cfg: RunConfig) -> list:
    """Every labelled example of the config's train, dev and test files, in file order (a file named by two
    splits once)."""
    head_cls = HEADS.get(cfg.head["name"])
    pool: list = []
    for split in pooled_splits(cfg.data):
        pool += read_examples(cfg, split, head_cls)[0]
    return pool


def _correct_string(run_dir: Path, examples: list) -> str | None:
    """'0'/'1' per test example (prediction == gold label), or None for heads without one label per example."""
    if not examples or not hasattr(examples[0], "label"):
        return None
    preds = json.loads((run_dir / "predictions.json").read_text(encoding="utf-8"))["test"]
    return "".join("1" if p == ex.label else "0" for p, ex in zip(preds, examples))


# ---------------------------------------------------------------- --jobs N: the grid on a process pool

def _feature_lists(cfg: RunConfig, folds: int | None, pool: list) -> list[tuple[str, list[list[str]]]]:
    """The sentence lists whose frozen features are computed before the pool: the data files' splits, or
    fold 0's splits (a serial run embeds exactly these; every other fold reuses their sentences)."""
    if folds:
        examples, _ = fold_split(pool, fold_indices(len(pool), folds, cfg.compare.fold_seed), 0)
    else:
        head_cls = HEADS.get(cfg.head["name"])
        examples = {split: read_examples(cfg, split, head_cls)[0] for split in ("train", "dev", "test")
                    if getattr(cfg.data, split) is not None}
    return [(split, [list(ex.tokens) for ex in exs]) for split, exs in examples.items()]


def _job(cfg: RunConfig, name: str, seed: int, k: int | None, run_dir: Path, context: FeatureContext,
         command: str, folds: int | None) -> dict:
    """One run in a pool worker (no progress bars); a fold run first loads the embedded sentences (from
    the cache the parent filled), as a serial run has them in memory from fold 0."""
    pool, fold_sets = None, None
    if k is not None:
        pool = pooled_examples(cfg)
        fold_sets = fold_indices(len(pool), folds, cfg.compare.fold_seed)
        precompute_sections([cfg.compare.sources[name]], _feature_lists(cfg, folds, pool), context)
    return run_one(cfg, name, seed, k, run_dir, context, False, command, pool, fold_sets)


def _run_parallel(cfg: RunConfig, cells: list[tuple], dirs: list[Path], context: FeatureContext, command: str,
                  folds: int | None, pool: list, jobs: int, threads: int | None, info: dict, done) -> None:
    names = list(dict.fromkeys(c[0] for c in cells))
    label = lambda i: f"{cfg.name}: run {_cell_label(cells[i], folds)}"
    job_args = [(cfg, n, s, k, d, context, command, folds) for (n, s, k), d in zip(cells, dirs)]
    if torchrun_ranks() > 1:  # the runs spread over the ranks, each rank one run at a time
        info.update(ranks=torchrun_ranks())
        sections = [cfg.compare.sources[n] for n in names]
        run_on_ranks(_job, job_args, label, done,
                     prepare=lambda: precompute_sections(sections, _feature_lists(cfg, folds, pool), context))
        return
    jobs = min(jobs, len(cells))  # (no more processes than runs: the cores go to the runs there are)
    threads = threads or threads_per_job(jobs)
    info.update(jobs=jobs, threads_per_job=threads)
    print(f"== {cfg.name}: computing the frozen features of {len(names)} source(s) once", flush=True)
    prepare_features([cfg.compare.sources[n] for n in names], _feature_lists(cfg, folds, pool), context,
                     threads=min(threads * jobs, cpu_cores()))
    print(f"== {cfg.name}: {len(cells)} runs on {jobs} processes x {threads} torch thread(s)", flush=True)
    finished = [0]

    def on_done(i: int, record: dict) -> None:
        finished[0] += 1
        print(f"== {cfg.name}: {_cell_label(cells[i], folds)} done ({finished[0]}/{len(cells)})", flush=True)
        done(i, record)

    run_jobs(_job, job_args, jobs, threads, label=label, on_done=on_done)

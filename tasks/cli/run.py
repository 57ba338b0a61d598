"""``elmo-tasks run | compare | predict``: train one head, compare feature sources, predict with a run."""
from __future__ import annotations

import argparse
import os
import sys
from contextlib import nullcontext
from pathlib import Path


from elmo_features.util.cli_types import (DEFAULT_CACHE, DefaultValue, add_cache_dir_argument, add_progress_argument,
                                          add_threads_argument, cache_dir_flag, cache_dir_of, given, positive_int,
                                          progress_setting, rebuild_command, warn_unrepeatable)
from elmo_features.util.devices import add_device_argument, parse_device
from elmo_features.util.distributed import check_same_config, finish
from elmo_features.util.locking import OutputLock, lock_output_file
from elmo_features.embedding.embed_input import read_sentence_lines
from elmo_features.util.errors import (CheckpointError, ConfigError, ElmoTasksError, PathError, TextInputError,
                                       UsageError)
from elmo_features.util.paths import (check_flags_given, check_input_file, check_no_overwrite, check_not_an_input,
                                      check_text_output)
from elmo_features.util.provenance import write_text_atomic
from elmo_features.util.schema import saved_config
from elmo_features.util.text_input import read_sentences
from elmo_features.util.threads import set_threads
from elmo_features.util.wording import mapping_text

from elmo_tasks.experiment.config import check_seeds, load_config, load_raw
from elmo_tasks.experiment.data_parallel import join
from elmo_tasks.features.base import FeatureContext
from elmo_tasks.metrics import scores_text
from elmo_tasks.plugins import add_include_argument
from elmo_tasks.experiment.records import read_metrics
from elmo_tasks.experiment.preflight import (check_given_once, check_output_dirs, check_run_folder, check_run_inputs,
                                       claim_results_folder, feature_input_paths, relative_paths)



def _cache_dir(args) -> str | None:
    return cache_dir_of(args)


def _common(p: argparse.ArgumentParser) -> None:
    add_include_argument(p)
    add_cache_dir_argument(p)
    add_threads_argument(p, default="1, since the heads are small and more threads than free cores slow training "
                            "down many times over when other jobs share the machine; with compare --jobs N: "
                            "cores // N per job")
    add_progress_argument(p)
    add_device_argument(p)


CONFIG_HELP = ("a packaged config's name (elmo-tasks configs list shows them, e.g. tiny_ner_conll2003) or the path of a "
               "YAML config")
SET_HELP = "override a config value (YAML syntax), e.g. --set training.seed=2; may be repeated"


def register(subparsers) -> None:
    """Add the run, compare and predict sub-commands."""
    p = subparsers.add_parser("run", help="train and evaluate one head on one feature source",
                              description="Train one task head on one feature source of a config and evaluate it on "
                                          "the dev and test sets; the run folder keeps the model, its config, the "
                                          "metrics and the predictions (predict reuses it).")
    p.add_argument("config", help=CONFIG_HELP)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.SUB=VALUE", help=SET_HELP)
    p.add_argument("--out", help="run folder (default: runs/NAME/TIMESTAMP-HASH)")
    p.add_argument("--runs-dir", default=DefaultValue("runs"), help="parent of default run folders")
    _common(p)
    p.set_defaults(func=cmd_run)

    p = subparsers.add_parser("compare", help="run one task over the config's feature-source variants and seeds",
                              description="Train and evaluate one task head on each feature source of a config's "
                                          "compare section, over several seeds (or K folds), and write a summary "
                                          "table (mean and spread per source) with plots to the results folder.")
    p.add_argument("config", help=CONFIG_HELP + " with a compare section")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.SUB=VALUE", help=SET_HELP)
    p.add_argument("--sources", help="comma-separated subset of compare.sources (default: all)")
    p.add_argument("--seeds", help="comma-separated seeds (default: compare.seeds)")
    p.add_argument("--folds", type=int, help="K-fold cross-validation over all labelled sentences (default: "
                   "compare.folds; paired tests between sources in the summary); 0: the fixed split")
    p.add_argument("--results-dir", help="where summary.md/.csv/.json and plots go (default: results/NAME)")
    p.add_argument("--runs-dir", default=DefaultValue("runs"), help="parent of the per-run folders")
    p.add_argument("--resume", metavar="COMPARE_DIR",
                   help="continue an interrupted comparison in its runs folder (RUNS_DIR/NAME/compare-STAMP, printed "
                        "on Ctrl-C): its finished runs are reused, the others run")
    p.add_argument("--jobs", type=positive_int, default=1,
                   help="run the grid on N local processes (features computed once first, into --cache-dir); "
                        "torch threads per job: --threads, else cores // N. The summary equals a serial run's")
    _common(p)
    p.set_defaults(func=cmd_compare)

    p = subparsers.add_parser("predict", help="predict with a trained run folder",
                              description="Predict labels for new sentences with the model of a finished run "
                                          "folder (made by run or compare), or score a labelled file with --reader.")
    p.add_argument("run_dir", help="a finished run folder (RUNS_DIR/NAME/TIMESTAMP-HASH, printed by run)")
    p.add_argument("input", help="one whitespace-tokenized sentence per line (or --reader: the run's data format)")
    p.add_argument("--out", help="output file (default: stdout); an existing file is replaced only with --force")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    p.add_argument("--reader", action="store_true",
                   help="read INPUT with the run's data reader and options, and also print metrics")
    _common(p)
    p.set_defaults(func=cmd_predict)


def _setup(args) -> tuple[FeatureContext, bool | None]:
    device = parse_device(args.device)
    set_threads(args.threads, default=1)
    progress = progress_setting(args.progress)
    cache = cache_dir_of(args)
    return FeatureContext(cache_dir=cache, progress=progress, device=str(device)), progress


DEFAULTS = {"runs_dir": "runs", "cache_dir": DEFAULT_CACHE, "progress": "auto", "threads": 1, "jobs": 1,
            "device": "cpu"}


def command_line(args) -> str:
    """The command as typed (rebuilt from the parsed args, so it is right however main() was called)."""
    return rebuild_command(["elmo-tasks", args.command, args.config], args, DEFAULTS, skip=("command", "config"),
                           repeated={"overrides": "--set", "include": "--include"})


def cmd_run(args) -> int:
    from elmo_tasks.experiment.run import run_experiment
    from elmo_tasks.experiment.parallel import torchrun_ranks

    check_flags_given(args, "out", "runs_dir")
    warn_unrepeatable(args.config)
    if args.out and given(args.runs_dir):
        raise UsageError(f"--runs-dir {args.runs_dir}: does not apply with --out {args.out} (the run goes there); "
                         "give one of the two")
    dist = None
    if torchrun_ranks() > 1:  # data-parallel: a slice of every batch per rank; rank 0 writes the run folder
        dist = join()
    ok = False
    try:
        cfg = load_config(args.config, args.overrides)
        if dist is not None:  # every rank trains the same run (a rank given other settings would train another)
            check_same_config(cfg.to_dict(), out=args.out)
        check_run_inputs(cfg, args.config)
        check_output_dirs(cache_dir=_cache_dir(args), flags={"cache_dir": cache_dir_flag(args)})
        context, progress = _setup(args)  # (before the default run folder is made: a bad --device makes none)
        out = run_folder(args, cfg) if dist is None else dist.from_main(lambda: run_folder(args, cfg))  # (a str:
        # Path would make `./-` the refused '-')
        if dist is not None and not dist.is_main:
            context.progress, progress = False, False
        args.interrupt_hint = (f"the run folder {out} is incomplete (no metrics.json; runs do not resume); "
                               f"to train it again: {command_line(args)}")
        metrics = run_experiment(cfg, out, context, progress, command=command_line(args), dist=dist)
        ok = True
    finally:
        if dist is not None:
            finish(sync=ok)
    if dist is not None and not dist.is_main:
        return 0
    print(f"run folder: {out}")
    for split in ("dev", "test"):
        if split in metrics:
            print(f"{split}: {scores_text(metrics[split])}")
    print(f"wall time: {metrics['seconds']['total']:.1f}s (features {metrics['seconds']['features']:.1f}s, "
          f"training {metrics['seconds']['train']:.1f}s)")
    return 0


def run_folder(args, cfg) -> str:
    """``run``'s folder: ``--out`` (empty, new, or an unfinished run's folder, which the run clears, saying so), else
    a new RUNS_DIR/NAME/TIMESTAMP-HASH[-N] made now (rank 0's under torchrun: its time stamp)."""
    from elmo_tasks.experiment.preflight import is_unfinished_run, new_run_dir

    if not args.out:
        check_output_dirs(runs_dir=args.runs_dir)
        return str(new_run_dir(cfg, args.runs_dir))
    out = Path(args.out)
    check_output_dirs(out=args.out)  # (as typed: `./-` is a folder named '-', though Path makes it '-')
    if out.is_dir() and any(out.iterdir()):
        if (out / "run.lock").exists():  # a writer at work there gets its own error (LockError)
            with OutputLock(out / "run.lock", f"the run folder {out}"):
                pass
        if not is_unfinished_run(out):  # (a killed or interrupted run's folder: its printed command trains again)
            raise PathError(f"--out {out}: the folder is not empty (a run folder holds one run, and its files "
                            "would mix with this one's); choose a new folder or remove it")
    return os.path.join(".", "-") if str(out) == "-" else str(out)


def _inside(folder: str, parent: str) -> bool:
    """Whether ``folder`` is ``parent`` or below it (by real paths)."""
    f, p = os.path.realpath(folder), os.path.realpath(parent)
    return f == p or f.startswith(p.rstrip(os.sep) + os.sep)


def cmd_compare(args) -> int:
    from elmo_tasks.experiment.compare import ComparisonInterrupted, run_comparison
    from elmo_tasks.experiment.compare_checks import check_comparison_args
    from elmo_tasks.experiment.summary import result_table

    check_flags_given(args, "results_dir", "runs_dir", "resume")
    warn_unrepeatable(args.config)
    with saved_config() if args.resume else nullcontext():  # its finished runs may predate a rule: warned about
        cfg = load_config(args.config, args.overrides)
    if cfg.compare is None:
        raise ConfigError(f"{args.config}: no 'compare' section (name the feature-source variants to compare)")
    if args.sources is not None and not [s for s in args.sources.split(",") if s.strip()]:
        raise ConfigError(f"--sources: empty; name at least one of: {', '.join(cfg.compare.sources)}")
    if args.seeds is not None and not args.seeds.strip():
        raise ConfigError("--seeds: empty; give comma-separated integers, e.g. --seeds 1,2,3")
    sources = [s.strip() for s in args.sources.split(",") if s.strip()] if args.sources else None
    check_given_once(sources or [], "--sources", "the source")
    unknown = sorted(set(sources or []) - set(cfg.compare.sources))
    if unknown:
        raise ConfigError(f"--sources: unknown variant(s) {', '.join(unknown)}; valid: "
                          f"{', '.join(cfg.compare.sources)}")
    try:
        seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else None
    except ValueError:
        raise ConfigError(f"--seeds: expected comma-separated integers, got {args.seeds!r}") from None
    if seeds is not None:
        check_seeds(seeds, "--seeds")
    if args.folds is not None and args.folds != 0 and args.folds < 3:
        raise ConfigError(f"--folds: give 3 or more folds (one tests, one stops early), or 0 for the fixed "
                          f"split, got {args.folds}")
    results_dir = Path(args.results_dir) if args.results_dir else Path("results") / cfg.name
    check_run_inputs(cfg, args.config, features={f"compare.sources.{k}": v for k, v in cfg.compare.sources.items()
                                                 if sources is None or k in sources})
    check_output_dirs(results_dir=results_dir, runs_dir=args.runs_dir, cache_dir=_cache_dir(args),
                      flags={"cache_dir": cache_dir_flag(args)})
    from elmo_tasks.experiment.parallel import torchrun_ranks

    if (args.jobs > 1 or torchrun_ranks() > 1) and _cache_dir(args) is None:
        raise UsageError("--jobs / torchrun: parallel runs read the frozen features from the on-disk cache (computed once, "
                         "before the runs start); give --cache-dir DIR instead of 'none', or --jobs 1")
    check_comparison_args(cfg, sources, seeds, args.folds, args.jobs, args.threads, args.resume, flag="--")
    _same_comparison_on_ranks(cfg, results_dir, sources, seeds, args)
    if args.resume and given(args.runs_dir) and not _inside(args.resume, args.runs_dir):
        raise UsageError(f"--runs-dir {args.runs_dir}: --resume continues in {args.resume}, where its runs are; drop "
                         "--runs-dir (or give the folder that holds it)")
    # one writer per results folder (rank 0 under torchrun writes it): a second comparison is refused
    lock = claim_results_folder(results_dir, "summary.json", cfg.name, "--results-dir") if _rank() == 0 else None
    context, progress = _setup(args)
    try:
        summary = run_comparison(cfg, results_dir, args.runs_dir, context, progress, sources=sources, seeds=seeds,
                                 command=command_line(args), folds=args.folds, jobs=args.jobs, threads=args.threads,
                                 resume=args.resume)
    except ComparisonInterrupted as e:
        args.interrupt_hint = interrupted_compare_hint(args, e)
        raise
    finally:
        if lock is not None:
            lock.release()
    if summary:  # under torchrun: rank 0
        print(result_table(summary))
        print(f"wrote {results_dir / 'summary.md'} ({summary['wall_seconds']:.0f}s)")
    return 0


def _same_comparison_on_ranks(cfg, results_dir: Path, sources, seeds, args) -> None:
    """Under torchrun: join the group, and refuse ranks given another comparison (``check_same_config``): every rank
    runs its share of the same comparison."""
    from elmo_features.util import distributed
    from elmo_tasks.experiment.parallel import torchrun_ranks

    if torchrun_ranks() <= 1:
        return
    distributed.init()
    check_same_config(cfg.to_dict(), results_dir=results_dir.resolve(), sources=sources, seeds=seeds,
                      folds=args.folds, resume=args.resume)


def _rank() -> int:
    """This process's torchrun rank (0 when not launched by torchrun)."""
    return int(os.environ.get("RANK", "0") or 0)


def interrupted_compare_hint(args, e) -> str:
    """What finished, where the summary is, and the full command that continues the comparison (``e``: a
    ``elmo_tasks.experiment.compare.ComparisonInterrupted``)."""
    saved = f"summary of the finished runs: {e.summary}" if e.summary else "no run finished, no summary written"
    args.resume = str(e.grid_dir)
    return (f"{e.finished} of {e.total} runs finished ({saved}); to continue (the finished runs are reused): "
            f"{command_line(args)}")


def predict_command(args) -> str:
    """The ``predict`` command as typed (for the interrupt message)."""
    return rebuild_command(["elmo-tasks", "predict", args.run_dir, args.input], args, DEFAULTS,
                           skip=("command", "run_dir", "input"), repeated={"include": "--include"})


def _run_data_paths(run_dir: Path, saved: dict) -> list[str]:
    """The data files a run read: where they were when it ran and where they are from the run folder (metrics.json
    records both: a relative path in its config.yaml names them from the folder it ran in), and, when that place no
    longer holds them (the project moved) or for runs that recorded neither, the config's own paths as given."""
    data = saved.get("data") if isinstance(saved.get("data"), dict) else {}
    try:
        record = read_metrics(run_dir / "metrics.json")
    except (CheckpointError, OSError):
        record = {}
    stats = record.get("data_files") if isinstance(record.get("data_files"), dict) else record.get("data") or {}
    paths = []
    for k in ("train", "dev", "test"):
        rec = stats.get(k) if isinstance(stats.get(k), dict) else {}
        resolved, from_run = rec.get("resolved"), rec.get("from_run")
        if isinstance(from_run, str):
            paths.append(str(run_dir / from_run))
        if isinstance(resolved, str):
            paths.append(resolved)
        if isinstance(data.get(k), str) and not (isinstance(resolved, str) and Path(resolved).exists()):
            paths.append(data[k])
    return paths


def warn_tabs(path: str, reader: str) -> None:
    """One warning line when a plain-text predict input holds a tab: a data file with labels (TSV), read as text,
    makes its label a word of the sentence."""
    if path == "-":
        return
    with open(path, "rb") as f:
        lineno = next((n for n, line in enumerate(f, 1) if b"\t" in line), None)
    if lineno is not None:
        print(f"warning: {path}:{lineno}: a tab in a plain-text input, read as a space between tokens; a data file of "
              f"the run's format ({reader}, with its labels) is read with --reader", file=sys.stderr)


def cmd_predict(args) -> int:
    check_flags_given(args, "out")
    args.out = None if args.out == "-" else args.out  # ("-": standard output, the default)
    check_run_folder(args.run_dir)
    if args.input == "-" and args.reader:
        raise UsageError("predict input: '-' (standard input) is read as plain text only (one sentence per line); "
                         "with --reader give the data file (or <(...))")
    if args.input != "-":  # standard input: read once into a temporary copy (read_plain_input)
        check_input_file(args.input, "predict input")
    check_output_dirs(cache_dir=_cache_dir(args), flags={"cache_dir": cache_dir_flag(args)})
    saved = load_raw(Path(args.run_dir) / "config.yaml")
    if args.out:  # the run folder, the input and the frozen model / vectors files it names are read, never replaced
        inputs = [p for p in (args.input, args.run_dir) if p != "-"]
        inputs += _run_data_paths(Path(args.run_dir), saved)  # the run's data
        check_not_an_input(args.out, [*inputs, *feature_input_paths(saved.get("features"))], "--out")
    check_text_output(args.out)
    check_no_overwrite(args.out, args.force, f"{predict_command(args)} --force")
    rel = relative_paths(saved.get("features"))
    if rel:  # the run's config names them relative to the folder it ran in; here they resolve against this one
        where = f"the current folder {Path.cwd()}"
        missing = [p for p in rel if not Path(p).expanduser().exists()]
        if missing:
            raise PathError(f"{args.run_dir}/config.yaml names {', '.join(missing)}, relative paths resolved against "
                            f"{where}, where they do not exist; run predict from the folder the run was made in")
        print(f"note: the run's features name relative paths ({', '.join(rel)}), resolved against {where}",
              file=sys.stderr)
    args.interrupt_hint = ((f"{args.out} was not written (it is written at the end; an earlier file there is kept); "
                            if args.out else "") + f"to run again: {predict_command(args)}")
    with lock_output_file(args.out, "--out"):  # one writer per output file
        return _predict(args)




def _predict(args) -> int:
    """``predict``'s work, once its inputs and output are checked (holding the output's lock)."""
    from elmo_tasks.experiment.run import load_run, predict_examples
    from elmo_tasks.data import get_reader

    context, progress = _setup(args)
    try:
        cfg, model = load_run(args.run_dir, context)
    except ElmoTasksError:
        raise
    except (RuntimeError, KeyError, TypeError, ValueError) as e:  # e.g. a model.pt of another run's config
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise CheckpointError(f"{args.run_dir}: cannot rebuild the trained model ({first}); its model.pt, "
                              "vocab.json and config.yaml do not belong together: rerun the run") from e
    if args.reader:
        examples = [ex for ex in get_reader(cfg.data.reader)(args.input, **cfg.data.reader_options) if ex.tokens]
        # as run does for data.test: a set its metrics are undefined on (e.g. NER without entities) is refused
        type(model.head).check_scored_examples(model.head.vocab, examples, f"{args.input} (predict --reader)")
    else:  # the text policy of elmo_features.util.text_input; a blank line is an error (outputs follow input lines)
        try:
            examples = [model.head.blank_example(s) for s in read_sentence_lines(args.input)]
        except NotImplementedError as e:
            raise UsageError(f"{e} (the run's data reader: {cfg.data.reader})") from None
        except TextInputError as e:  # a blank line: a data file in the run's format (CoNLL), given as plain text?
            raise TextInputError(f"{e}; or is it a data file in the run's format ({cfg.data.reader})? give --reader")
        warn_tabs(args.input, cfg.data.reader)
    preds = predict_examples(cfg, model, examples, progress)
    sep = "\n\n" if model.head.block_output else "\n"  # taggers: one token per line, blank line between sentences
    text = sep.join(model.head.format_prediction(e, p) for e, p in zip(examples, preds)) + "\n"
    if args.out:
        write_text_atomic(args.out, text)
        args.interrupt_hint = f"{args.out} was written whole ({len(preds)} predictions) before the stop"
        print(f"wrote {len(preds)} predictions to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if args.reader:
        scores, unseen = model.head.evaluate(examples, preds), model.head.unseen(examples)
        scores["unseen_labels"] = sum(unseen.values())
        if unseen:  # (as run says it for its dev and test sets)
            print(f"warning: {args.input}: {sum(unseen.values())} gold labels never seen in training (counted as "
                  f"errors): {mapping_text(dict(unseen.most_common()), limit=10)}", file=sys.stderr)
        print(f"{args.input}: {scores_text(scores)}", file=sys.stderr)
    return 0

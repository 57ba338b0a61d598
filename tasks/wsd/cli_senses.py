"""``elmo-tasks wsd senses`` (a sense file for every WordNet sense) and ``elmo-tasks wsd raw-eval`` (a sense file
scored on raw text), and what every ``wsd`` action shares: its embedding options, the WordNet paths it reads, the
command as typed. Loaded by ``elmo_tasks.wsd.cli`` only (the layers in pyproject.toml)."""
from __future__ import annotations

import argparse
import contextlib
import os
import textwrap
from pathlib import Path

from elmo_features.util.cli_types import (DEFAULT_CACHE, add_cache_dir_argument, add_progress_argument,
                                          add_threads_argument, cache_dir_flag, cache_dir_of, progress_setting,
                                          progress_shown, rebuild_command, warn_unrepeatable)
from elmo_features.util.devices import add_device_argument, parse_device

from elmo_features.util.errors import OutputExistsError, UsageError
from elmo_features.util.wording import counted, mapping_text

from elmo_tasks.plugins import add_include_argument


def run_options(p) -> None:
    """The options every WSD action that embeds shares: plugins, the feature cache, threads, progress, device."""
    add_include_argument(p)
    add_cache_dir_argument(p)
    add_threads_argument(p)
    add_progress_argument(p)
    add_device_argument(p)


def register_senses(sub) -> None:
    """Add ``wsd senses`` to the ``wsd`` sub-commands ``sub``."""
    s = sub.add_parser("senses", help="save sense vectors for every WordNet sense (with provenance) to an HDF5 file",
                       description="Sense vectors of every WordNet 3.0 sense from one feature source of a config "
                                   "(SemCor centroids, propagation, glosses; settings chosen on held-out SemCor "
                                   "documents, or sentences with --set dev_split=sentences), saved for wsd tag.")
    s.add_argument("--config", default="wsd_senses", help="a packaged config's name (elmo-tasks configs list shows "
                                                           "them) or the path of a YAML config (default: wsd_senses)")
    s.add_argument("--source", required=True, help="the feature source of the config (e.g. minilm)")
    s.add_argument("--train", help="training folder (default: the config's train)")
    s.add_argument("--wordnet", help="WordNet 3.0 dict folder (default: the config's)")
    s.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.SUB=VALUE",
                   help="override a config value (YAML syntax), e.g. --set head_dev_every=10")
    s.add_argument("--out", required=True, help="the HDF5 file to write (e.g. senses.h5); an existing sense file is "
                                                "replaced only with --force")
    s.add_argument("--force", action="store_true", help="replace --out if it holds a sense file (a file of another "
                                                        "kind is never replaced)")
    s.add_argument("--lemmas", metavar="LEMMA,...", action="append",
                   help="only the senses of these lemmas (e.g. bank,plant; given twice, both lists): their SemCor "
                        "instances and glosses, a build of seconds for trying it; without SemCor, from their glosses "
                        "alone")
    run_options(s)
    s.set_defaults(func=cmd_senses)


RAW_EVAL_DESCRIPTION = (
    "Measure a sense file on raw text: every sentence of each test folder (framework format) is joined back into "
    "raw text (punctuation and clitics attached), tagged as wsd tag tags a line (no gold lemma, part of speech or "
    "tokens), and scored on the gold instances whose character span one of the tagger's tokens has exactly "
    "(a multi-word instance, such as take off, when the tagger joined its words into one WordNet unit; otherwise "
    "it counts as unanswered). Beside it, the same sense file with the gold "
    "lemma and part of speech, and WordNet's first sense through both pipelines.",
    "Writes OUT/raw_eval.md (F1 per test set and ALL, their union; coverage, precision, how often the tagger's "
    "part of speech and lemma are the gold ones), OUT/raw_eval.json (every count, the command, commit and machine) "
    "and OUT/keys/MODE/NAME.key.txt (the answers in the framework's format).")


def register_raw_eval(sub) -> None:
    """Add ``wsd raw-eval`` to the ``wsd`` sub-commands ``sub``."""
    r = sub.add_parser("raw-eval", help="score a sense file on the test sets' sentences as raw text (beside the gold "
                                        "lemmas' score)",
                       description="\n\n".join(textwrap.fill(p, 79) for p in RAW_EVAL_DESCRIPTION),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--senses", required=True, help="a sense file written by elmo-tasks wsd senses")
    r.add_argument("--test", nargs="+", help="test folder(s) in the framework format (default: the framework's five "
                                             "test sets under data/wsd/)")
    r.add_argument("--wordnet", help="the WordNet folder (default: the one the sense file names, else "
                                     "data/wordnet-3.0)")
    r.add_argument("--prior", action="store_true",
                   help="add the first-sense prior the sense file chose on held-out SemCor (as wsd tag --prior)")
    r.add_argument("--out", required=True, help="the results folder (raw_eval.md, raw_eval.json, keys/)")
    add_include_argument(r)
    add_threads_argument(r)
    add_progress_argument(r)
    add_device_argument(r)
    r.set_defaults(func=cmd_raw_eval)


def wordnet_inputs(wordnet) -> list:
    """The WordNet paths a command reads: the dict folder (for an index.sense file: it and its folder)."""
    if wordnet is None:
        return []
    p = Path(wordnet).expanduser()
    return [p, p.parent] if p.is_file() else [p]


def command_line(args, *sub: str) -> str:
    """The command as typed (rebuilt from the parsed args, so it is right however main() was called); ``sub``: the
    sub-command (``senses``)."""
    return rebuild_command(["elmo-tasks", "wsd", *sub], args, {"cache_dir": DEFAULT_CACHE, "progress": "auto",
                                                         "device": "cpu"},
                           skip=("command", "wsd_command"),
                           repeated={"overrides": "--set", "include": "--include", "lemmas": "--lemmas"})


def lemmas_of(given: list[str] | None) -> list[str] | None:
    """The lemmas of every ``--lemmas`` given (each a comma-separated list, all joined), None when none is given;
    UsageError for an empty item (``bank,,river``, ``,``), naming the list and the item's position."""
    if not given:
        return None
    lemmas = []
    for value in given:
        items = value.split(",")
        for i, item in enumerate(items, 1):
            if not item.strip():
                raise UsageError(f"--lemmas {value!r}: item {i} of {len(items)} is empty; give lemmas separated by "
                                 "single commas, e.g. --lemmas bank,river")
            lemmas.append(item.strip())
    return lemmas


def cmd_senses(args) -> int:
    from elmo_features.util.paths import (check_flags_given, check_input_dir, check_not_an_input, check_output_file,
                                          check_own_output)
    from elmo_features.util.threads import set_threads

    from elmo_tasks.data.fetch import fetch_hint
    from elmo_tasks.features.base import FeatureContext
    from elmo_features.util.paths import beside_config_hint
    from elmo_tasks.experiment.preflight import check_feature_paths, check_output_dirs, feature_input_paths
    from elmo_tasks.wsd.config import load_wsd_config, warn_senses_inert
    from elmo_tasks.wsd.sense_file import is_sense_file, sense_file_summary

    check_flags_given(args, "out", "train", "wordnet", "config")
    check_flags_given(args, "lemmas", what="list of lemmas")
    lemmas = lemmas_of(args.lemmas)
    if args.config:
        warn_unrepeatable(args.config)  # its command goes into the sense file's meta
    overrides = list(args.overrides) + ([f"wordnet={args.wordnet}"] if args.wordnet else [])
    cfg = load_wsd_config(args.config, overrides, features=[args.source] if args.source else None, train=args.train)
    warn_senses_inert(args.overrides)
    if args.source not in cfg.sources:
        raise UsageError(f"--source {args.source}: not a source of {args.config}; its sources: "
                         f"{', '.join(cfg.sources)}")
    train = cfg.train
    if lemmas and not args.train and not Path(cfg.train).expanduser().is_dir():
        train = None  # a few lemmas without SemCor: from their glosses alone (said when built)
    elif not args.train and not Path(cfg.train).expanduser().exists():
        raise UsageError(f"wsd senses: SemCor ({cfg.train}) not found; get it with `elmo-tasks data get "
                         "wsd-framework` (or give --train FOLDER; --lemmas LEMMA,... builds a few lemmas without it)")
    else:
        check_input_dir(cfg.train, "--train" if args.train else "train (the config's; --train overrides)",
                        hint=fetch_hint(cfg.train) or beside_config_hint(cfg.train, args.config))
    check_feature_paths(cfg.sources[args.source], f"sources.{args.source}", args.config)
    check_output_file(args.out, "--out", "senses.h5")
    check_not_an_input(args.out, [*wordnet_inputs(cfg.wordnet), *([train] if train else []),
                                  *feature_input_paths(cfg.sources[args.source])], "--out")
    check_own_output(args.out, "--out", "a sense file written by elmo-tasks wsd senses", is_sense_file)
    command = command_line(args, "senses")
    if not args.force and Path(args.out).expanduser().is_file():  # (a sense file: check_own_output refuses others)
        raise OutputExistsError(f"--out {args.out} holds a sense file ({sense_file_summary(args.out)}); this build "
                                f"would replace it: give another --out, or replace it with --force: {command} --force")
    set_threads(args.threads)
    cache_dir = cache_dir_of(args)
    check_output_dirs(cache_dir=cache_dir, flags={"cache_dir": cache_dir_flag(args)})
    context = FeatureContext(cache_dir=cache_dir, progress=progress_setting(args.progress),
                             device=str(parse_device(args.device)))
    args.interrupt_hint = f"{args.out} was not written (it is written at the end); to run again: {command}"
    meta = _senses_on_ranks(args, cfg, train, context, command, lemmas)
    if meta is None:  # (a torchrun rank other than 0: rank 0 wrote the file and says so)
        return 0
    print(f"wrote {args.out}: {counted(sum(meta['steps'].values()), 'sense')} (their vectors from: "
          f"{mapping_text(meta['steps'])}), layers {meta['layer_choice']}, glosses pooled by {meta['pooling']}, "
          f"gloss weight w {mapping_text(meta['w']) or 'none'}")
    head = meta.get("pos_head")
    if head:  # (a build without SemCor has none: wsd tag takes the part of speech SemCor tags most often)
        held = head["held_out"]
        print("part-of-speech head: " + (f"{100 * head['accuracy']:.1f}% of {held['tokens']:,} tokens right in "
              f"{held['sentences']:,} sentences of {held['documents']} held-out SemCor documents"
              if head["accuracy"] is not None else "no held-out SemCor document to measure it on") +
              f" (trained on {head['train']['tokens']:,} tokens of {head['train']['sentences']:,} sentences)")
    return 0


def _senses_on_ranks(args, cfg, train, context, command: str, lemmas) -> dict | None:
    """``build_sense_file`` in one process, or under torchrun as one of its ranks (every rank given the same
    command; rank 0 holds the output's lock and writes it): the meta dict, None on the other ranks."""
    from elmo_features.util import distributed
    from elmo_features.util.locking import lock_output_file

    from elmo_tasks.wsd.sense_build import build_sense_file

    if distributed.torchrun_world() <= 1:
        with lock_output_file(args.out, "--out"):  # one writer per output file
            return build_sense_file(cfg, args.source, train, args.out, context, context.progress, command=command,
                                    lemmas=lemmas)
    from elmo_tasks.experiment.data_parallel import join

    ranks, ok = join(), False
    try:
        distributed.check_same_job({"command": command}, {"command": "the command"})
        with contextlib.ExitStack() as lock:  # rank 0's lock, its failure told to every rank
            ranks.from_main(lambda: [lock.enter_context(lock_output_file(args.out, "--out"))] and None)
            meta = build_sense_file(cfg, args.source, train, args.out, context, context.progress, command=command,
                                    lemmas=lemmas, ranks=ranks)
        ok = True
    finally:
        distributed.finish(sync=ok)
    return meta


def check_distinct_folders(folders: list, flag: str) -> None:
    """Each test folder given once (after resolving links and ``..``): a repeat would count its instances twice in
    ALL. UsageError naming the folder."""
    seen: dict[Path, str] = {}
    for d in folders:
        real = Path(d).expanduser().resolve()
        if real in seen:
            twice = f"{d} is given twice" if seen[real] == str(d) else f"{seen[real]} and {d} are the same folder"
            raise UsageError(f"{flag}: {twice}; give each test folder once")
        seen[real] = str(d)


def check_distinct_names(datasets: list, flag: str) -> None:
    """Each data set name once: its answers are written to keys/MODE/NAME.key.txt and its column is named NAME.
    UsageError naming both folders."""
    seen: dict[str, object] = {}
    for ds in datasets:
        if ds.name in seen:
            raise UsageError(f"{flag}: {seen[ds.name]} and {ds.folder} both hold a data set named {ds.name!r} "
                             f"({ds.name}.data.xml); their answer files and columns would clash: rename one set's "
                             "files (NAME.data.xml, NAME.gold.key.txt) or score them in two runs")
        seen[ds.name] = ds.folder


def cmd_raw_eval(args) -> int:
    from elmo_features.util.paths import check_flags_given, check_input_dir, check_not_an_input
    from elmo_features.util.provenance import git_commit
    from elmo_features.util.threads import set_threads

    from elmo_tasks.data.fetch import fetch_hint
    from elmo_tasks.experiment.preflight import check_output_dirs, claim_results_folder
    from elmo_tasks.features.base import FeatureContext
    from elmo_tasks.wsd.config import WsdConfig
    from elmo_tasks.wsd.data.reader import load_dataset
    from elmo_tasks.wsd.raw_eval import NAME, evaluate, summary, write_results
    from elmo_tasks.wsd.run import warn_test_is_train
    from elmo_tasks.wsd.data.examples import load_inventory, warn_unknown_keys
    from elmo_tasks.wsd.sense_file import check_sense_path, prior_weight, read_sense_meta, wordnet_folder
    from elmo_tasks.wsd.tagging import SenseTagger

    check_flags_given(args, "senses", "test", "wordnet", "out")
    check_sense_path(args.senses, "--senses")
    meta = read_sense_meta(args.senses)
    if args.prior:
        prior_weight(meta, args.senses)
    tests = args.test or WsdConfig().test
    for d in tests:
        check_input_dir(d, "--test" if args.test else "test (the default; --test FOLDER ... gives others)",
                        hint=fetch_hint(d, own_copy="--test DIR ...") or "")
    check_distinct_folders(tests, "--test")
    trained_on = meta["train"].get("folder") if isinstance(meta.get("train"), dict) else None  # (None: no SemCor)
    if isinstance(trained_on, str) and trained_on:  # (relative to the folder the file was made in)
        warn_test_is_train(os.path.join(str(meta.get("cwd") or ""), os.path.expanduser(trained_on)), tests)
    out = Path(args.out)
    check_output_dirs(out=out)
    check_not_an_input(out, [args.senses, *tests, *wordnet_inputs(args.wordnet or meta.get("wordnet"))], "--out")
    datasets = [load_dataset(d) for d in tests]  # (a malformed file: one error naming it, before the model loads)
    check_distinct_names(datasets, "--test")
    inventory = load_inventory(wordnet_folder(args.senses, meta, args.wordnet))  # gold keys not in it: said, as wsd
    unknown = {ds.name: warn_unknown_keys(ds, inventory, f"test set {ds.name}") for ds in datasets}  # says them
    set_threads(args.threads)
    commit, command = git_commit(), command_line(args, "raw-eval")
    args.interrupt_hint = f"{out / 'raw_eval.md'} was not written (it is written at the end); to run again: {command}"
    with claim_results_folder(out, "raw_eval.json", NAME, "--out"):  # one writer; a folder of this command only
        tagger = SenseTagger(args.senses, args.wordnet, FeatureContext(device=str(parse_device(args.device))),
                             prior=args.prior)
        result = evaluate(tagger, datasets, out / "keys", progress=progress_shown(args.progress))
        write_results(summary(result, args.senses, tagger, args.prior, command, commit, unknown), out)
    a = result["all"]
    print(f"wrote {out / 'raw_eval.md'} and {out / 'raw_eval.json'}: ALL F1 {a['scores']['raw']['F1']:.1f} on raw "
          f"text (coverage {a['scores']['raw']['coverage']:.1f}%), {a['scores']['gold']['F1']:.1f} with the gold "
          f"lemmas; first sense {a['scores']['raw_first_sense']['F1']:.1f} and "
          f"{a['scores']['gold_first_sense']['F1']:.1f}")
    return 0

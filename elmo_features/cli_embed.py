"""``elmo-tasks embed``: embed a file of sentences into an HDF5 file compatible with ``allennlp elmo``.

Input: UTF-8 text, one whitespace-tokenized sentence per line (no blank lines; the text policy of
``elmo_features.util.text_input``).
Output: datasets "0", "1", ... (line number -> (L, n, D) with --all, (n, D) with --top / --average)
and "sentence_to_index", a JSON string mapping each stripped line to its dataset name.

Resuming: the output is built in OUTPUT.partial, flushed every --chunk-size sentences together with
the number of sentences done, the input's sha256 and the settings. Rerunning the same command
continues from the last flushed chunk; when done the file is renamed to OUTPUT. While it works, the
command holds OUTPUT.lock (``elmo_features.util.locking``): a second command writing the same OUTPUT is refused.

Under ``torchrun --nproc-per-node N`` each rank embeds a shard and rank 0 merges them into the same
OUTPUT (``elmo_features.embedding.sharded_embed``). The HDF5 writer both use: ``elmo_features.embedding.hdf5_output``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import h5py

from elmo_features.embedding.embed_input import needs_spooling, spool_input
from elmo_features.embedding.embedder import Embedder
from elmo_features.embedding.hdf5_output import (FORMATS, PARTIAL_SUFFIX, InputError,  # noqa: F401 (re-exported)
                                                 check_embed_output, embed_file)
from elmo_features.formats.weights import load_bilm
from elmo_features.model.precision import PRECISIONS, check_precision
from elmo_features.util.cli_types import (add_download_cache_argument, add_progress_argument, add_threads_argument,
                                          positive_int, progress_setting)
from elmo_features.util.threads import set_threads
from elmo_features.util.devices import add_device_argument, parse_device
from elmo_features.util.errors import TextInputError, UsageError
from elmo_features.util.paths import (check_flags_given, check_input_file, check_not_an_input, check_output_dir,
                                      check_output_file)

def _transformer_embedder(args: argparse.Namespace):
    """A TransformerEmbedder for ``--transformer`` (refuses biLM flags beside it)."""
    if args.model or args.options or args.weights:
        raise UsageError("give either --transformer or a biLM (--model, --options/--weights), not both")
    from elmo_features.encoders import TransformerEmbedder, load_encoder

    encoder = load_encoder(args.transformer, cache_dir=args.download_cache)
    encoder.model.to(parse_device(args.device))
    embedder = TransformerEmbedder(encoder, subword_pooling=args.subword_pooling or "mean", batch_size=args.batch_size,
                                   max_pieces_per_batch=args.max_tokens_per_batch, progress=False,
                                   precision=args.precision)
    if args.precision != "fp32":
        print(f"embed: precision {args.precision}: {embedder.precision}"
              + (f" ({embedder.bf16_hardware})" if embedder.bf16_hardware else " (no native bf16 here)"),
              file=sys.stderr)
    return embedder


def _check_precision_early(args: argparse.Namespace, device) -> None:
    """--precision for the model kind given, refused before a model is loaded (the embedders check again)."""
    if args.transformer:
        from elmo_features.encoders.precision import ENCODER_PRECISIONS, resolve_encoder_precision

        if args.precision not in ENCODER_PRECISIONS:
            raise UsageError(f"--precision {args.precision} applies to a biLM; with --transformer give "
                             f"{', '.join(ENCODER_PRECISIONS)}")
        resolve_encoder_precision(args.precision, device)
    elif args.precision not in PRECISIONS:  # (auto)
        raise UsageError(f"--precision {args.precision} applies to --transformer; for a biLM give "
                         f"{', '.join(PRECISIONS)}")
    elif device.type == "cpu":
        check_precision(args.precision, "cpu")


def _load_bilm(args: argparse.Namespace):
    if args.options or args.weights:
        if args.model:
            raise UsageError("give either --model or --options/--weights, not both")
        if not (args.options and args.weights):
            raise UsageError("--options and --weights go together")
        return load_bilm(args.options, args.weights)
    from elmo_features.formats.default_model import resolve_bilm

    return resolve_bilm(args.model or "default", cache_dir=args.download_cache)


def _model_files(args: argparse.Namespace) -> list:
    """The biLM files this command reads: --options/--weights, or the folder --model (or the default) names."""
    if args.transformer:
        return []
    if args.options or args.weights:
        return [f for f in (args.options, args.weights) if f]
    from elmo_features.formats.default_model import bilm_folder

    return [bilm_folder(args.model or "default", cache_dir=args.download_cache)]


def run(args: argparse.Namespace) -> int:
    """The ``embed`` sub-command (errors are reported by ``elmo_tasks.cli.main``). Input that can be read only once
    (``-`` for stdin, a pipe, a FIFO) is first copied to a temporary file beside OUTPUT (removed when done, on an
    error and on an interrupt)."""
    check_flags_given(args, "options", "weights", "download_cache")
    check_flags_given(args, "model", "transformer", what="name or path")
    if args.download_cache:  # (a file there would fail later in the OS's words about a path the user never gave)
        check_output_dir(args.download_cache, "--download-cache")
    check_not_an_input(check_output_file(args.output, "embed output"), [args.input, *_model_files(args)], "embed output")
    output = check_embed_output(args.output)
    args.interrupt_hint = lambda: interrupt_hint(output)
    if not needs_spooling(args.input):
        check_input_file(args.input, "embed input")
        return _run(args)
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".input", dir=output.parent)
    os.close(fd)
    spooled, shown = Path(name), "stdin" if args.input == "-" else args.input
    print(f"embed: reading {shown} once into {spooled}", file=sys.stderr)
    args.interrupt_hint = (f"nothing was embedded (stopped while reading {shown}; its copy {spooled.name} was "
                           "removed); rerun the same command to start again")
    try:
        spool_input(args.input, spooled)
        args.interrupt_hint = lambda: interrupt_hint(output, f" with the same {shown}")
        args.input = str(spooled)
        return _run(args)
    except TextInputError as e:  # the input's problems are named by the input, not by its (removed) copy
        raise TextInputError(str(e).replace(str(spooled), shown)) from None
    finally:
        spooled.unlink(missing_ok=True)


def interrupt_hint(output: Path, same_input: str = "") -> str:
    """What an interrupted ``embed`` kept and how to continue: the sentences flushed to OUTPUT.partial, if any."""
    partial = Path(str(output) + PARTIAL_SUFFIX)
    try:
        with h5py.File(partial, "r") as f:
            done = int(f.attrs.get("n_done", 0))
    except (OSError, ValueError, TypeError):
        done = 0
    if Path(str(output) + ".shards").is_dir():  # a torchrun embed keeps its finished shards
        return f"the finished shards stay in {output}.shards; rerun the same torchrun command to continue"
    if not done:
        return f"nothing was embedded yet (no chunk was flushed); rerun the same command{same_input} to start again"
    return (f"{done} sentences are kept in {partial}; rerun the same command{same_input} to continue from the last "
            "flushed chunk")


def _run(args: argparse.Namespace) -> int:
    """``run`` on a regular input file."""
    if args.subword_pooling is not None and not args.transformer:
        raise UsageError("--subword-pooling applies to --transformer only (a biLM embeds whole words); drop it, or "
                         "add --transformer MODEL")
    for flag in ("options", "weights"):
        if getattr(args, flag):
            check_input_file(getattr(args, flag), f"--{flag}")
    device = parse_device(args.device)  # (an unavailable device is an error before any work)
    set_threads(args.threads)
    _check_precision_early(args, device)
    t_load = time.perf_counter()
    if args.transformer:
        embedder = _transformer_embedder(args)
    else:
        bilm = _load_bilm(args).to(device)
        embedder = Embedder(bilm, batch_size=args.batch_size, max_tokens_per_batch=args.max_tokens_per_batch,
                            progress=False, precision=args.precision)
    load_seconds = time.perf_counter() - t_load
    from elmo_features.util import distributed

    if distributed.torchrun_world() > 1:  # launched by torchrun: this rank's shard (rank 0 also merges)
        from elmo_features.embedding.sharded_embed import embed_file_sharded

        dist = distributed.init()
        ok = False
        try:
            s = embed_file_sharded(args.input, args.output, embedder, dist, args.output_format,
                                   chunk_size=args.chunk_size, forget_sentences=args.forget_sentences,
                                   restart=args.restart)
            ok = True
        finally:
            distributed.finish(sync=ok)
        print(f"rank {dist.rank}/{dist.world_size}: embedded lines {s['shard'][0] + 1}..{s['shard'][1]}"
              + (f"; wrote {s['sentences']} sentences to {s['output']}" if dist.is_main else ""), file=sys.stderr)
        return 0
    s = embed_file(args.input, args.output, embedder, args.output_format, chunk_size=args.chunk_size,
                   forget_sentences=args.forget_sentences, resume=not args.restart,
                   progress=progress_setting(args.progress))
    print(f"wrote {s['sentences']} sentences ({s['tokens']} tokens) to {s['output']}: embedded in {s['seconds']:.1f} s, "
          f"after loading the model in {load_seconds:.1f} s", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    """Add the ``embed`` parser."""
    p = subparsers.add_parser("embed", help="embed a file of tokenized sentences into HDF5 (allennlp elmo format)",
                              description="Embed a file of sentences (one whitespace-tokenized sentence per line) "
                                          "with a biLM or a Transformer encoder into an HDF5 file that reads like "
                                          "the output of 'allennlp elmo'. Resumable: rerun the same command after "
                                          "a stop to continue.")
    p.add_argument("input", help="UTF-8 text, one whitespace-tokenized sentence per line ('-': standard input)")
    p.add_argument("output", help="output .hdf5 file")
    p.add_argument("--options", help="biLM options.json (with --weights)")
    p.add_argument("--weights", help="biLM weights.hdf5 (with --options)")
    p.add_argument("--model", help="'default' (the project's biLM), a preset (small, medium, original, "
                                   "original-5.5B) or a folder with options.json + weights.hdf5")
    p.add_argument("--transformer", metavar="MODEL",
                   help="embed with a frozen pretrained Transformer encoder instead of a biLM: a packaged name "
                        "(minilm-l6), a local Hugging Face folder or a hub id; every hidden state is a layer")
    p.add_argument("--subword-pooling", choices=("mean", "first", "last"), default=None,
                   help="with --transformer: how a word's pieces become one vector (default mean)")
    add_download_cache_argument(p, "presets and packaged encoders")
    add_progress_argument(p)
    add_threads_argument(p)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--all", dest="output_format", action="store_const", const="all",
                     help="all layers, (L, n, D) per sentence (the default)")
    fmt.add_argument("--top", dest="output_format", action="store_const", const="top", help="top layer, (n, D)")
    fmt.add_argument("--average", dest="output_format", action="store_const", const="average",
                     help="mean of the layers, (n, D)")
    p.add_argument("--batch-size", type=positive_int, default=64, help="sentences per batch (default 64)")
    p.add_argument("--max-tokens-per-batch", type=positive_int, default=4096,
                   help="padded tokens (with --transformer: word pieces) per batch (default 4096)")
    p.add_argument("--chunk-size", type=positive_int, default=1000, help="sentences per flush of the resumable output")
    p.add_argument("--forget-sentences", action="store_true", help="do not write the sentence_to_index dataset")
    p.add_argument("--restart", action="store_true", help="ignore OUTPUT.partial from an interrupted run")
    add_device_argument(p)
    p.add_argument("--precision", choices=(*PRECISIONS, "auto"), default="fp32",
                   help="fp32 (default) or bf16: bf16 matmuls with fp32 accumulation and cell state; needs a CUDA "
                        "device or a CPU with AVX512-BF16/AMX (docs/precision.md). With --transformer: fp32, bf16 "
                        "(autocast, fp32 outputs) or auto (bf16 where the CPU has AVX512-BF16/AMX, else fp32; "
                        "docs/transformers.md); reference: a biLM only")
    p.set_defaults(func=run, output_format="all")

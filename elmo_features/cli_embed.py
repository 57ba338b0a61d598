"""``elmo-tasks embed``: embed a file of sentences into an HDF5 file compatible with ``allennlp elmo``.

Input: UTF-8 text, one whitespace-tokenized sentence per line (no blank lines; the text policy of
``elmo_features.text_input``).
Output: datasets "0", "1", ... (line number -> (L, n, D) with --all, (n, D) with --top / --average)
and "sentence_to_index", a JSON string mapping each stripped line to its dataset name.

Resuming: the output is built in OUTPUT.partial, flushed every --chunk-size sentences together with
the number of sentences done, the input's sha256 and the settings. Rerunning the same command
continues from the last flushed chunk; when done the file is renamed to OUTPUT. While it works, the
command holds OUTPUT.lock (``elmo_features.locking``): a second command writing the same OUTPUT is refused.

Under ``torchrun --nproc-per-node N`` each rank embeds a shard and rank 0 merges them into the same
OUTPUT (``elmo_features.sharded_embed``).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import sys
import time
from pathlib import Path
from typing import Callable

import h5py
import numpy as np
from tqdm.auto import tqdm

from .cli_types import positive_int
from .devices import add_device_argument, parse_device
from .embed_input import EmbedInput, check_not_an_input, needs_spooling, spool_input
from .embedder import Embedder
from .errors import TextInputError, UsageError
from .feature_cache import embedder_fingerprint
from .locking import OutputLock, lock_path_for
from .paths import check_input_file, check_output_file
from .precision import PRECISIONS, check_precision
from .provenance import commit_file
from .weights import load_bilm

FORMATS = ("all", "top", "average")
PARTIAL_SUFFIX = ".partial"
_RESUME_ATTRS = ("input_sha256", "settings", "n_done")


InputError = TextInputError  # the input file breaks the text policy (elmo_features.text_input)


def _select(a: np.ndarray, output_format: str) -> np.ndarray:
    """(L, n, D) -> (L, n, D) for "all", (n, D) for "top" (last layer) / "average" (mean of layers)."""
    if output_format == "top":
        return a[-1]
    if output_format == "average":
        return a.mean(axis=0)
    return a


def write_chunk(f: h5py.File, c0: int, chunk: list[list[str]], embedder: Embedder, output_format: str,
                n_done: int) -> None:
    """Embed one chunk of sentences (numbered from ``c0``) into the open partial file, then flush ``n_done``."""
    for j, a in enumerate(embedder.embed_sentences(chunk)):  # a: (L, n_j, D)
        name = str(c0 + j)
        if name in f:  # written by an interrupted run after its last flush
            del f[name]
        f.create_dataset(name, data=_select(a, output_format).astype(np.float32))
    f.attrs["n_done"] = n_done
    f.flush()


def _open_partial(partial: Path, input_hash: str, settings: str, resume: bool) -> tuple[h5py.File, int]:
    """Open OUTPUT.partial for appending; -> (file, sentences already done)."""
    if resume and partial.exists():
        try:
            f = h5py.File(partial, "a")
        except OSError as e:
            print(f"{partial}: unreadable ({e}); starting over", file=sys.stderr)
        else:
            if f.attrs.get("input_sha256") == input_hash and f.attrs.get("settings") == settings:
                done = int(f.attrs.get("n_done", 0))
                if done:
                    print(f"{partial}: resuming after {done} sentences", file=sys.stderr)
                return f, done
            f.close()
            print(f"{partial}: left by a run with another input or settings; starting over", file=sys.stderr)
    f = h5py.File(partial, "w")
    f.attrs.update({"input_sha256": input_hash, "settings": settings, "n_done": 0})
    return f, 0


def embed_file(input_path: str | Path, output_path: str | Path, embedder: Embedder, output_format: str = "all",
               chunk_size: int = 1000, forget_sentences: bool = False, resume: bool = True,
               on_chunk: Callable[[int, int], None] | None = None) -> dict:
    """Embed ``input_path`` into ``output_path`` (see the module docstring). Returns a summary dict.

    on_chunk(chunk_index, n_done) is called after each flushed chunk (a hook for tests/monitoring).
    """
    if output_format not in FORMATS:
        raise UsageError(f"unknown output format {output_format!r}; valid: {FORMATS}")
    if chunk_size < 1:
        raise UsageError(f"chunk_size must be >= 1, got {chunk_size}")
    output_path = check_output_file(output_path, "embed output")
    source = EmbedInput(input_path)  # checked in one streaming pass; sentences are streamed again below
    output_path.parent.mkdir(parents=True, exist_ok=True)
    with OutputLock(lock_path_for(output_path), f"the embed output {output_path}"):
        _check_shards(output_path, resume)
        return _embed_locked(source, output_path, embedder, output_format, chunk_size, forget_sentences, resume,
                             on_chunk)


def _check_shards(output_path: Path, resume: bool) -> None:
    """An interrupted torchrun embed of the same output left OUTPUT.shards/: refuse (its finished shards would be
    recomputed and the folder left behind), unless ``--restart`` (resume=False) discards it, which is said."""
    shard_dir = Path(str(output_path) + ".shards")
    if not shard_dir.exists():
        return
    world = "N"
    try:
        world = str(json.loads((shard_dir / "manifest.json").read_text())["world_size"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if resume:
        done = len(list(shard_dir.glob("shard-*.hdf5")))
        raise UsageError(f"{shard_dir} holds an interrupted torchrun embed of this output ({done} finished shard(s)); "
                         f"resume it with the same command under `torchrun --nproc-per-node {world}`, or add --restart "
                         "to discard it and embed in one process")
    print(f"{shard_dir}: discarding an interrupted torchrun embed of this output (--restart)", file=sys.stderr)
    shutil.rmtree(shard_dir)


def write_sentence_index(f: h5py.File, source: EmbedInput) -> None:
    """The "sentence_to_index" dataset: a JSON string mapping each stripped line to its dataset name
    (a repeated line maps to its last occurrence, as allennlp's)."""
    ds = f.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype())
    ds[0] = source.sentence_index()


def _embed_locked(source: EmbedInput, output_path: Path, embedder: Embedder, output_format: str,
                  chunk_size: int, forget_sentences: bool, resume: bool, on_chunk) -> dict:
    """embed_file's work, while holding the output's lock."""
    partial = Path(str(output_path) + PARTIAL_SUFFIX)
    settings = json.dumps({"format": output_format, "bilm": embedder_fingerprint(embedder),
                           "forget_sentences": bool(forget_sentences)}, sort_keys=True)
    t0 = time.time()
    f, start = _open_partial(partial, source.sha256, settings, resume)
    n = len(source)
    with f, tqdm(total=n, initial=start, unit="sent", desc="embed",
                 disable=not (sys.stderr.isatty() and n > 1000)) as bar:
        for k, (c0, chunk) in enumerate(source.chunks(start, n, chunk_size)):
            write_chunk(f, c0, chunk, embedder, output_format, n_done=c0 + len(chunk))
            bar.update(len(chunk))
            if on_chunk is not None:
                on_chunk(k, c0 + len(chunk))
        if "sentence_to_index" in f:
            del f["sentence_to_index"]
        if not forget_sentences:
            write_sentence_index(f, source)
        for key in _RESUME_ATTRS:
            del f.attrs[key]
    commit_file(partial, output_path)
    return {"sentences": n, "tokens": source.tokens(), "resumed_from": start,
            "seconds": time.time() - t0, "output": str(output_path)}


def _transformer_embedder(args: argparse.Namespace):
    """A TransformerEmbedder for ``--transformer`` (refuses biLM flags beside it)."""
    if args.model or args.options or args.weights or args.precision != "fp32":
        raise UsageError("give either --transformer or a biLM (--model, --options/--weights, --precision), not both")
    from .encoders import TransformerEmbedder, load_encoder

    encoder = load_encoder(args.transformer, cache_dir=args.cache_dir)
    encoder.model.to(parse_device(args.device))
    return TransformerEmbedder(encoder, subword_pooling=args.subword_pooling, batch_size=args.batch_size,
                               max_pieces_per_batch=args.max_tokens_per_batch, progress=False)


def _load_bilm(args: argparse.Namespace):
    if args.options or args.weights:
        if args.model:
            raise UsageError("give either --model or --options/--weights, not both")
        if not (args.options and args.weights):
            raise UsageError("--options and --weights go together")
        return load_bilm(args.options, args.weights)
    from .default_model import resolve_bilm

    return resolve_bilm(args.model or "default", cache_dir=args.cache_dir)


def run(args: argparse.Namespace) -> int:
    """The ``embed`` sub-command (errors are reported by ``tasks.cli.main``). Input that can be read only once
    (``-`` for stdin, a pipe, a FIFO) is first copied to a temporary file beside OUTPUT (removed when done)."""
    output = check_output_file(args.output, "embed output")
    check_not_an_input(output, [args.input] + [getattr(args, f) for f in ("options", "weights") if getattr(args, f)])
    if not needs_spooling(args.input):
        check_input_file(args.input, "embed input")
        return _run(args)
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".input", dir=output.parent)
    os.close(fd)
    spooled = Path(name)
    print(f"embed: reading {'stdin' if args.input == '-' else args.input} once into {spooled}", file=sys.stderr)
    spool_input(args.input, spooled)
    try:
        args.input = str(spooled)
        return _run(args)
    finally:
        spooled.unlink(missing_ok=True)


def _run(args: argparse.Namespace) -> int:
    """``run`` on a regular input file."""
    for flag in ("options", "weights"):
        if getattr(args, flag):
            check_input_file(getattr(args, flag), f"--{flag}")
    device = parse_device(args.device)  # (an unavailable device is an error before any work)
    if device.type == "cpu":
        check_precision(args.precision, "cpu")  # refuse before a model is loaded (Embedder checks again)
    if args.transformer:
        embedder = _transformer_embedder(args)
    else:
        bilm = _load_bilm(args).to(device)
        embedder = Embedder(bilm, batch_size=args.batch_size, max_tokens_per_batch=args.max_tokens_per_batch,
                            progress=False, precision=args.precision)
    from . import distributed

    if distributed.torchrun_world() > 1:  # launched by torchrun: this rank's shard (rank 0 also merges)
        from .sharded_embed import embed_file_sharded

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
                   forget_sentences=args.forget_sentences, resume=not args.restart)
    print(f"wrote {s['sentences']} sentences ({s['tokens']} tokens) to {s['output']} in {s['seconds']:.1f} s",
          file=sys.stderr)
    return 0


def register(subparsers) -> None:
    """Add the ``embed`` parser."""
    p = subparsers.add_parser("embed", help="embed a file of tokenized sentences into HDF5 (allennlp elmo format)",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("input", help="UTF-8 text, one whitespace-tokenized sentence per line ('-': standard input)")
    p.add_argument("output", help="output .hdf5 file")
    p.add_argument("--options", help="biLM options.json (with --weights)")
    p.add_argument("--weights", help="biLM weights.hdf5 (with --options)")
    p.add_argument("--model", help="'default' (the project's biLM), a preset (small, medium, original, "
                                   "original-5.5B) or a folder with options.json + weights.hdf5")
    p.add_argument("--transformer", metavar="MODEL",
                   help="embed with a frozen pretrained Transformer encoder instead of a biLM: a packaged name "
                        "(minilm-l6), a local Hugging Face folder or a hub id; every hidden state is a layer")
    p.add_argument("--subword-pooling", choices=("mean", "first", "last"), default="mean",
                   help="with --transformer: how a word's pieces become one vector (default mean)")
    p.add_argument("--cache-dir", help="where presets and packaged encoders are downloaded (default ~/.cache/elmo_tasks)")
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
    p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="fp32 (default) or bf16: bf16 matmuls with fp32 accumulation and cell state; needs a CUDA "
                        "device or a CPU with AVX512-BF16/AMX (docs/precision.md)")
    p.set_defaults(func=run, output_format="all",
                   interrupt_hint="rerun the same command to continue from the last flushed chunk")

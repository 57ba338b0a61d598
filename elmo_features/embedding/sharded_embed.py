"""``embed`` under torchrun: each rank embeds a contiguous, token-balanced shard; rank 0 merges them.

Layout next to OUTPUT while it works (OUTPUT.shards/):
- ``manifest.json``: input sha256, settings, world size and the shard boundaries (written by rank 0);
- ``shard-R-of-W.hdf5``: rank R's finished shard (datasets named by the input line index, as in OUTPUT);
  built in ``shard-R-of-W.hdf5.partial`` (flushed every --chunk-size sentences, resumable) and renamed
  when complete, so a shard file that exists is whole.
After every rank has posted its status, rank 0 copies the shards, in order, into OUTPUT (written to a
temporary file and renamed: partial shards never become the output) and deletes OUTPUT.shards/.

Rerunning the same command after a crash keeps every finished shard and resumes the partial ones. A
launch with another world size on a partial output is refused (its shard boundaries differ); relaunch
with the old world size, or pass --restart to discard the shards.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import h5py
import numpy as np

from elmo_features.util import distributed as D
from elmo_features.embedding.hdf5_output import FORMATS, open_partial, write_chunk, write_sentence_index
from elmo_features.embedding.embed_input import EmbedInput
from elmo_features.embedding.embedder import Embedder
from elmo_features.util.errors import UsageError
from elmo_features.embedding.feature_cache import embedder_fingerprint
from elmo_features.util.locking import OutputLock, lock_path_for
from elmo_features.util.paths import check_output_file
from elmo_features.util.provenance import atomic_path, commit_file, write_text_atomic

SHARDS_SUFFIX = ".shards"


def shard_bounds(lengths: list[int], world_size: int) -> list[int]:
    """world_size + 1 boundaries of contiguous shards with near-equal token counts (shard r: [b_r, b_r+1))."""
    cum = np.cumsum(np.asarray(lengths, dtype=np.int64))
    total = int(cum[-1]) if len(cum) else 0
    bounds = [0]
    for r in range(1, world_size):
        b = int(np.searchsorted(cum, total * r / world_size, side="left")) + 1  # the crossing sentence stays left
        bounds.append(min(max(b, bounds[-1]), len(lengths)))
    return bounds + [len(lengths)]


def settings_for(embedder: Embedder, output_format: str, forget_sentences: bool) -> str:
    """The settings string of a resumable output (as the single-process ``embed`` writes it)."""
    return json.dumps({"format": output_format, "bilm": embedder_fingerprint(embedder),
                       "forget_sentences": bool(forget_sentences)}, sort_keys=True)


def shard_path(shard_dir: Path, rank: int, world_size: int) -> Path:
    return shard_dir / f"shard-{rank:05d}-of-{world_size:05d}.hdf5"


def prepare_shards(shard_dir: Path, manifest: dict, restart: bool) -> str | None:
    """Rank 0: make ``shard_dir`` hold ``manifest`` (keeping finished shards of the same job).

    Returns an error message (a partial output of another world size) or None."""
    path = shard_dir / "manifest.json"
    if path.exists() and not restart:
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = {}
        same_job = all(old.get(k) == manifest[k] for k in ("input_sha256", "settings"))
        if same_job and old.get("world_size") != manifest["world_size"]:
            done = len(list(shard_dir.glob("shard-*.hdf5")))
            return (f"{shard_dir} holds a partial sharded embedding of this input made with {old.get('world_size')} "
                    f"processes ({done} shard(s) finished), but this launch has {manifest['world_size']}; relaunch "
                    f"with {old.get('world_size')} processes to resume it, or add --restart to discard it")
        if same_job:
            return None
        print(f"{shard_dir}: left by a run with another input or settings; starting over", file=sys.stderr)
    if shard_dir.exists():
        shutil.rmtree(shard_dir)
    shard_dir.mkdir(parents=True)
    write_text_atomic(path, json.dumps(manifest, indent=1) + "\n")
    return None


def embed_shard(source: EmbedInput, lo: int, hi: int, path: Path, embedder: Embedder, output_format: str,
                chunk_size: int, input_hash: str, settings: str, on_chunk=None) -> int:
    """Embed the input's lines [lo, hi) (streamed) into the shard file ``path`` (resumable); returns how many were embedded now."""
    shard_settings = json.dumps({"settings": settings, "lo": lo, "hi": hi})
    if path.exists():
        with h5py.File(path, "r") as f:
            if f.attrs.get("input_sha256") == input_hash and f.attrs.get("settings") == shard_settings:
                return 0  # finished before
    partial = Path(str(path) + ".partial")
    with OutputLock(lock_path_for(path), f"the shard {path}"):
        f, done = open_partial(partial, input_hash, shard_settings, resume=True)
        start = lo + done
        with f:
            for k, (c0, chunk) in enumerate(source.chunks(start, hi, chunk_size)):
                write_chunk(f, c0, chunk, embedder, output_format, n_done=c0 + len(chunk) - lo)
                if on_chunk is not None:
                    on_chunk(k, c0 + len(chunk) - lo)
        commit_file(partial, path)
    return hi - start


def merge_shards(shard_dir: Path, manifest: dict, source: EmbedInput, output_path: Path, forget_sentences: bool) -> None:
    """Rank 0: copy every shard, in order, into OUTPUT (atomically), then delete ``shard_dir``."""
    with atomic_path(output_path) as tmp, h5py.File(tmp, "w") as out:
        W = manifest["world_size"]
        for r in range(W):
            with h5py.File(shard_path(shard_dir, r, W), "r") as f:
                for i in range(manifest["bounds"][r], manifest["bounds"][r + 1]):
                    out.create_dataset(str(i), data=f[str(i)][...])
        if not forget_sentences:
            write_sentence_index(out, source)
    shutil.rmtree(shard_dir, ignore_errors=True)


def embed_file_sharded(input_path, output_path, embedder: Embedder, dist: D.Dist, output_format: str = "all",
                       chunk_size: int = 1000, forget_sentences: bool = False, restart: bool = False) -> dict:
    """This rank's part of a sharded embedding (see the module docstring); rank 0 also merges."""
    if output_format not in FORMATS:
        raise UsageError(f"unknown output format {output_format!r}; valid: {FORMATS}")
    output_path = check_output_file(output_path, "embed output")
    source = EmbedInput(input_path)  # checked in one streaming pass; each rank streams its lines again
    input_hash = source.sha256
    shard_dir = Path(str(output_path) + SHARDS_SUFFIX)
    settings = settings_for(embedder, output_format, forget_sentences)
    manifest = {"input_sha256": input_hash, "settings": settings, "world_size": dist.world_size,
                "bounds": shard_bounds(list(source.lengths), dist.world_size)}
    parts = json.loads(settings)
    D.check_same_job({"input": f"{input_path}, sha256 {input_hash[:12]}", "model": f"fingerprint {parts['bilm'][:12]}",
                      "format": parts["format"], "forget_sentences": parts["forget_sentences"],
                      "output": str(output_path.resolve())},
                     {"input": "the input", "model": "the model", "format": "the output format",
                      "forget_sentences": "--forget-sentences", "output": "the output"})
    lock = OutputLock(lock_path_for(output_path), f"the embed output {output_path}")
    error = None
    if dist.is_main:
        output_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            lock.acquire()
            error = prepare_shards(shard_dir, manifest, restart)
        except Exception as e:  # every rank must learn that the job stops (the broadcast below)
            error = " ".join(str(e).split()) or type(e).__name__
    error = D.broadcast(error)
    if error is not None:
        lock.release()
        raise D.DistributedError(error if dist.is_main else f"rank 0: {error}")
    lo, hi = manifest["bounds"][dist.rank], manifest["bounds"][dist.rank + 1]
    try:
        n_new = embed_shard(source, lo, hi, shard_path(shard_dir, dist.rank, dist.world_size), embedder,
                            output_format, chunk_size, input_hash, settings)
    except BaseException as e:
        D.post_status("embed", dist.rank, f"{type(e).__name__}: {' '.join(str(e).split())}"[:500])
        lock.release()
        raise
    D.post_status("embed", dist.rank, "ok")
    summary = {"sentences": hi - lo, "tokens": source.tokens(lo, hi), "resumed_from": hi - lo - n_new,
               "shard": [lo, hi], "output": str(output_path)}
    if not dist.is_main:
        return summary
    try:
        statuses = D.wait_statuses("embed", dist.world_size, "the other ranks' shards")
        failed = [f"rank {r}: {s}" for r, s in enumerate(statuses) if s != "ok"]
        if failed:
            raise D.DistributedError(f"{len(failed)} rank(s) failed ({'; '.join(failed)}); the finished shards in "
                                     f"{shard_dir} are kept: rerun the same command to resume")
        merge_shards(shard_dir, manifest, source, output_path, forget_sentences)
    finally:
        lock.release()
    return {**summary, "sentences": len(source), "tokens": source.tokens()}

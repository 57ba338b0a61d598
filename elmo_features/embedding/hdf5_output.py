"""The HDF5 output of ``embed`` (readable like ``allennlp elmo`` output), written resumably by one process.

Datasets "0", "1", ... (line number -> (L, n, D) with "all", (n, D) with "top" / "average") and
"sentence_to_index", a JSON string mapping each stripped line to its dataset name. The output is built in
OUTPUT.partial, flushed every chunk together with the number of sentences done, the input's sha256 and the
settings; rerunning continues from the last flushed chunk; when done the file is renamed to OUTPUT. While it works,
OUTPUT.lock is held (``elmo_features.util.locking``). ``embed_file`` is the one-process path; the torchrun path
(``elmo_features.embedding.sharded_embed``) writes its shards with the same ``write_chunk`` / ``open_partial``.
"""
from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Callable

import h5py
import numpy as np
from tqdm.auto import tqdm

from elmo_features.embedding.embed_input import EmbedInput
from elmo_features.embedding.embedder import SentenceEmbedder
from elmo_features.embedding.feature_cache import embedder_fingerprint
from elmo_features.util.errors import PathError, TextInputError, UsageError
from elmo_features.util.locking import OutputLock, lock_path_for
from elmo_features.util.paths import check_output_file, check_own_output, check_plain_file
from elmo_features.util.provenance import commit_file, real_output
from elmo_features.util.room import H5pyRoomWatch, close_once, disk_full, room_cause, room_left, size_text

FORMATS = ("all", "top", "average")
PARTIAL_SUFFIX = ".partial"
_RESUME_ATTRS = ("input_sha256", "settings", "n_done")


InputError = TextInputError  # the input file breaks the text policy (elmo_features.util.text_input)


def _select(a: np.ndarray, output_format: str) -> np.ndarray:
    """(L, n, D) -> (L, n, D) for "all", (n, D) for "top" (last layer) / "average" (mean of layers)."""
    if output_format == "top":
        return a[-1]
    if output_format == "average":
        return a.mean(axis=0)
    return a


def is_embed_output(path: Path) -> bool:
    """An HDF5 file holding only what ``embed`` writes (datasets "0", "1", ... and "sentence_to_index")."""
    try:
        with h5py.File(path, "r") as f:
            return all(k.isdigit() or k == "sentence_to_index" for k in f.keys())
    except OSError:
        return False


def check_embed_output(output_path: str | Path) -> Path:
    """The file ``embed`` writes (a symlink's target) is absent or an ``embed`` output: anything else (a run's
    model.pt, a weights file) is refused, never replaced (OUTPUT.partial may be anything: a killed writer's half file
    is started over). Returns the path written."""
    output_path = real_output(check_output_file(output_path, "embed output"))
    check_own_output(output_path, "embed output", "an HDF5 file written by embed", is_embed_output)
    return output_path


def write_chunk(f: h5py.File, c0: int, chunk: list[list[str]], embedder: SentenceEmbedder, output_format: str,
                n_done: int) -> None:
    """Embed one chunk of sentences (numbered from ``c0``) into the open partial file, then flush ``n_done``; a
    chunk that would not fit (``check_room``) is refused before anything of it is written."""
    arrays = [_select(a, output_format).astype(np.float32, copy=False)  # (L, n_j, D); float32 already: no copy
              for a in embedder.embed_sentences(chunk)]
    check_room(f.filename, sum(a.nbytes for a in arrays) + DATASET_OVERHEAD * len(arrays), c0)
    for j, a in enumerate(arrays):
        name = str(c0 + j)
        if name in f:  # written by an interrupted run after its last flush
            del f[name]
        f.create_dataset(name, data=a)
    f.attrs["n_done"] = n_done
    f.flush()


DATASET_OVERHEAD = 512  # bytes an HDF5 dataset takes besides its values (header, link, heap: about 430 measured)
ROOM_MARGIN = 16 << 10  # bytes kept free beyond a chunk's estimate, plus a sixteenth of it (the file's B-tree and
# heap grow in steps)


def check_room(filename: str, need: int, done: int, item: str = "the next sentences' embeddings") -> None:
    """A NoRoomError when ``need`` more bytes would not fit in ``filename``: its file system's free space, or the
    process's file-size limit (``ulimit -f``). Checked before a chunk is written, so that the partial file stays
    whole and a rerun continues it (an HDF5 write that fails halfway leaves a file that cannot be closed)."""
    room, what, todo = room_left(filename)
    need += ROOM_MARGIN + need // 16
    if need > room:
        todo = todo.replace("free some space", "free some space (or write elsewhere)")
        raise NoRoomError(f"{filename}: {item} need about {size_text(need)}, but {what} {size_text(room)}; the "
                          f"partial file is kept ({done} sentences done): "
                          f"{todo} and run the same command again to continue")


class NoRoomError(PathError):
    """The next chunk of embeddings would not fit where the output is written (nothing of it was written)."""


def open_partial(partial: Path, input_hash: str, settings: str, resume: bool) -> tuple[h5py.File, int]:
    """Open OUTPUT.partial for appending; -> (file, sentences already done)."""
    check_plain_file(partial, "a partial embed output")  # it is written in place: never through a link
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


def embed_file(input_path: str | Path, output_path: str | Path, embedder: SentenceEmbedder, output_format: str = "all",
               chunk_size: int = 1000, forget_sentences: bool = False, resume: bool = True,
               on_chunk: Callable[[int, int], None] | None = None, progress: bool | None = None) -> dict:
    """Embed ``input_path`` into ``output_path`` (see the module docstring). Returns a summary dict.

    on_chunk(chunk_index, n_done) is called after each flushed chunk (a hook for tests/monitoring); progress: a bar
    (None: when stderr is a terminal and there are more than 1000 sentences).
    """
    if output_format not in FORMATS:
        raise UsageError(f"unknown output format {output_format!r}; valid: {FORMATS}")
    if chunk_size < 1:
        raise UsageError(f"chunk_size must be >= 1, got {chunk_size}")
    output_path = check_embed_output(output_path)
    source = EmbedInput(input_path)  # checked in one streaming pass; sentences are streamed again below
    output_path.parent.mkdir(parents=True, exist_ok=True)
    with OutputLock(lock_path_for(output_path), f"the embed output {output_path}"):
        _check_shards(output_path, resume)
        return _embed_locked(source, output_path, embedder, output_format, chunk_size, forget_sentences, resume,
                             on_chunk, progress)


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


def _embed_locked(source: EmbedInput, output_path: Path, embedder: SentenceEmbedder, output_format: str,
                  chunk_size: int, forget_sentences: bool, resume: bool, on_chunk, progress: bool | None = None) -> dict:
    """embed_file's work, while holding the output's lock."""
    partial = Path(str(output_path) + PARTIAL_SUFFIX)
    settings = json.dumps({"format": output_format, "bilm": embedder_fingerprint(embedder),
                           "forget_sentences": bool(forget_sentences)}, sort_keys=True)
    t0 = time.time()
    f, start = open_partial(partial, source.sha256, settings, resume)
    n = len(source)
    try:
        with H5pyRoomWatch():  # (h5py's reports of a failed write dropped)
            _write_all(f, source, embedder, output_format, chunk_size, forget_sentences, start, on_chunk, progress)
    except NoRoomError:
        f.close()  # (nothing of the chunk was written: the partial file is whole, and a rerun continues it)
        raise
    except (OSError, RuntimeError) as e:
        if not disk_full(e):
            close_once(f)
            raise
        close_once(f)  # (the close flushes, and fails again on a full disk: the first error is the one reported)
        partial.unlink(missing_ok=True)
        error = PathError(f"{partial}: {room_cause(e)} while writing the embeddings of {source.path}; the "
                          f"partial file is removed and {output_path} is unchanged; free some space (or write "
                          "elsewhere) and run the same command again")
        error.exit_now = True  # the HDF5 library cannot shut down after a failed write (it crashes at exit)
        raise error from None
    except BaseException:
        close_once(f)  # a stop: the chunks flushed so far are kept for the rerun
        raise
    f.close()
    commit_file(partial, output_path)
    return {"sentences": n, "tokens": source.tokens(), "resumed_from": start,
            "seconds": time.time() - t0, "output": str(output_path)}


def _write_all(f: h5py.File, source: EmbedInput, embedder: SentenceEmbedder, output_format: str, chunk_size: int,
               forget_sentences: bool, start: int, on_chunk, progress: bool | None) -> None:
    """Write every chunk from ``start``, then the sentence index (the caller closes the file)."""
    n = len(source)
    with tqdm(total=n, initial=start, unit="sent", desc="embed",
                 disable=not (sys.stderr.isatty() and n > 1000 if progress is None else progress)) as bar:
        for k, (c0, chunk) in enumerate(source.chunks(start, n, chunk_size)):
            write_chunk(f, c0, chunk, embedder, output_format, n_done=c0 + len(chunk))
            bar.update(len(chunk))
            if on_chunk is not None:
                on_chunk(k, c0 + len(chunk))
        if "sentence_to_index" in f:
            del f["sentence_to_index"]
        if not forget_sentences:
            check_room(f.filename, len(source.sentence_index().encode("utf-8")) + DATASET_OVERHEAD, n,
                       "the sentence index (every line's text, written last)")
            write_sentence_index(f, source)
        for key in _RESUME_ATTRS:
            del f.attrs[key]

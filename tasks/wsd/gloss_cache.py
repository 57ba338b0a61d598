"""The pooled gloss layers of every WordNet sense (``senses.gloss_layers``), cached on disk while they are computed.

One folder per source and WordNet, ``CACHE_DIR/glosses/KEY/``, holds a float16 array per pooling
(``sentence.npy``, ``lemma.npy``: (S, L, D)) and ``progress.json`` (the fingerprint, the shape and the chunks
done, written after the arrays are flushed). The arrays are memory-mapped: the operating system keeps only the
pages in use, so a 12-layer, 768-dimension encoder's 8 GB of gloss vectors need not fit beside the rest; their
space on disk is taken when they are made (a full disk is an error then, not a crash mid-way). A
computation that stops (a signal, a crash) resumes at its next chunk; a second process needing the same glosses
waits for the first, then reads its arrays. A finished folder records a CRC32 of each array and the files' size
and mtime: an array whose stamp changed is read in full and checked, and one that no longer matches its CRC32
(edited, damaged) is computed again.
"""
from __future__ import annotations

import hashlib
import json
import mmap
import os
import sys
import zlib
from pathlib import Path

import numpy as np

from elmo_features.util.errors import PathError
from elmo_features.util.locking import OutputLock
from elmo_features.util.provenance import write_text_atomic
from elmo_features.util.room import disk_full, reserve, room_cause, room_left, size_text

PROGRESS = "progress.json"
NPY_HEADER = 4096  # bytes an array file may take besides its values (its .npy header, and a block's rounding)


class GlossStore:
    """The cache folder of one fingerprint (``folder``); ``poolings`` names its arrays, ``chunk`` is the number of
    glosses computed at a time (a resume needs the same chunks)."""

    def __init__(self, cache_dir: str | Path, fingerprint: str, poolings: tuple[str, ...], n_senses: int,
                 chunk: int, dtype=np.float16):
        self.folder = Path(cache_dir).expanduser() / "glosses" / hashlib.sha256(fingerprint.encode()).hexdigest()[:24]
        self.fingerprint, self.poolings, self.n, self.chunk = fingerprint, poolings, n_senses, chunk
        self.dtype = np.dtype(dtype)
        self.lock = OutputLock(self.folder.with_name(self.folder.name + ".lock"), f"the gloss cache {self.folder}")

    def progress(self) -> dict:
        """The recorded progress (``chunks``, ``shape``, ``complete``), or a fresh start's when there is none, or
        when it belongs to another fingerprint or a damaged folder (the arrays are then made again)."""
        try:
            saved = json.loads((self.folder / PROGRESS).read_text(encoding="utf-8"))
            shape = saved["shape"]
            ok = (saved["fingerprint"] == self.fingerprint and shape[0] == self.n and
                  (saved["complete"] or saved["chunk"] == self.chunk) and
                  all(np.load(self._file(p), mmap_mode="r").dtype == self.dtype and
                      list(np.load(self._file(p), mmap_mode="r").shape) == shape for p in self.poolings))
        except (OSError, ValueError, KeyError, TypeError, IndexError):  # (a truncated or damaged array too)
            ok = False
        if ok and saved["complete"]:
            ok = self._verified(saved)
        return saved if ok else {"chunks": 0, "shape": None, "complete": False}

    def _verified(self, saved: dict) -> bool:
        """Whether a complete folder's arrays are the ones written: their size and mtime as when last verified
        (cheap), else their CRC32s as recorded (read in full once, then the new stamp is recorded). A folder from
        before checksums were recorded gets them now, from its current arrays."""
        if "crc32" in saved and saved.get("verified") == self._stamps():
            return True
        crc = self._checksums()
        if "crc32" not in saved and not self._finite():  # (nothing vouches for its values: NaN is damage)
            print(f"glosses: {self.folder} was written before checksums were recorded and holds NaN or infinite "
                  "values (damaged); computing the glosses again", file=sys.stderr, flush=True)
            return False
        if "crc32" not in saved:
            print(f"glosses: {self.folder} was written before checksums were recorded; recording them now",
                  file=sys.stderr, flush=True)
        elif saved["crc32"] != crc:
            print(f"glosses: {self.folder} does not match the checksums written with it (edited or damaged); "
                  "computing the glosses again", file=sys.stderr, flush=True)
            return False
        saved.update(crc32=crc, verified=self._stamps())
        write_text_atomic(self.folder / PROGRESS, json.dumps(saved) + "\n")
        return True

    def _stamps(self) -> dict[str, list[int]]:
        """Each array file's [size, mtime in ns]: what changes when it is written again or edited."""
        stats = {p: self._file(p).stat() for p in self.poolings}
        return {p: [st.st_size, st.st_mtime_ns] for p, st in stats.items()}

    def _checksums(self) -> dict[str, int]:
        """CRC32 of each array's values, read a block of senses at a time."""
        out = {}
        for p in self.poolings:
            a = np.load(self._file(p), mmap_mode="r")
            crc = 0
            for s in range(0, a.shape[0], 8192):
                crc = zlib.crc32(np.ascontiguousarray(a[s:s + 8192]), crc)
            out[p] = crc
        return out

    def _finite(self) -> bool:
        """Whether every array holds finite values only, read a block of senses at a time."""
        for p in self.poolings:
            a = np.load(self._file(p), mmap_mode="r")
            if not all(np.isfinite(a[s:s + 8192]).all() for s in range(0, a.shape[0], 8192)):
                return False
        return True

    def _file(self, pooling: str) -> Path:
        return self.folder / f"{pooling}.npy"

    def create(self, layers: int, dim: int) -> dict[str, np.ndarray]:
        """New zeroed arrays (S, L, D) of the store's dtype (float16 unless told) on disk, opened for writing; the
        progress is reset first. Their space is taken on disk now (``room.reserve``): a disk without room for them
        is one PathError naming the file and the room they need, never a SIGBUS when a page is first written."""
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / PROGRESS).unlink(missing_ok=True)
        for p in self.poolings:  # (an earlier computation's: their room is free for the new ones)
            self._file(p).unlink(missing_ok=True)
        shape = (self.n, layers, dim)
        need = len(self.poolings) * (int(np.prod(shape)) * self.dtype.itemsize + NPY_HEADER)
        room, what, todo = room_left(self._file(self.poolings[0]))
        if need > room:
            raise PathError(f"{self.folder}: the gloss arrays need about {size_text(need)}, but {what} "
                            f"{size_text(room)}; {todo}, or give another --cache-dir")
        arrays: dict[str, np.ndarray] = {}
        for p in self.poolings:
            try:
                arrays[p] = np.lib.format.open_memmap(self._file(p), mode="w+", dtype=self.dtype, shape=shape)
                self._reserve(p)
            except OSError as e:
                if not disk_full(e):
                    raise
                arrays.clear()
                for q in self.poolings:  # (none is left half made: a rerun makes them again)
                    self._file(q).unlink(missing_ok=True)
                raise PathError(f"{self._file(p)}: {room_cause(e)}; the gloss arrays need about {size_text(need)} "
                                f"and {what} {size_text(room_left(self.folder)[0])}; {todo}, or give another "
                                "--cache-dir") from None
        return arrays

    def _reserve(self, pooling: str) -> None:
        """Take the disk space of a (sparse) array file now (``room.reserve``)."""
        with open(self._file(pooling), "r+b") as f:
            reserve(f.fileno(), os.fstat(f.fileno()).st_size)

    def open(self, writable: bool = False) -> dict[str, np.ndarray]:
        """The arrays on disk (read-only unless ``writable``: a resumed computation, their space taken on disk first:
        no room is one PathError, the glosses embedded so far kept)."""
        if writable:
            for p in self.poolings:
                try:
                    self._reserve(p)
                except OSError as e:
                    if not disk_full(e):
                        raise
                    raise PathError(f"{self._file(p)}: {room_cause(e)} for the rest of the gloss arrays "
                                    f"({size_text(self._file(p).stat().st_size)}); the glosses embedded so far are "
                                    "kept: free some space and run the same command again to go on") from None
        return {p: np.load(self._file(p), mmap_mode="r+" if writable else "r") for p in self.poolings}

    def mark(self, arrays: dict[str, np.ndarray], chunks: int, complete: bool = False) -> None:
        """Flush ``arrays``, then record that ``chunks`` chunks are in them."""
        for a in arrays.values():
            a.flush()
            if isinstance(getattr(a, "base", None), mmap.mmap):  # written pages are on disk now: out of the
                a.base.madvise(mmap.MADV_DONTNEED)  # resident set (read again from the file when needed)
        shape = list(next(iter(arrays.values())).shape)
        record = {"fingerprint": self.fingerprint, "shape": shape, "chunk": self.chunk, "chunks": chunks,
                  "complete": complete}
        if complete:
            record.update(crc32=self._checksums(), verified=self._stamps())
        write_text_atomic(self.folder / PROGRESS, json.dumps(record) + "\n")


def wait_note(holder: str) -> None:
    print(f"glosses: {holder} is computing the same gloss vectors; waiting for it", file=sys.stderr, flush=True)

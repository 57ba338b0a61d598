"""An on-disk cache of biLM features: compute once per (model, sentences), then read from HDF5.

``FeatureCache(cache_dir).embed(embedder, sentences)`` returns float32 arrays (L, n_i, D). The key is
sha256 over the model fingerprint, the stored dtype and every sentence's tokens (each sentence
JSON-encoded, one per line: JSON escapes newlines, so no token can fake a boundary). One HDF5
file per key, datasets "0", "1", ... (as ``allennlp elmo --all``), written to a temp file and
renamed, so a file that exists is complete. Beside them, ``lengths`` (tokens per sentence) and ``crc32`` (a
checksum of each stored array); an entry with a missing or misshapen array, one that fails its checksum, or one
holding NaN/Inf (bit rot, another program) is damaged: ``embed`` recomputes it, ``LazyFeatures`` refuses it. The batching settings of the embedder are not part
of the key (they change outputs only by float rounding, < 1e-6). While an entry is computed, its
``KEY.hdf5.lock`` is held (``elmo_features.util.locking``); a second process needing the same entry waits
for it, then reads it.

``embed_lazy`` returns an h5py-backed sequence instead, for corpora that do not fit in RAM.
"""
from __future__ import annotations

import hashlib
import json
import operator
import os
import sys
import zlib
from pathlib import Path
from typing import Sequence

import h5py
import numpy as np
import torch

from elmo_features.model.bilm import BiLM
from elmo_features.util.errors import DamagedCacheError, PathError
from elmo_features.util.cli_types import OFF_WORDS
from elmo_features.util.paths import check_input_file, check_output_dir, folder_kind
from elmo_features.util.locking import OutputLock, lock_path_for
from elmo_features.model.precision import precision_of
from elmo_features.util.provenance import atomic_path

DTYPES = ("float32", "float16")
FORMAT_VERSION = 1


def bilm_fingerprint(bilm: BiLM) -> str:
    """sha256 over the options, the stateful/boundary flags, every state_dict tensor's bytes, the
    frozen token vectors, if any, and the inference precision when it is not fp32 (``precision.py``).

    Memoised on the model object (``_fingerprint_memo``); recomputed when any parameter was modified in place
    since (its version counter, storage or sum of values changed: an edit through ``param.data`` too).
    """
    if not isinstance(bilm, BiLM):
        raise TypeError(f"bilm_fingerprint: expected a BiLM (e.g. elmo_features.load_bilm(options, weights)), got "
                        f"{type(bilm).__name__} {bilm!r:.40}")
    fp = _weights_fingerprint(bilm)
    precision = precision_of(bilm)
    return fp if precision == "fp32" else hashlib.sha256(f"{fp}\nprecision={precision}".encode()).hexdigest()


def _weights_fingerprint(bilm: BiLM) -> str:
    """bilm_fingerprint without the precision."""
    sd = bilm.state_dict(keep_vars=True)
    tensors = list(sd.values()) + ([bilm.char_cnn.token_vectors.table] if bilm.char_cnn.token_vectors is not None else [])
    state = tensors_state(tensors)
    versions = None if state is None else (bool(bilm.stateful), bool(bilm.keep_sentence_boundaries), *state)
    memo = getattr(bilm, "_fingerprint_memo", None)
    if versions is not None and memo is not None and memo[0] == versions:
        return memo[1]
    h = hashlib.sha256()
    h.update(json.dumps(bilm.options.to_dict(), sort_keys=True).encode())
    h.update(f"stateful={bool(bilm.stateful)} boundaries={bool(bilm.keep_sentence_boundaries)}".encode())
    for name in sorted(sd):
        hash_tensor(h, name, sd[name])
    tv = bilm.char_cnn.token_vectors  # frozen word vectors (a non-persistent buffer, so not in the state_dict)
    if tv is not None:
        h.update(f"\ntoken_vectors lowercase={tv.lowercase}\n".encode() + "\n".join(tv.words).encode())
        h.update(tv.table.detach().cpu().contiguous().numpy().tobytes())
    fp = h.hexdigest()
    if versions is not None:
        bilm._fingerprint_memo = (versions, fp)  # (tensor versions, fingerprint)
    return fp


def hash_tensor(h, name: str, t: torch.Tensor) -> None:
    """Feed a named tensor (name, dtype, shape, bytes as stored) to the hash ``h``."""
    t = t.detach().cpu().contiguous()
    h.update(f"\n{name} {t.dtype} {tuple(t.shape)}\n".encode())
    h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")


def tensors_state(tensors: Sequence[torch.Tensor]) -> tuple | None:
    """(version counter, storage, content checksum) per tensor: it changes when any is modified in place. The
    version counters miss an edit through ``param.data`` (mul_, fill_, a row swap); the checksums do not. None
    for inference tensors (a model built under inference_mode), which have no version counter."""
    try:
        return tuple((t._version, t.data_ptr(), _checksum(t)) for t in tensors)
    except RuntimeError:
        return None


def _checksum(t: torch.Tensor) -> int | float:
    """CRC32 of a CPU tensor's bytes (any edit or move of a value changes it; read at memory speed in one thread,
    ~20x faster than the float64 weighted sum, the same whatever the thread count); on another device, where the
    bytes are not in host memory, the weighted sum computed there."""
    if t.device.type != "cpu":
        return _weighted_sum(t)
    flat = t.detach().reshape(-1)  # (N,) a view when contiguous
    return zlib.crc32(flat.contiguous().view(torch.uint8).numpy()) if flat.numel() else 0


_RAMP = 1 << 16  # values per row of the weighted sum's blocks
_BLOCK = 1 << 22  # values per block (32 MB in float64): memory stays bounded whatever the tensor's size


def _weighted_sum(t: torch.Tensor) -> float:
    """sum_i (i + 1) * t_i over the flattened values (in float64): moving values changes it, not only editing them.
    Computed block by block as sum_r (rows @ ramp + r * _RAMP * row sums): twice as fast as one product with an
    arange of the tensor's size, without two float64 copies of a large tensor, and the same whatever the thread
    count (one long product's split over threads is not)."""
    flat = t.detach().reshape(-1)  # (N,)
    n = flat.numel()
    ramp = torch.arange(1, min(n, _RAMP) + 1, dtype=torch.float64, device=flat.device)  # (min(N, _RAMP),)
    total = torch.zeros((), dtype=torch.float64, device=flat.device)
    for start in range(0, n, _BLOCK):
        block = flat[start:start + _BLOCK].double()  # (b,)
        full = block.numel() - block.numel() % _RAMP
        if full:
            rows = block[:full].reshape(-1, _RAMP)  # (R, _RAMP)
            offsets = torch.arange(start, start + full, _RAMP, dtype=torch.float64, device=flat.device)  # (R,)
            total += (rows @ ramp).sum() + offsets @ rows.sum(1)
        if full < block.numel():
            rest = block[full:]  # (b - full,)
            total += rest @ ramp[: rest.numel()] + (start + full) * rest.sum()
    return float(total)


def embedder_fingerprint(embedder) -> str:
    """The fingerprint of whatever an embedder runs: its own ``fingerprint`` (a Transformer encoder's, which
    covers its settings too), else its biLM's."""
    fp = getattr(embedder, "fingerprint", None)
    if not isinstance(fp, str) and not hasattr(embedder, "bilm"):
        raise TypeError(f"expected an embedder (elmo_features.Embedder or TransformerEmbedder), got "
                        f"{type(embedder).__name__} {embedder!r:.40}")
    return fp if isinstance(fp, str) else bilm_fingerprint(embedder.bilm)


def cache_key(fingerprint: str, sentences: Sequence[Sequence[str]], dtype: str) -> str:
    """sha256 of (model fingerprint, dtype, all sentences' tokens)."""
    h = hashlib.sha256(f"elmo-features-cache v{FORMAT_VERSION}\n{fingerprint}\n{dtype}\n".encode())
    for s in sentences:
        h.update(json.dumps(list(s), ensure_ascii=False).encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    return h.hexdigest()


class LazyFeatures(Sequence):
    """Read-only, h5py-backed per-sentence features: ``lf[i]`` -> float32 (L, n_i, D).

    The file is opened on first access (so the object pickles to worker processes); ``close()``
    or ``with`` releases it.
    """

    def __init__(self, path: str | Path):
        self.path = check_input_file(path, "LazyFeatures path")
        self._f: h5py.File | None = None
        try:
            with h5py.File(self.path, "r") as f:
                self._n = int(f.attrs["n_sentences"])
                self.num_output_layers = int(f.attrs["num_output_layers"])
                self.output_dim = int(f.attrs["output_dim"])
                # (entries written before the checks existed have neither: their arrays' L and D are still checked)
                self._lengths = f["lengths"][...] if "lengths" in f else None  # (n,)
                self._crc = f["crc32"][...] if "crc32" in f else None  # (n,)
        except (OSError, KeyError) as e:  # not HDF5, or HDF5 without a feature cache entry's attributes
            why = f"no {e.args[0]!r} attribute" if isinstance(e, KeyError) else " ".join(str(e).split())[:160]
            raise DamagedCacheError(f"{self.path}: not a feature cache entry ({why}); give a file of a --cache-dir "
                                    "(an embed output is read with h5py)") from None
        for name, a in (("lengths", self._lengths), ("crc32", self._crc)):
            if a is not None and a.shape != (self._n,):
                raise DamagedCacheError(f"feature cache file {self.path} is damaged (its {name} has shape {a.shape}, "
                                        f"not ({self._n},)); delete it and it will be recomputed")

    def _file(self) -> h5py.File:
        if self._f is None:
            self._f = h5py.File(self.path, "r")
        return self._f

    def __len__(self) -> int:
        return self._n

    def _equal(self, value) -> list[bool]:
        """Whether each sentence's array equals ``value`` (Sequence's ``in``, ``index`` and ``count`` compare arrays
        with ``==``, which is ambiguous for arrays: these compare shape and values)."""
        return [np.array_equal(self[k], value) for k in range(self._n)]

    def __contains__(self, value) -> bool:
        return any(self._equal(value))

    def index(self, value, start: int = 0, stop: int | None = None) -> int:
        hits = [k for k, same in enumerate(self._equal(value)) if same and k >= start and (stop is None or k < stop)]
        if not hits:
            raise ValueError(f"the array is not one of the sentences of {self.path}")
        return hits[0]

    def count(self, value) -> int:
        return sum(self._equal(value))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        try:  # an int, a NumPy integer, a 0-d integer array or tensor (a sampler's); never 1.5, "1" or True
            if isinstance(i, (bool, np.bool_)) or str(getattr(i, "dtype", "")) in ("bool", "torch.bool"):
                raise TypeError
            given = operator.index(i)
        except TypeError:
            raise TypeError(f"LazyFeatures indices must be integers or slices, got {type(i).__name__}: {i!r}") from None
        i = given + (self._n if given < 0 else 0)
        if not 0 <= i < self._n:
            raise IndexError(f"sentence index out of range: {given} (have {self._n}) in {self.path}")
        try:
            a = self._file()[str(i)][...]  # (L, n_i, D) as stored
        except (KeyError, OSError) as e:
            raise self._damaged(i, f"its array cannot be read: {' '.join(str(e).split())}") from None
        n = None if self._lengths is None else int(self._lengths[i])
        if a.ndim != 3 or a.shape[0] != self.num_output_layers or a.shape[2] != self.output_dim or (
                n is not None and a.shape[1] != n):
            raise self._damaged(i, f"shape {a.shape}, the entry records ({self.num_output_layers}, "
                                   f"{'n' if n is None else n}, {self.output_dim})")
        if self._crc is not None and zlib.crc32(np.ascontiguousarray(a)) != int(self._crc[i]):
            raise self._damaged(i, "its values do not match the checksum written with them")
        a = a.astype(np.float32, copy=False)
        if not np.isfinite(a).all():
            raise self._damaged(i, "NaN/Inf values")
        return a

    def _damaged(self, i: int, what: str) -> DamagedCacheError:
        return DamagedCacheError(f"feature cache file {self.path} is damaged (sentence {i}: {what}); delete it and it "
                                 "will be recomputed")

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self) -> "LazyFeatures":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_f"] = None
        return state


class FeatureCache:
    """One HDF5 file of features per (model, sentences, dtype) under ``cache_dir``."""

    def __init__(self, cache_dir: str | Path):
        if not isinstance(cache_dir, (str, os.PathLike)):
            raise TypeError(f"FeatureCache: cache_dir must be a str or a path, got {type(cache_dir).__name__}: "
                            f"{cache_dir!r}")
        if not str(cache_dir).strip():  # an unset variable: it would read as the current folder
            raise PathError(f"FeatureCache: cache_dir {str(cache_dir)!r} is empty (an unset variable?); give a folder")
        if str(cache_dir).strip().rstrip("/").lower() in OFF_WORDS:  # ("none" turns it off on the command line)
            raise PathError(f"FeatureCache: cache_dir {str(cache_dir)!r} would be a folder of that name; to embed "
                            "without a cache, use no FeatureCache (the command line's --cache-dir none)")
        if isinstance(cache_dir, os.PathLike) and os.fspath(cache_dir) == ".":  # Path("") is Path("."): unset too?
            raise PathError("FeatureCache: cache_dir is Path('.') (what Path('') gives: an unset variable?); to use "
                            "the current folder, pass the string '.'")
        self.cache_dir = check_output_dir(cache_dir, "FeatureCache")
        found = folder_kind(self.cache_dir)
        if found:  # (the command line refuses these folders as --cache-dir in the same words)
            raise PathError(f"FeatureCache: {self.cache_dir}: holds {found[0]}, so it is {found[1]}; the cache files "
                            "would be written among its files: give another folder")
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # a file on the way ("file/sub"), /proc, a read-only file system, ...
            raise PathError(f"FeatureCache: {self.cache_dir}: cannot be made ({e.strerror or e}); give another "
                            "folder") from None
        self.computed = 0  # how many times features were computed (not read) by this object

    def path_for(self, embedder, sentences: Sequence[Sequence[str]], dtype: str = "float32",
                 fingerprint: str | None = None) -> Path:
        """Where the features of ``sentences`` under the embedder's model are (or will be) stored (``fingerprint``:
        the embedder's, when the caller has it)."""
        _check_dtype(dtype)
        return self.cache_dir / f"{cache_key(fingerprint or embedder_fingerprint(embedder), sentences, dtype)}.hdf5"

    def ensure(self, embedder, sentences: Sequence[Sequence[str]], dtype: str = "float32") -> Path:
        """Compute and store the features unless a valid cache file exists; returns its path."""
        return self._ensure(embedder, sentences, dtype, keep=False)[0]

    def _ensure(self, embedder, sentences, dtype: str, keep: bool) -> tuple[Path, list[np.ndarray] | None]:
        """``ensure``; with ``keep``, also the arrays when this call computed them (as stored: ``dtype`` rounding)."""
        if len(sentences) == 0:
            raise ValueError("FeatureCache: no sentences to embed (empty input)")
        fingerprint = embedder_fingerprint(embedder)  # (once: hashing a large model's weights state takes a while)
        path = self.path_for(embedder, sentences, dtype, fingerprint)
        if self._valid(path, len(sentences)):
            return path, None
        # one writer per entry: another process computing the same entry is waited for, then reused
        lock = OutputLock(lock_path_for(path), f"the feature cache entry {path}")
        with lock.acquire(wait=True, on_wait=lambda who: print(
                f"feature cache: {who} is computing {path.name}; waiting for it", file=sys.stderr)):
            if not self._valid(path, len(sentences), quiet=True):
                return path, self._write(embedder, sentences, dtype, path, keep, fingerprint)
        return path, None

    @staticmethod
    def _valid(path: Path, n: int, quiet: bool = False) -> bool:
        """A complete, readable cache file for n sentences exists at ``path``."""
        if not path.exists():
            return False
        try:
            with h5py.File(path, "r") as f:  # (an entry copied onto another key's name records its own key)
                return (int(f.attrs["n_sentences"]) == n and all(str(i) in f for i in (0, n - 1))
                        and f.attrs.get("key", path.stem) == path.stem)
        except (OSError, KeyError, ValueError) as e:
            if not quiet:
                print(f"feature cache file {path} is unreadable ({' '.join(str(e).split())}); recomputing",
                      file=sys.stderr)
            return False

    def _write(self, embedder, sentences, dtype: str, path: Path, keep: bool = False,
               fingerprint: str | None = None) -> list[np.ndarray] | None:
        """Compute and store; with ``keep``, return the float32 arrays as stored (what reading the file gives).
        ``fingerprint``: the embedder's, when the caller has it."""
        kept: list[np.ndarray | None] | None = [None] * len(sentences) if keep else None
        lengths, crc = np.zeros(len(sentences), dtype=np.int64), np.zeros(len(sentences), dtype=np.uint32)
        with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
            f.attrs.update({"format_version": FORMAT_VERSION, "n_sentences": len(sentences), "dtype": dtype,
                            "key": path.stem,
                            "bilm_fingerprint": fingerprint or embedder_fingerprint(embedder),
                            "num_output_layers": embedder.num_output_layers,
                            "output_dim": embedder.output_dim})
            for idx, arrays in embedder.embed_batches(sentences):
                for i, a in zip(idx, arrays):
                    stored = np.ascontiguousarray(a.astype(dtype, copy=False))  # (L, n_i, D)
                    f.create_dataset(str(i), data=stored)
                    lengths[i], crc[i] = stored.shape[1], zlib.crc32(stored)
                    if kept is not None:
                        kept[i] = stored.astype(np.float32, copy=False)
            f.create_dataset("lengths", data=lengths)
            f.create_dataset("crc32", data=crc)
        self.computed += 1
        return kept  # type: ignore[return-value]

    def embed(self, embedder, sentences: Sequence[Sequence[str]], dtype: str = "float32") -> list[np.ndarray]:
        """Float32 arrays (L, n_i, D) in input order; ``dtype`` is the on-disk precision. Arrays computed by this call
        are returned as stored, without reading the file back."""
        path, arrays = self._ensure(embedder, sentences, dtype, keep=True)
        if arrays is not None:
            return arrays
        try:
            with LazyFeatures(path) as lf:
                return [lf[i] for i in range(len(lf))]
        except DamagedCacheError as e:  # a missing or misshapen array, a checksum, NaN/Inf: like an unreadable one
            print(f"{str(e).split('; delete it')[0]}; recomputing", file=sys.stderr)
        lock = OutputLock(lock_path_for(path), f"the feature cache entry {path}")
        with lock.acquire(wait=True):
            return self._write(embedder, sentences, dtype, path, keep=True)  # type: ignore[return-value]

    def embed_lazy(self, embedder, sentences: Sequence[Sequence[str]], dtype: str = "float32") -> LazyFeatures:
        """Like ``embed`` but returns an h5py-backed sequence (nothing loaded until indexed)."""
        return LazyFeatures(self.ensure(embedder, sentences, dtype))


def _check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"unknown feature dtype {dtype!r}; valid: {DTYPES}")

"""train-bilm's cached corpus (``out_dir/prep.npz``, ``types.txt``, ``vocab.txt``), and its key: what built it.

``out_dir/prep.json`` records the cache format, ``max_sentence_length``, every training file (resolved path,
size, mtime, sha256) and, once the vocabulary is built, ``vocab_size``. A later run in the same out_dir
reuses the cache only when all of these still hold (a file whose mtime changed is re-hashed: same bytes,
same cache); otherwise it is refused with a StaleCacheError that says what changed. Out_dirs written
before prep.json existed are adopted when their config.yaml names the same training data.
"""
from __future__ import annotations

import hashlib
import json
import sys
import zipfile
from pathlib import Path

import numpy as np
import yaml

from elmo_features.formats.download import file_sha256
from elmo_features.util.errors import CheckpointError, MissingPathError, OutputExistsError, PathError, StaleCacheError
from elmo_features.util.provenance import atomic_open, write_text_atomic
from elmo_features.util.text_input import iter_lines
from elmo_features.training.config import TrainConfig
from elmo_features.training.data import Corpus, build_corpus

PREP_FORMAT = 1  # bump when the layout or tokenization of prep.npz / types.txt changes
KEY_FILE = "prep.json"
CACHE_FILES = ("prep.npz", KEY_FILE, "types.txt", "vocab.txt")


def _entry(path: str, with_hash: bool) -> dict:
    p = Path(path).expanduser()
    try:
        st = p.stat()
    except FileNotFoundError:
        raise MissingPathError(f"training file not found: {p}") from None
    e = {"path": str(p.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    if with_hash:
        e["sha256"] = file_sha256(p)
    return e


def prep_key(cfg: TrainConfig, with_hashes: bool = False) -> dict:
    """The key of the corpus ``cfg`` gives (file hashes only when ``with_hashes``: they read every file)."""
    return {"format": PREP_FORMAT, "max_sentence_length": cfg.max_sentence_length,
            "files": [_entry(p, with_hashes) for p in cfg.train_files]}


def read_prep_key(out: Path) -> dict | None:
    path = out / KEY_FILE
    if not path.exists():
        return None
    try:
        key = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise StaleCacheError(f"{path}: damaged; {_fix(out)}") from None
    if not isinstance(key, dict) or not isinstance(key.get("files"), list):
        raise StaleCacheError(f"{path}: damaged; {_fix(out)}")
    return key


def write_prep_key(out: Path, key: dict) -> None:
    """Replace prep.json (atomically)."""
    write_text_atomic(out / KEY_FILE, json.dumps(key, indent=1) + "\n")


def update_prep_key(out: Path, **fields) -> None:
    """Add ``fields`` to prep.json."""
    write_prep_key(out, {**(read_prep_key(out) or {}), **fields})


def _fix(out: Path) -> str:
    files = ", ".join(CACHE_FILES)
    return (f"this out_dir holds another run's data: choose another out_dir, or delete {files} (and checkpoint.pt) "
            f"in {out} to rebuild")


CACHE_DIGESTED = ("prep.npz", "types.txt")  # the corpus cache's own files, whose sha256 its key records


def record_cache_digests(out: Path) -> None:
    """Add the sha256 of the cache's own files to prep.json (after they are written)."""
    update_prep_key(out, cache_sha256={n: file_sha256(out / n) for n in CACHE_DIGESTED})


def _cache_replaced(key: dict, out: Path) -> str | None:
    """The cache file that is not the one its key was written with (copied from another out_dir, edited), or None
    (also for a key written before the digests were recorded)."""
    saved = key.get("cache_sha256")
    if not isinstance(saved, dict):
        return None
    return next((n for n in CACHE_DIGESTED if (out / n).is_file() and saved.get(n) != file_sha256(out / n)), None)


def check_prep_key(cfg: TrainConfig, out: Path) -> bool:
    """Refuse (StaleCacheError) an out_dir/prep.npz built from other training data than ``cfg`` names. True: the
    cache may be used; False: it has no key, or files that are not its key's, and no checkpoint, so it is rebuilt
    (its content cannot be checked)."""
    key = read_prep_key(out)
    replaced = key is not None and _cache_replaced(key, out)
    if replaced:
        if (out / "checkpoint.pt").exists():
            raise StaleCacheError(f"{out / replaced}: does not match the sha256 its key ({KEY_FILE}) recorded "
                                  f"(damaged, edited, or copied from another out_dir); delete {out / 'prep.npz'} to "
                                  "rebuild it")
        print(f"{out}: {replaced} is not the file {KEY_FILE} was written with; preparing the corpus again",
              file=sys.stderr)
        return False
    if key is None:
        if not (out / "checkpoint.pt").exists():  # a fresh start: preparing the corpus again costs what it always does
            print(f"{out}: {out / 'prep.npz'} has no key ({KEY_FILE}), so nothing says what it holds; preparing the "
                  "corpus again", file=sys.stderr)
            return False
        _adopt_legacy(cfg, out)  # a resume: the checkpoint's corpus digest is checked against the key written here
        return True
    problems = []
    if key.get("format") != PREP_FORMAT:
        problems.append(f"cache format {key.get('format')!r}, this version needs {PREP_FORMAT}")
    if key.get("max_sentence_length") != cfg.max_sentence_length:
        problems.append(f"max_sentence_length {key.get('max_sentence_length')} -> {cfg.max_sentence_length}")
    now = prep_key(cfg)["files"]
    old = key["files"]
    refreshed = False
    if [e.get("path") for e in old] != [e["path"] for e in now]:
        if _moved_same_content(old, now):  # e.g. the whole project folder moved: same files, other paths
            for o, n in zip(old, now):
                o["path"], o["mtime_ns"] = n["path"], n["mtime_ns"]
            refreshed = True
        else:
            problems.append(f"train_files {[e.get('path') for e in old]} -> {[e['path'] for e in now]}")
    else:
        for o, n in zip(old, now):
            if o.get("size") != n["size"]:
                problems.append(f"{n['path']} changed (size {o.get('size')} -> {n['size']} bytes)")
            elif o.get("mtime_ns") != n["mtime_ns"]:
                if o.get("sha256") != file_sha256(n["path"]):
                    problems.append(f"{n['path']} changed (new content)")
                else:
                    o["mtime_ns"] = n["mtime_ns"]  # touched or copied, same bytes
                    refreshed = True
    if problems:
        raise StaleCacheError(f"{out / 'prep.npz'} was built from other training data ({'; '.join(problems)}); "
                              + _fix(out))
    if refreshed:
        write_prep_key(out, key)
    return True


def _moved_same_content(old: list, now: list) -> bool:
    """The training files at other paths hold, one for one, the bytes the key records (size, then sha256)."""
    return len(old) == len(now) and all(o.get("size") == n["size"] for o, n in zip(old, now)) and all(
        o.get("sha256") == file_sha256(n["path"]) for o, n in zip(old, now))


def check_vocab_key(cfg: TrainConfig, out: Path) -> bool:
    """True when out/vocab.txt was built with cfg.vocab_size from the cached corpus; False when unknown
    (it is rebuilt); a vocabulary built with another vocab_size is refused."""
    key = read_prep_key(out) or {}
    if "vocab_size" not in key or key.get("vocab_file") != cfg.vocab_file:
        return False
    if key["vocab_size"] != cfg.vocab_size:
        raise StaleCacheError(f"{out / 'vocab.txt'} was built with vocab_size {key['vocab_size']}, the config says "
                              f"{cfg.vocab_size}; " + _fix(out))
    return True


def corpus_digest(out: Path) -> str | None:
    """sha256 over the cached corpus' key (file contents and settings, not paths): ties a checkpoint to it."""
    key = read_prep_key(out)
    if key is None or any("sha256" not in e for e in key["files"]):
        return None
    content = [key.get("format"), key.get("max_sentence_length"), [[e["size"], e["sha256"]] for e in key["files"]]]
    return hashlib.sha256(json.dumps(content).encode()).hexdigest()


def input_digests(cfg: TrainConfig, out: Path) -> dict:
    """sha256 of the held-out file and of out/vocab.txt (None when absent): a checkpoint records them, and a
    resume checks them (``check_resume_inputs``)."""
    held = Path(cfg.heldout_file).expanduser() if cfg.heldout_file else None
    vocab = out / "vocab.txt"
    return {"heldout_digest": file_sha256(held) if held is not None and held.is_file() else None,
            "vocab_digest": file_sha256(vocab) if vocab.is_file() else None}


def check_resume_inputs(saved: dict, now: dict, cfg: TrainConfig, out: Path, ckpt: Path) -> None:
    """Refuse a resume whose held-out file or out/vocab.txt changed since the checkpoint (``saved``: its state)
    was written; a checkpoint of an older version without the digests is not checked."""
    was, new = saved.get("heldout_digest"), now["heldout_digest"]
    if was and new and was != new:
        raise CheckpointError(f"heldout_file {cfg.heldout_file} changed since {ckpt} was saved (sha256 {was[:12]}... "
                              f"-> {new[:12]}...): the learning curve would mix two held-out sets; resume with the "
                              "held-out file the run started with, or choose another out_dir")
    was, new = saved.get("vocab_digest"), now["vocab_digest"]
    if was and was != new:
        raise CheckpointError(f"{out / 'vocab.txt'} changed since {ckpt} was saved (sha256 {was[:12]}... -> "
                              f"{(new or 'missing')[:12]}...): the softmax rows would mean other words; restore it, "
                              "or choose another out_dir")


def _adopt_legacy(cfg: TrainConfig, out: Path) -> None:
    """prep.npz without prep.json beside a checkpoint (written by an older version, or prep.json deleted): keep it
    when out/config.yaml names the same training data, and write its key (with the files' sha256, which the resume
    compares with the checkpoint's corpus digest); otherwise refuse."""
    saved_path = out / "config.yaml"
    try:
        saved = yaml.safe_load(saved_path.read_text(encoding="utf-8")) if saved_path.exists() else None
    except (UnicodeDecodeError, yaml.YAMLError):
        saved = None
    if not isinstance(saved, dict):
        raise StaleCacheError(f"{out / 'prep.npz'} has no key ({KEY_FILE}) and no readable config.yaml says what "
                              "built it; " + _fix(out))
    same_files = [str(Path(p).expanduser().resolve()) for p in saved.get("train_files") or []] == \
                 [str(Path(p).expanduser().resolve()) for p in cfg.train_files]
    problems = [] if same_files else [f"train_files {saved.get('train_files')} -> {cfg.train_files}"]
    if saved.get("max_sentence_length", 100) != cfg.max_sentence_length:
        problems.append(f"max_sentence_length {saved.get('max_sentence_length')} -> {cfg.max_sentence_length}")
    if problems:
        raise StaleCacheError(f"{out / 'prep.npz'} was built from other training data ({'; '.join(problems)}); "
                              + _fix(out))
    _check_not_newer(cfg, out)
    key = prep_key(cfg, with_hashes=True)
    if (out / "vocab.txt").exists() and "vocab_size" in saved:
        key["vocab_size"] = saved["vocab_size"]
    write_prep_key(out, key)
    print(f"{out}: recorded the key of the cached corpus in {KEY_FILE}, which was missing", file=sys.stderr)


def _check_not_newer(cfg: TrainConfig, out: Path) -> None:
    """Refuse to adopt a keyless prep.npz when a training file was modified after it was written: the cache may hold
    the file's earlier text, and nothing records which."""
    written = (out / "prep.npz").stat().st_mtime_ns
    for p in cfg.train_files:
        if Path(p).expanduser().stat().st_mtime_ns > written:
            raise StaleCacheError(f"{out / 'prep.npz'} has no key ({KEY_FILE}) and {p} was modified after it was "
                                  "written: the cache may hold the file's earlier text; " + _fix(out))


RUN_MARKERS = ("prep.json", "prep.npz", "checkpoint.pt")  # a train-bilm out_dir holds one of these (older: prep.npz)


def check_out_dir_is_ours(out: Path) -> None:
    """out_dir is empty or a train-bilm folder: any other folder's files (a task run's config.yaml) would be replaced."""
    names = {p.name for p in out.iterdir()} - {"train.lock"} if out.is_dir() else set()
    if names and not names.intersection(RUN_MARKERS):
        shown = ", ".join(sorted(names)[:3]) + (", ..." if len(names) > 3 else "")
        raise PathError(f"out_dir {out} holds other files ({shown}) and is not a train-bilm folder (no "
                                f"{' / '.join(RUN_MARKERS)}): choose an empty or new out_dir")


def check_no_earlier_results(out: Path) -> None:
    """A fresh start (no checkpoint) must not replace the export/ and curve.json of an earlier run that stopped
    before its first checkpoint (killed, or a closed terminal): refused, naming them and the tokens they reached."""
    found = [name for name in ("export/", "curve.json") if (out / name.rstrip("/")).exists()]
    if not found:
        return
    try:
        reached = f" ({int(json.loads((out / 'curve.json').read_text(encoding='utf-8'))[-1]['tokens']):,} tokens)"
    except (OSError, ValueError, TypeError, KeyError, IndexError):
        reached = ""
    raise OutputExistsError(f"out_dir {out} holds {' and '.join(found)} of an earlier run{reached} that left no "
                            "checkpoint to resume from; a fresh start would replace them: move them away or choose "
                            "another out_dir")


def load_or_build_corpus(cfg: TrainConfig, out: Path) -> Corpus:
    """The tokenized corpus, cached in ``out/prep.npz`` so that a resumed run starts fast.

    The cache is keyed (``out/prep.json``, see ``elmo_features.training.prep_cache``) by the training files and
    max_sentence_length; a cache built from other inputs is refused, never silently reused."""
    prep = out / "prep.npz"
    if prep.exists() and check_prep_key(cfg, out):
        try:
            z = np.load(prep, allow_pickle=False)
            offsets = z["offsets"]
            flat = z["flat"]
            counts = z["counts"]
            types = [t for _, t in iter_lines(out / "types.txt")]
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:  # a truncated or foreign file
            raise StaleCacheError(f"{prep}: damaged cache ({' '.join(str(e).split())[:200] or type(e).__name__}); "
                                  f"delete {prep} to rebuild it") from None
        if len(types) != len(counts) or offsets[-1] != len(flat):
            raise StaleCacheError(f"{prep}: does not match {out / 'types.txt'} (damaged cache); delete {prep} "
                                  "to rebuild it")
        sentences = [flat[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]
        return Corpus(types, counts, sentences)
    corpus = build_corpus(cfg.train_files, cfg.max_sentence_length)
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in corpus.sentences])]).astype(np.int64)
    write_prep_key(out, prep_key(cfg, with_hashes=True))  # first: prep.npz (written last) marks a complete cache
    write_text_atomic(out / "types.txt", "\n".join(corpus.types) + "\n")
    with atomic_open(prep) as f:
        np.savez(f, flat=np.concatenate(corpus.sentences), offsets=offsets, counts=corpus.counts)
    record_cache_digests(out)  # a cache copied from another out_dir is then told apart
    return corpus

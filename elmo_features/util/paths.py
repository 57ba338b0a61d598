"""Input and output path checks, run before any work starts (docs/reliability.md).

Each check raises a ``PathError`` (``MissingPathError`` for a missing input) whose one-line message names
the path, what it is for (``what``) and what to do. Nothing is created: an output's missing parent folders
are fine as long as they can be created (the nearest existing ancestor is a writable folder).
"""
from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from elmo_features.util.errors import MissingPathError, OutputExistsError, PathError


def _check_not_a_loop(p: Path, what: str) -> None:
    """A symlink that leads back to itself (``a -> b -> a``) is a PathError naming it (it has no target to write)."""
    if not p.is_symlink():
        return
    try:
        p.resolve(strict=True)
    except (RuntimeError, OSError) as e:
        if isinstance(e, RuntimeError) or getattr(e, "errno", None) == errno.ELOOP:
            raise PathError(f"{what}: {p} is a symlink loop ({p} -> {os.readlink(p)} -> ...); give another path") \
                from None


def _nearest_existing(path: Path, what: str) -> Path:
    """The nearest existing ancestor of ``path`` (or itself); a dangling symlink or a symlink loop on the way is a
    PathError (making the folders would fail with "File exists")."""
    p = path
    while not p.exists():
        _check_not_a_loop(p, what)
        if p.is_symlink():
            raise PathError(f"{what}: {p} is a symlink to {os.readlink(p)}, which does not exist; create the target "
                            "folder, or give another path")
        if p.parent == p:
            return p
        p = p.parent
    return p


def _check_creatable(path: Path, what: str, writable: bool = True) -> None:
    """The folder ``path`` exists as a (``writable``) folder or can be created."""
    base = _nearest_existing(path, what)
    if not base.is_dir():
        raise PathError(f"{what}: cannot create {path}: {base} is a file, not a folder; choose another path")
    if writable and not os.access(base, os.W_OK | os.X_OK):
        raise PathError(f"{what}: cannot write to {base} ({why_unwritable(base)}); choose another path")


def why_unwritable(path: str | os.PathLike) -> str:
    """Why ``path`` (which exists) cannot be written, in words: "a read-only file system" (a mount that
    ``chmod`` cannot change), else "permission denied"."""
    try:
        read_only = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, ValueError, AttributeError):  # (no statvfs: not a POSIX system)
        read_only = False
    return "a read-only file system" if read_only else "permission denied"


def is_stream(path: str | os.PathLike) -> bool:
    """``path`` is (or links to) a pipe, socket or character device (``/dev/stdout``, ``>(gzip > f.gz)``, a named
    pipe, ``/dev/null``): an output that is written in place, as it comes, since it cannot be replaced."""
    try:
        mode = os.stat(Path(path).expanduser()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)


def check_output_file(path: str | os.PathLike, what: str = "output", example: str = "out.hdf5") -> Path:
    """An output file path: not a folder (``example``: a file name to suggest in it), and its folder exists writable
    or can be created (a stream: writable); not ``-``, which a command with text output takes as standard output
    before this check."""
    _refuse_dash(path, what, "a file")
    p = Path(path).expanduser()
    _check_name_room(p, what)
    _check_not_a_loop(p, what)
    if str(path).endswith(("/", os.sep)) or p.is_dir():
        raise PathError(f"{what}: {p} is a folder; give a file name (e.g. {p / example})")
    if p.exists() and not os.access(p, os.W_OK):
        raise PathError(f"{what}: {p} exists and is not writable" + (
            " (a read-only file system); choose another path" if why_unwritable(p) != "permission denied" else
            "; choose another path or fix its permissions"))
    if not is_stream(p):
        _check_creatable(p.parent if str(p.parent) else Path("."), what)
    return p


def undecodable_byte(text: str) -> int | None:
    """The first byte of ``text`` that was not valid UTF-8 (Python decodes it as a ``\\udc80``-``\\udcff``
    surrogate: a file name or command-line argument in another encoding), else None."""
    return next((ord(c) - 0xDC00 for c in text if "\udc80" <= c <= "\udcff"), None)


def show_bytes(text: str) -> str:
    """``text`` with each byte that was not valid UTF-8 shown as ``\\xNN``."""
    return "".join(f"\\x{ord(c) - 0xDC00:02x}" if "\udc80" <= c <= "\udcff" else c for c in text)


def check_utf8_path(path: str | os.PathLike, what: str) -> None:
    """An output path (with the folders it is in) that is not valid UTF-8 cannot be recorded in the UTF-8 JSON and
    YAML files a run writes: one PathError, before any work."""
    byte = undecodable_byte(os.path.abspath(os.fspath(path)))
    if byte is not None:
        raise PathError(f"{what}: '{show_bytes(os.path.abspath(os.fspath(path)))}' is not valid UTF-8 (byte "
                        f"0x{byte:02x}; the outputs record their paths in UTF-8 JSON/YAML); give a UTF-8 name")


TEMP_NAME_EXTRA = 14  # bytes a temporary sibling adds to an output's name (".NAME.xxxxxxxx.tmp"; ".partial" is 8)


def _check_name_room(p: Path, what: str) -> None:
    """An output name long enough to be valid, but whose temporary sibling (written first, then renamed) would
    exceed the file system's name limit: one PathError saying how long it may be (not "NAME.partial: File name too
    long", naming a file the user never gave)."""
    folder = next((a for a in [p.parent, *p.parent.parents] if a.exists()), Path("."))
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    n = len(p.name.encode("utf-8", "surrogateescape"))
    if n <= limit < n + TEMP_NAME_EXTRA:
        raise PathError(f"{what}: the file name is {n} bytes; while it is written, a temporary file beside it needs "
                        f"{TEMP_NAME_EXTRA} more, beyond this file system's limit of {limit}: shorten it to at most "
                        f"{limit - TEMP_NAME_EXTRA} bytes")


def _refuse_dash(path, what: str, kind: str) -> None:
    """``-`` as an output that cannot be standard output (HDF5, a folder): one PathError, not a file named ``-``."""
    if str(path) == "-":
        raise PathError(f"{what}: '-' would be a {kind.split()[-1]} named '-': this output cannot go to standard "
                        f"output; give {kind} name")


def check_output_dir(path: str | os.PathLike, what: str = "output folder", writable: bool = True) -> Path:
    """An output folder: an existing writable folder, or one that can be created, whose path is valid UTF-8.
    ``writable=False``: a folder that is only read for now (a cache whose files are looked up) may be read-only."""
    _refuse_dash(path, what, "a folder")
    try:
        p = Path(path).expanduser()
    except RuntimeError:  # "~nosuchuser/..."
        raise PathError(f"{what}: {path}: no such user's home folder for '~'; give the folder in full") from None
    check_utf8_path(p, what)
    if p.exists() and not p.is_dir():
        raise PathError(f"{what}: {p} is a file, not a folder; choose another path")
    _check_creatable(p, what, writable)
    return p


def special_kind(path: str | os.PathLike) -> str | None:
    """What ``path`` (links followed) is when it exists but is no regular file or folder: "a named pipe",
    "a socket", "a character device" or "a block device"; else None."""
    try:
        mode = os.stat(Path(path).expanduser()).st_mode
    except (OSError, ValueError):
        return None
    kinds = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"))
    return next((name for test, name in kinds if test(mode)), None)


REREAD_NOTE = "this input is read more than once (checks, sha256, reader): save it to a file first"


def _not_found(p: Path, what: str, hint: str) -> str:
    """The message for a missing input: a symlink that points nowhere, or at itself through others, is said so."""
    if os.path.islink(p):
        try:
            os.stat(p)
        except OSError as e:
            if e.errno == errno.ELOOP:
                return f"{what}: {p} is a symbolic link loop (it leads back to itself); point it at the real file"
        return f"{what}: {p} is a symbolic link to {os.readlink(p)}, which does not exist" + \
            (f"; {hint}" if hint else "")
    return f"{what}: {p} not found" + (f"; {hint}" if hint else "")


def check_input_file(path: str | os.PathLike, what: str = "input", hint: str = "", regular: bool = False) -> Path:
    """An existing, readable file (``hint``: what to do when it is missing, e.g. a ``data get`` command).
    ``regular``: a file read more than once, so a named pipe, socket or device is refused (naming what it is)."""
    p = Path(path).expanduser()
    if not p.exists():
        raise MissingPathError(_not_found(p, what, hint))
    if p.is_dir():
        raise PathError(f"{what}: {p} is a folder; give a file")
    kind = special_kind(p) if regular else None
    if kind:
        raise PathError(f"{what}: {p} is {kind}, not a regular file; {REREAD_NOTE}")
    if not os.access(p, os.R_OK):
        raise PathError(f"{what}: {p} is not readable (permission denied)")
    return p


def check_input_dir(path: str | os.PathLike, what: str = "input folder", needs: tuple[str, ...] = (),
                    hint: str = "") -> Path:
    """An existing, readable folder holding the files ``needs``."""
    p = Path(path).expanduser()
    if not p.exists():
        raise MissingPathError(_not_found(p, what, hint))
    if not p.is_dir():
        raise PathError(f"{what}: {p} is a file; give a folder")
    if not os.access(p, os.R_OK | os.X_OK):
        raise PathError(f"{what}: {p} cannot be read (permission denied); fix its permissions or give another folder")
    missing = [n for n in needs if not (p / n).exists()]
    if missing:
        raise MissingPathError(f"{what}: {p} has no {', '.join(missing)}" + (f"; {hint}" if hint else ""))
    return p


def check_input_path(path: str | os.PathLike, what: str = "input", hint: str = "") -> Path:
    """An existing, readable file or folder."""
    p = Path(path).expanduser()
    if not p.exists():
        raise MissingPathError(_not_found(p, what, hint))
    if not os.access(p, os.R_OK):
        raise PathError(f"{what}: {p} is not readable (permission denied)")
    return p


def _files_of(path: Path) -> list[Path]:
    """``path`` itself (a file), or every file under it (a folder: a run folder, a WordNet dict, ...)."""
    if not path.is_dir():
        return [path]
    return [Path(root) / n for root, _, names in os.walk(path) for n in names]


def check_not_an_input(output: str | os.PathLike, inputs, what: str = "output",
                       suffixes: tuple[str, ...] = (".partial",)) -> None:
    """Refuse an output path (or the ``output + suffix`` files it is built in) that is one of the command's inputs,
    by any name (symlinks, hard links, ``sub/..``); an input folder's files count as inputs (PathError naming both)."""
    out = Path(output).expanduser()
    candidates = [out] + [Path(str(out) + s) for s in suffixes]
    real = {os.path.realpath(c) for c in candidates}  # symlinks, ``sub/..`` (even when ``sub`` is still to be made)
    existing = [c for c in candidates if c.exists()]  # (and hard links: the same file by its inode)
    for inp in inputs:
        if inp is None or str(inp) == "-" or not Path(inp).expanduser().exists():
            continue
        src = Path(inp).expanduser()
        for f in _files_of(src):
            if os.path.realpath(f) in real or (f.exists() and any(os.path.samefile(c, f) for c in existing)):
                where = (f"the input file {inp}" if f == src else
                         f"the file {f.relative_to(src)} of the input folder {inp}")
                raise PathError(f"{what}: {output} is {where}; writing it would destroy the input. "
                                "Choose another output path")


RUN_FOLDER_FILES = ("config.yaml", "vocab.json", "model.pt", "predictions.json", "metrics.json")  # what `run` writes
RUN_MODEL_FILES = RUN_FOLDER_FILES[:3]  # what reloading a run reads
# The folders the commands own, by the files each writes there: a folder holding two of one kind's files is that
# kind's folder, and none of those files is replaced by another command's output (even with --force).
OWNED_FOLDERS = (
    (RUN_FOLDER_FILES, "the run folder", "the run"),
    (("config.yaml", "checkpoint.pt", "curve.json", "prep.json", "prep.npz", "types.txt", "vocab.txt",
      "options.json", "weights.hdf5"), "the biLM training folder (or export)", "the trained biLM"),
    (("summary.json", "summary.md", "summary.csv", "scores.png", "mix_weights.png"), "the results folder",
     "the comparison's summary"),
    (("scores.json", "table5.md", "f1_per_layer.png"), "the WSD results folder", "the WSD table"),
)


def check_flags_given(args, *names: str, what: str = "path") -> None:
    """Options given as ``""`` (e.g. ``--out ""``): one PathError each, never taken as 'not given'."""
    for name in names:
        value = getattr(args, name, None)
        if any(not str(v).strip() for v in (value if isinstance(value, list) else [value]) if v is not None):
            raise PathError(f"--{name.replace('_', '-')}: empty {what}; give one or leave the option out")


def is_text_file(path: Path) -> bool:
    """UTF-8 text without NUL bytes (a prediction or JSON lines output), judged by its first 64 KiB."""
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 4:  # (a multi-byte character cut at the 64 KiB boundary is fine)
            return False
    return b"\0" not in head


def check_own_output(path: str | os.PathLike, what: str, kind: str, is_own) -> None:
    """An existing output file is replaced only when it is this command's own kind (``is_own(path)``, ``kind``
    describes it) and not a file of a run folder; else a PathError naming the file and what it is. A pipe or device
    is refused unless the output is text (``is_own`` is ``is_text_file``): a binary output is renamed into place."""
    p = Path(path).expanduser()
    if is_stream(p):  # a pipe or device is written in place: only a text output can be (never renamed over it)
        if is_own is is_text_file:
            return
        raise PathError(f"{what}: {p} is a pipe, socket or device, not a regular file; {kind} is written to a "
                        "regular file (it would otherwise replace the device): give a file path")
    if not p.is_file():
        return
    p = Path(os.path.realpath(p))  # a symlink's target is what the write replaces
    for files, folder, loses in OWNED_FOLDERS:
        present = [n for n in files if (p.parent / n).is_file()]
        if p.name in files and len(present) >= 2:
            beside = ", ".join(n for n in present if n != p.name)
            raise PathError(f"{what}: {p} is a file of {folder} {p.parent} (beside {beside}); writing it would "
                            f"destroy {loses}: choose another path")
    try:
        own = is_own(p)
    except OSError:
        own = False
    if not own:
        raise PathError(f"{what}: {p} exists and is not {kind}; it would be replaced: choose another path, or "
                        "remove it first")


def check_plain_file(path: str | os.PathLike, what: str) -> None:
    """``path``, when it exists, is a regular file of its own: not a symlink and not a hard link with other names (a
    file written in place there would overwrite what the link points to); else a PathError naming it."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise PathError(f"{path} is a symlink (to {os.readlink(path)}), not {what}; writing it would replace what it "
                        "points to: remove it, then run again")
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise PathError(f"{path} is a hard link to a file with other names, not {what}; writing it would replace "
                        "that file's content: remove it, then run again")


def check_text_output(out: str | os.PathLike | None, what: str = "--out") -> None:
    """A text output (predictions, JSON lines; None: stdout): a writable file that is none of a run folder's files
    and, when it exists, a text file (an earlier output), never e.g. a model or an HDF5 file."""
    if out is not None:
        check_output_file(out, what, "out.txt")
        check_own_output(out, what, "a text file (an earlier output of this command)", is_text_file)


def check_no_overwrite(out: str | os.PathLike | None, force: bool, command: str, what: str = "--out") -> None:
    """An existing output file (or symlink) is replaced only with ``--force``; a pipe or device needs none (nothing
    on disk is lost). Else one OutputExistsError naming it and ``command``, the command as typed with --force."""
    if out is not None and not force and os.path.lexists(out) and not is_stream(out):
        raise OutputExistsError(f"{what} {out} exists; give another file, or replace it with --force: {command}")


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """``a`` and ``b`` name one file (the same inode: symlinks and hard links too), or one path when absent."""
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    try:
        return pa.samefile(pb)
    except OSError:
        return pa.resolve() == pb.resolve()


ENCODER_WEIGHTS = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
                   "pytorch_model.bin.index.json")  # (single files, or a sharded checkpoint's index)
_BILM = "a biLM's model folder"
_ENCODER = "an encoder's model folder"
FOLDER_KINDS = {"summary.json": "a comparison's results folder", "scores.json": "a WSD table's folder",
                ".data_sha256.json": "a comparison's runs folder", "options.json": _BILM, "weights.hdf5": _BILM,
                "*_options.json": _BILM, "*_weights.hdf5": _BILM, "checkpoint.pt": "a train-bilm run folder",
                "config.json": _ENCODER, **{w: _ENCODER for w in ENCODER_WEIGHTS},
                "index.sense": "a WordNet folder", "data.noun": "a WordNet folder",
                "*.data.xml": "a WSD data folder"}  # a file (or a pattern) -> the folder it marks
COMPANIONS = {"summary.json": ("summary.md",), "scores.json": ("table5.md",), "options.json": ("weights.hdf5",),
              "weights.hdf5": ("options.json",), "checkpoint.pt": ("vocab.txt",), "config.json": ENCODER_WEIGHTS,
              **{w: ("config.json",) for w in ENCODER_WEIGHTS}, "data.noun": ("index.sense",)}  # a marker counts
# only beside one of these (one common file name alone, such as a user's options.json or a Keras weights.hdf5, marks
# nothing); index.sense and *.data.xml are recognised by their content, AllenNLP's *_options.json by its
# *_weights.hdf5 of the same prefix
CACHE_DIR_FORBIDDEN = tuple(FOLDER_KINDS)  # a frozen-feature cache is none of these
INPUT_FOLDERS = tuple(n for n in FOLDER_KINDS if n not in ("summary.json", "scores.json", ".data_sha256.json"))
# folders of models, data sets and training runs (inputs of other commands)
SENSE_INDEX_LINE = re.compile(rb"\S+%[1-5]:\d\d:\d\d:\S*:\S* \d{8} \d+ \d+")  # WordNet's index.sense


def _holds(folder: Path, name: str) -> str | None:
    """The file of ``folder`` that ``name`` (a file name, or a ``*`` pattern) stands for, or None: a marker counts
    beside one of its ``COMPANIONS``; ``index.sense`` and ``*.data.xml`` by their first lines."""
    files = [p for p in sorted(folder.glob(name)) if p.is_file()]
    if name == "index.sense":
        return next((p.name for p in files if SENSE_INDEX_LINE.match(_head(p, 256))), None)
    if name == "*.data.xml":
        return next((p.name for p in files if b"<corpus" in _head(p, 65536)), None)
    if name in ("*_options.json", "*_weights.hdf5"):  # AllenNLP's download: one prefix, both files
        other = "_weights.hdf5" if name == "*_options.json" else "_options.json"
        return next((p.name for p in files if (folder / (p.name.rsplit("_", 1)[0] + other)).is_file()), None)
    need = COMPANIONS.get(name)
    ok = need is None or any(p.is_file() for c in need for p in folder.glob(c))
    return files[0].name if files and ok else None


def _head(path: Path, n: int) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


def folder_kind(folder: str | os.PathLike, names: tuple[str, ...] = CACHE_DIR_FORBIDDEN) -> tuple[str, str] | None:
    """(the file found, the kind of folder it marks: ``FOLDER_KINDS``) for the first of ``names`` that ``folder``
    holds, or None (also when it is no folder)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    return next(((f, FOLDER_KINDS.get(n, "a results folder")) for n in names for f in [_holds(folder, n)] if f), None)


def beside_config_hint(path: str, config_file: str | None) -> str:
    """For a relative path missing from the current folder that exists next to the config file (or next to the file
    a symlinked config points to): what to do, since relative paths resolve against the current folder; else ''."""
    if not config_file or Path(path).expanduser().is_absolute() or Path(path).exists() or \
            not Path(config_file).is_file():
        return ""
    for folder in dict.fromkeys((Path(config_file).parent, Path(config_file).resolve().parent)):
        if (folder / path).exists():
            return (f"relative paths resolve against the current folder ({Path.cwd()}), and it exists next to the "
                    f"config ({os.path.normpath(folder / path)}): run from {folder}, or give an absolute path")
    return ""

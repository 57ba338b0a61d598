"""Hugging Face ``datasets``: read a hub data set (online only) or a local file/folder (always offline),
and convert our examples to an in-memory ``datasets.Dataset``."""
from __future__ import annotations

import json
import os
from pathlib import Path
from collections.abc import Sequence

from elmo_features.util.errors import ConfigError

from elmo_tasks.registry import READERS
from elmo_tasks.data.tag_schemes import TagSchemeError, check_scheme_name, convert_data, split_tag
from elmo_tasks.data.tokenizer import get_tokenizer
from elmo_tasks.data.types import DataFormatError, LabeledSentence, TaggedSentence

_LOCAL_BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".tsv": "csv", ".parquet": "parquet",
                   ".arrow": "arrow"}
TEXT_COLUMNS = ("text", "sentence", "review", "content", "document")
LABEL_COLUMNS = ("label", "labels", "sentiment", "class")
TOKENS_COLUMNS = ("tokens", "words")
TAGS_COLUMNS = ("tags", "ner_tags", "ner", "pos_tags", "chunk_tags")


def _load(path: str, split: str, config: str | None):
    import datasets  # lazy: HF datasets is slow to import and only the hf reader needs it

    p = Path(path)
    if p.is_dir():
        if (p / "dataset_info.json").exists() or (p / "dataset_dict.json").exists() or (p / "state.json").exists():
            ds = datasets.load_from_disk(str(p))
            if isinstance(ds, datasets.DatasetDict):
                if split not in ds:
                    raise DataFormatError(f"no split {split!r}; splits: {', '.join(ds)} (reader option split)", p)
                ds = ds[split]
            return ds
        return datasets.load_dataset(str(p), config, split=split)
    if p.is_file():
        builder = _LOCAL_BUILDERS.get(p.suffix.lower())
        if builder is None:
            raise DataFormatError(f"unsupported file type {p.suffix!r} for the hf reader; valid: "
                                  f"{', '.join(sorted(_LOCAL_BUILDERS))} or a save_to_disk folder", p)
        if split != "train":  # (one file is one split: the option names a split of a hub set or a saved folder)
            raise ConfigError(f"reader option split {split!r}: {p} is one file, read whole (its one split is "
                              "'train'); split applies to a hub data set or a saved folder with splits: drop it")
        kwargs = {"delimiter": "\t"} if p.suffix.lower() == ".tsv" else {}
        verbosity = datasets.logging.get_verbosity()
        datasets.logging.set_verbosity(datasets.logging.CRITICAL)  # ("Failed to load JSON ...": ours says it)
        datasets.disable_progress_bars()  # ("Generating train split" for a file read in a blink)
        try:
            return datasets.load_dataset(builder, data_files=str(p), split="train", **kwargs)
        except Exception as e:  # (datasets' generation errors: a broken JSON line, a ragged CSV row, ...)
            raise DataFormatError(*_local_problem(p, e)) from None
        finally:
            datasets.logging.set_verbosity(verbosity)
            datasets.enable_progress_bars()
    if os.sep in path or p.suffix.lower() in _LOCAL_BUILDERS:
        raise FileNotFoundError(f"local data set not found: {path}")
    try:
        return datasets.load_dataset(path, config, split=split)
    except Exception as e:  # offline mode / unknown name / no network: say what to do instead
        offline = os.environ.get("HF_DATASETS_OFFLINE") == "1" or os.environ.get("HF_HUB_OFFLINE") == "1"
        raise DataFormatError(
            f"could not load hub data set {path!r} (config {config!r}, split {split!r})"
            f"{' in offline mode (HF_DATASETS_OFFLINE=1)' if offline else ''}: {type(e).__name__}: {e}. "
            f"Use a local file (.json/.jsonl/.csv/.tsv/.parquet) or folder, or a public data set "
            f"(`elmo-tasks data list` lists them).") from e


def _local_problem(p: Path, e: Exception) -> tuple[str, Path, int | None]:
    """What is wrong with a local file ``datasets`` could not read: a JSON-lines file's first line that is not JSON,
    else the innermost cause datasets reports."""
    if p.suffix.lower() == ".jsonl":
        with open(p, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                try:
                    if line.strip():
                        json.loads(line)
                except json.JSONDecodeError as bad:
                    return f"not valid JSON ({bad.msg}, column {bad.colno}); give one JSON object per line", p, n
    while e.__cause__ is not None or e.__context__ is not None:
        e = e.__cause__ or e.__context__
    return f"the hf reader could not read it ({type(e).__name__}: {' '.join(str(e).split())[:200]})", p, None


def _pick(names: Sequence[str], given: str | None, candidates: Sequence[str], what: str) -> str | None:
    if given is not None:
        if given not in names:
            raise ConfigError(f"{what}: column {given!r} not found; columns: {', '.join(names)}")
        return given
    return next((c for c in candidates if c in names), None)


def _decoder(feature):
    """Function mapping a stored value to its label string (ClassLabel ints -> names)."""
    names = getattr(feature, "names", None)
    if names:
        return lambda v: names[v] if isinstance(v, int) else str(v)
    return str


def _cells(value) -> list:
    """A sequence cell: a list as stored, a string (CSV/TSV files) split on whitespace."""
    return value.split() if isinstance(value, str) else list(value)


def _convert_spans(sentences: list[TaggedSentence], rows: list[int], input_scheme: str, scheme: str,
                   where: str) -> None:
    """Convert span tags in place from ``input_scheme`` to ``scheme`` (see read_hf); errors name the row."""
    seqs = [s.tags for s in sentences]
    if input_scheme == "auto":
        try:
            for tags in seqs:
                for t in tags:
                    split_tag(t)
        except TagSchemeError:
            return  # not span tags (e.g. POS): returned as read
    try:
        converted, _ = convert_data(seqs, input_scheme, scheme)
    except TagSchemeError as e:
        how = f" ({e.scheme} scheme{', detected' if input_scheme == 'auto' else ''})" if e.scheme else ""
        raise DataFormatError(f"row {rows[e.sentence]}, tag {e.index + 1}{how}: {e}", where) from None
    for s, tags in zip(sentences, converted):
        s.tags = tags


@READERS.register("hf", path_kind="name")
def read_hf(path: str | Path, split: str = "train", config: str | None = None, kind: str = "auto",
            text_column: str | None = None, tokens_column: str | None = None,
            label_column: str | None = None, tags_column: str | None = None,
            tokenizer: str = "whitespace", scheme: str = "BIO",
            input_scheme: str = "auto") -> list[LabeledSentence] | list[TaggedSentence]:
    """Read a ``datasets`` data set as LabeledSentences (kind "classification") or TaggedSentences
    (kind "tagging"); "auto" picks tagging when token and tag-sequence columns exist.

    ``path``: a local .json/.jsonl/.csv/.tsv/.parquet file, a save_to_disk folder, a local data-set
    folder, or a hub name (needs the network). Column names default to the usual ones (text/sentence,
    label, tokens, tags/ner_tags). ClassLabel ints are mapped to their names; a text column is
    tokenized with ``tokenizer``; a tokens or tags cell that is a string (.csv/.tsv files) is split on
    whitespace. Span tags are converted from ``input_scheme`` to ``scheme`` as in the CoNLL reader ("auto"
    detects IOB1/BIO/BIOES over the whole split; with "auto", tags that are not all span tags, e.g. POS
    tags, are returned as read).
    """
    if kind not in ("auto", "classification", "tagging"):
        raise ConfigError(f"kind: unknown kind {kind!r}; valid: auto, classification, tagging")
    scheme = check_scheme_name(scheme)
    if input_scheme != "auto":
        input_scheme = check_scheme_name(input_scheme)
    tok = get_tokenizer(tokenizer)
    ds = _load(str(path), split, config)
    names = list(ds.column_names)
    tokens_c = _pick(names, tokens_column, TOKENS_COLUMNS, "tokens_column")
    tags_c = _pick(names, tags_column, TAGS_COLUMNS, "tags_column")
    if kind == "auto":
        kind = "tagging" if tokens_c and tags_c else "classification"
    if kind == "tagging":
        return _tagged_rows(ds, path, names, tokens_c, tags_c, input_scheme, scheme)
    text_c = _pick(names, text_column, TEXT_COLUMNS, "text_column")
    label_c = _pick(names, label_column, LABEL_COLUMNS, "label_column")
    if label_c is None or (text_c is None and tokens_c is None):
        raise DataFormatError(f"classification needs a label and a text (or tokens) column; columns: "
                              f"{', '.join(names)} (set text_column= / label_column=)", path)
    decode = _decoder(ds.features[label_c])
    out: list[LabeledSentence] = []
    for i, ex in enumerate(ds):
        tokens = tok(ex[text_c] or "") if text_c else [str(t) for t in ex[tokens_c]]
        if not tokens:
            raise DataFormatError(f"row {i}: empty text", path)
        out.append(LabeledSentence(tokens=tokens, label=decode(ex[label_c])))
    if not out:
        raise DataFormatError("no examples found", path)
    return out


def _tagged_rows(ds, path, names: list[str], tokens_c: str | None, tags_c: str | None, input_scheme: str,
                 scheme: str) -> list[TaggedSentence]:
    """The rows of a tagging data set, tags converted between span schemes; empty sentences skipped."""
    if not (tokens_c and tags_c):
        raise DataFormatError(f"tagging needs a tokens and a tags column; columns: {', '.join(names)} "
                              "(set tokens_column= / tags_column=)", path)
    decode = _decoder(getattr(ds.features[tags_c], "feature", None))
    others = [c for c in names if c not in (tokens_c, tags_c)]
    out_t, rows = [], []
    for i, ex in enumerate(ds):
        tokens = [str(t) for t in _cells(ex[tokens_c])]
        if not tokens:
            continue  # empty sentences are skipped, as in the CoNLL reader
        tags = [decode(t) for t in _cells(ex[tags_c])]
        if len(tags) != len(tokens):
            raise DataFormatError(f"row {i}: {len(tokens)} tokens but {len(tags)} tags", path)
        cols = {c: [str(v) for v in ex[c]] for c in others
                if isinstance(ex[c], list) and len(ex[c]) == len(tokens)}
        out_t.append(TaggedSentence(tokens=tokens, tags=tags, columns=cols))
        rows.append(i)
    if not out_t:
        raise DataFormatError("no examples found", path)
    _convert_spans(out_t, rows, input_scheme, scheme, f"{path}: {tags_c} column")
    return out_t


def to_hf_dataset(examples: Sequence[LabeledSentence] | Sequence[TaggedSentence]):
    """An in-memory ``datasets.Dataset``: columns tokens+label, or tokens+tags+the extra columns."""
    import datasets  # lazy: HF datasets is slow to import and only the hf reader needs it

    if not examples:
        raise ValueError("to_hf_dataset: no examples")
    if all(isinstance(e, LabeledSentence) for e in examples):
        return datasets.Dataset.from_dict({"tokens": [e.tokens for e in examples],
                                           "label": [e.label for e in examples]})
    if all(isinstance(e, TaggedSentence) for e in examples):
        extra = list(examples[0].columns)
        for e in examples:
            if list(e.columns) != extra:
                raise ValueError(f"to_hf_dataset: examples have different extra columns ({', '.join(extra) or 'none'} "
                                 f"vs {', '.join(e.columns) or 'none'})")
        if {"tokens", "tags"} & set(extra):
            raise ValueError(f"to_hf_dataset: extra column names clash with tokens/tags: {', '.join(extra)}")
        data = {"tokens": [e.tokens for e in examples], "tags": [e.tags for e in examples]}
        data.update({c: [e.columns[c] for e in examples] for c in extra})
        return datasets.Dataset.from_dict(data)
    raise TypeError("to_hf_dataset: examples must be all LabeledSentence or all TaggedSentence")

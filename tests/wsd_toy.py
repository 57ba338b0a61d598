"""Write small data sets in the framework format (for tests, demos and subsets of real corpora).

``write_dataset(folder, name, sentences)``: each sentence is a list of tokens, a token being a plain word
(``<wf>``; a ``(word, pos)`` pair gives its part of speech, else X) or a ``ToyInstance`` (``<instance>`` + a gold
key line). ``write_index_sense`` writes a WordNet-style ``index.sense``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence
from xml.sax.saxutils import escape, quoteattr

from elmo_features.util.provenance import write_text_atomic

from elmo_tasks.wsd.data.inventory import split_key
from elmo_tasks.wsd.data.reader import WsdDataset


@dataclass
class ToyInstance:
    """An instance to write: surface form (spaces = several tokens), lemma, pos, gold keys."""

    surface: str
    lemma: str
    pos: str
    keys: Sequence[str]


def write_dataset(folder: str | os.PathLike, name: str,
                  sentences: Iterable[Sequence[str | tuple[str, str] | ToyInstance]],
                  doc_size: int = 50) -> Path:
    """Write ``folder/name.data.xml`` and ``folder/name.gold.key.txt`` (left out when no instance has keys);
    ids dDDD.sSSS.tTTT. Returns folder."""
    folder = Path(folder)
    xml = ['<?xml version="1.0" encoding="UTF-8"?>', f'<corpus lang="en" source={quoteattr(name)}>']
    keys = []
    sentences = list(sentences)
    for si, sent in enumerate(sentences):
        d, s = divmod(si, doc_size)
        if s == 0:
            if si:
                xml.append("</text>")
            xml.append(f'<text id="d{d:03d}">')
        sid = f"d{d:03d}.s{s:03d}"
        xml.append(f'<sentence id="{sid}">')
        t = 0
        for tok in sent:
            if isinstance(tok, ToyInstance):
                iid = f"{sid}.t{t:03d}"
                t += 1
                xml.append(f'<instance id="{iid}" lemma={quoteattr(tok.lemma)} pos="{tok.pos}">'
                           f"{escape(tok.surface)}</instance>")
                if tok.keys:
                    keys.append(" ".join([iid, *tok.keys]))
            else:
                word, pos = tok if isinstance(tok, tuple) else (tok, "X")
                xml.append(f'<wf lemma={quoteattr(word.lower())} pos={quoteattr(pos)}>{escape(word)}</wf>')
        xml.append("</sentence>")
    if sentences:
        xml.append("</text>")
    xml.append("</corpus>")
    write_text_atomic(folder / f"{name}.data.xml", "\n".join(xml) + "\n")
    if keys:  # no gold at all: a folder to predict on, without a key file
        write_text_atomic(folder / f"{name}.gold.key.txt", "".join(k + "\n" for k in keys))
    return folder


def write_index_sense(path: str | os.PathLike, keys_in_sense_order: Iterable[str]) -> Path:
    """A fake ``index.sense``: keys of each lemma+pos numbered 1, 2, ... in the order given."""
    seen: dict[tuple[str, str], int] = {}
    lines = []
    for i, key in enumerate(keys_in_sense_order):
        lp = split_key(key)
        seen[lp] = seen.get(lp, 0) + 1
        lines.append(f"{key} {i:08d} {seen[lp]} 0\n")
    path = Path(path)
    write_text_atomic(path, "".join(sorted(lines)))
    return path


def subset(dataset: WsdDataset, folder: str | os.PathLike, every: int = 1, limit: int | None = None,
           name: str | None = None) -> Path:
    """Write every ``every``-th sentence (at most ``limit``) of a read data set as a new framework folder."""
    sents = dataset.sentences[::every][:limit]
    out = []
    for s in sents:
        starts = {i.start: i for i in s.instances}
        toks: list[str | ToyInstance] = []
        j = 0
        while j < len(s.tokens):
            inst = starts.get(j)
            if inst is None:
                toks.append(s.tokens[j])
                j += 1
            else:
                keys = dataset.gold[inst.id] if dataset.gold else []
                toks.append(ToyInstance(" ".join(s.tokens[inst.start:inst.end]), inst.lemma, inst.pos, keys))
                j = inst.end
        out.append(toks)
    return write_dataset(folder, name or dataset.name, out)

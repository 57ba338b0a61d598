"""Reader for WSD data sets in the Raganato et al. (2017) framework format.

A data set folder holds ``NAME.data.xml`` (``corpus/text/sentence`` with ``wf`` and ``instance``
children) and ``NAME.gold.key.txt`` (``instance_id key1 [key2 ...]``). Any folder in that format
works; the XML is parsed in a streaming way (expat), so large corpora (SemCor, 38 MB) are fine.
Malformed input raises :class:`WsdFormatError` naming the file and line.
"""
from __future__ import annotations

import bisect
import hashlib
import os
import re
import sys
import xml.parsers.expat
from dataclasses import dataclass, field
from pathlib import Path

from elmo_features.util.text_input import iter_lines
from elmo_features.util.wording import counted, first_few

from elmo_tasks.data.types import DataFormatError

POS_TAGS = ("NOUN", "VERB", "ADJ", "ADV")


class WsdFormatError(DataFormatError):
    """Malformed WSD data: the message names the file and, where known, the line."""


@dataclass(frozen=True)
class Instance:
    """One disambiguation target: tokens ``start:end`` of its sentence (end exclusive)."""

    id: str
    lemma: str
    pos: str
    start: int
    end: int


@dataclass
class Sentence:
    """A sentence: whitespace tokens (multiword forms split on spaces), its instances, and each token's part of
    speech as the file gives it (``pos``: the ``pos`` attribute of its ``wf`` or ``instance``, "" when none; SemCor
    uses the universal tags, NOUN, VERB, ..., DET, ADP, ".")."""

    id: str
    tokens: list[str] = field(default_factory=list)
    instances: list[Instance] = field(default_factory=list)
    pos: list[str] = field(default_factory=list)


@dataclass
class WsdDataset:
    """A parsed data set: sentences in file order, gold keys (None when the folder has no key file)."""

    name: str
    folder: Path
    sentences: list[Sentence]
    gold: dict[str, list[str]] | None

    @property
    def instances(self) -> list[Instance]:
        """All instances in file order."""
        return [inst for s in self.sentences for inst in s.instances]

    def fingerprint(self) -> str:
        """A short hash of the data set's text and instance spans (for caches)."""
        h = hashlib.sha256()
        for s in self.sentences:
            h.update(("\x1f".join(s.tokens) + "\x1e").encode("utf-8"))
            for inst in s.instances:
                h.update(f"{inst.id}:{inst.start}:{inst.end};".encode("utf-8"))
        return h.hexdigest()[:16]


def find_dataset_files(folder: str | os.PathLike) -> tuple[str, Path, Path | None]:
    """(name, data.xml path, gold.key.txt path or None) of a framework-format folder.

    A ``NAME.data.xml`` file may also be given directly (a leading ``~``: the home folder).
    """
    path = Path(folder).expanduser()
    if path.is_file() and path.name.endswith(".data.xml"):
        xml_path = path
    else:
        if not path.is_dir():
            raise FileNotFoundError(f"WSD data set folder not found: {path}")
        xmls = sorted(path.glob("*.data.xml"))
        if len(xmls) != 1:
            found = ", ".join(p.name for p in xmls) or "none"
            raise WsdFormatError(
                f"{path}: expected exactly one NAME.data.xml file in a framework-format folder, found {found}")
        xml_path = xmls[0]
    name = xml_path.name[: -len(".data.xml")]
    key_path = xml_path.with_name(name + ".gold.key.txt")
    if not key_path.exists():
        keys = sorted(xml_path.parent.glob("*.gold.key.txt"))
        key_path = keys[0] if len(keys) == 1 else None
    return name, xml_path, key_path


def read_data_xml(path: str | os.PathLike) -> list[Sentence]:
    """Parse a ``NAME.data.xml`` file into sentences (streaming; errors carry file and line)."""
    path = Path(path)
    parser = xml.parsers.expat.ParserCreate()  # the encoding the file declares (UTF-8 without a declaration)
    handler = _DataXml(path, parser)
    parser.StartElementHandler = handler.start
    parser.EndElementHandler = handler.end
    parser.CharacterDataHandler = handler.chars
    parser.buffer_text = True
    try:
        with open(path, "rb") as f:
            parser.ParseFile(f)
    except xml.parsers.expat.ExpatError as e:
        what = xml.parsers.expat.ErrorString(e.code)
        hint = ("; convert the file to UTF-8 (e.g. iconv -f ITS_ENCODING -t UTF-8)" if "encoding" in what else
                " (or bytes that are not in the encoding the file declares, UTF-8 by default)")
        raise WsdFormatError(f"{path}:{e.lineno}: malformed XML: {what}{hint}") from None
    if not handler.sentences:
        raise WsdFormatError(f"{path}: no <sentence> elements found")
    return handler.sentences


class _DataXml:
    """The expat handlers of ``read_data_xml``: sentences of <wf> and <instance> tokens, checked as they stream
    (``line0``: the lines of the file before the parsed text, for a part of a file)."""

    def __init__(self, path: Path, parser, line0: int = 0) -> None:
        self.path, self.parser, self.line0 = path, parser, line0
        self.sentences: list[Sentence] = []
        self.sentence: Sentence | None = None
        self.elem: str | None = None
        self.attrs: dict | None = None
        self.text: list[str] = []
        self.ids: set[str] = set()

    def fail(self, msg: str) -> None:
        raise WsdFormatError(f"{self.path}:{self.line0 + self.parser.CurrentLineNumber}: {msg}")

    def start(self, tag: str, attrs: dict) -> None:
        if tag == "sentence":
            if self.sentence is not None:
                self.fail("nested <sentence>")
            if not attrs.get("id"):
                self.fail("<sentence> without an id attribute")
            self.sentence = Sentence(attrs["id"])
        elif tag in ("wf", "instance"):
            if self.sentence is None:
                self.fail(f"<{tag}> outside a <sentence>")
            if self.elem is not None:
                self.fail(f"<{tag}> nested inside <{self.elem}>")
            if tag == "instance":
                self._check_instance(attrs)
            self.elem, self.attrs, self.text = tag, attrs, []
        elif tag not in ("corpus", "text"):
            self.fail(f"unexpected element <{tag}>; expected corpus, text, sentence, wf or instance")

    def _check_instance(self, attrs: dict) -> None:
        for a in ("id", "lemma", "pos"):
            if not attrs.get(a):
                self.fail(f"<instance> without a {a} attribute")
        if attrs["pos"] not in POS_TAGS:
            self.fail(f"<instance id={attrs['id']!r}> has pos {attrs['pos']!r}; expected one of {POS_TAGS}")
        if attrs["id"] in self.ids:
            self.fail(f"duplicate instance id {attrs['id']!r}")
        self.ids.add(attrs["id"])

    def chars(self, data: str) -> None:
        if self.elem is not None:
            self.text.append(data)

    def end(self, tag: str) -> None:
        if tag == "sentence":
            self.sentences.append(self.sentence)
            self.sentence = None
        elif tag in ("wf", "instance"):
            sent = self.sentence
            words = "".join(self.text).split()
            if not words:
                self.fail(f"empty <{tag}> element")
            begin = len(sent.tokens)
            sent.tokens.extend(words)
            sent.pos.extend([sys.intern(self.attrs.get("pos", ""))] * len(words))  # (one str per tag)
            if tag == "instance":
                a = self.attrs
                sent.instances.append(Instance(a["id"], a["lemma"].lower(), a["pos"], begin, len(sent.tokens)))
            self.elem = None


def read_gold_keys(path: str | os.PathLike, check_keys: bool = True) -> dict[str, list[str]]:
    """Parse a key file (``instance_id key1 [key2 ...]`` per line) into id -> keys (file order, no repeats).

    Each instance has one line (all its keys on it): an id listed again is refused, naming both lines.
    check_keys: every key must look like a WordNet sense key (``lemma%...``)."""
    path = Path(path)
    gold: dict[str, list[str]] = {}
    first_line: dict[str, int] = {}
    for lineno, line in iter_lines(path):  # the text policy of elmo_features.util.text_input
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 2:
            raise WsdFormatError(f"{path}:{lineno}: expected 'instance_id key [key ...]', got {line.strip()!r}")
        for key in parts[1:] if check_keys else ():
            if "%" not in key:
                raise WsdFormatError(f"{path}:{lineno}: {key!r} is not a WordNet sense key (lemma%ss_type:...)")
        if parts[0] in first_line:
            raise WsdFormatError(f"{path}:{lineno}: instance {parts[0]} is listed again (first on line "
                                 f"{first_line[parts[0]]}); a key file gives each instance one line holding all its "
                                 "keys: merge the two lines or remove one")
        first_line[parts[0]] = lineno
        keys = gold[parts[0]] = []
        keys.extend(k for k in parts[1:] if k not in keys)
    if not gold:
        raise WsdFormatError(f"{path}: empty key file")
    return gold


SENTENCE = re.compile(rb"<sentence\b")
INSTANCE_ID = re.compile(rb'<instance\b[^>]*?\sid="([^"]*)"')
UTF8_DECLARATION = re.compile(rb'<\?xml[^>]*?encoding="(?i:utf-?8)"|<\?xml(?![^>]*encoding)|(?!<\?xml)\s*<[!a-zA-Z]')


def load_dataset_where(folder: str | os.PathLike, keep_key, every: int = 0) -> WsdDataset:
    """The sentences of a framework folder with an instance one of whose gold keys ``keep_key(key)`` accepts (e.g.
    the senses of a few lemmas), and every ``every``-th sentence (0: none), in file order; the others are found in
    the raw XML and skipped unparsed (SemCor: a second, where ``load_dataset`` parses all of it). The gold is that
    of their instances. A file in another encoding than UTF-8 is parsed whole (``load_dataset``), then filtered."""
    name, xml_path, key_path = find_dataset_files(folder)
    if key_path is None:
        raise WsdFormatError(f"{Path(folder)}: no NAME.gold.key.txt file next to {xml_path.name}")
    raw = xml_path.read_bytes()
    if not UTF8_DECLARATION.match(raw.lstrip(b"\xef\xbb\xbf")):  # (the raw search needs UTF-8's bytes)
        whole = load_dataset(folder)
        keep = [s for i, s in enumerate(whole.sentences) if (every and i % every == 0) or
                any(keep_key(k) for inst in s.instances for k in whole.gold[inst.id])]
        return WsdDataset(name, xml_path.parent, keep, {i.id: whole.gold[i.id] for s in keep for i in s.instances})
    gold = read_gold_keys(key_path)
    wanted = {i for i, keys in gold.items() if any(keep_key(k) for k in keys)}
    starts = [m.start() for m in SENTENCE.finditer(raw)]  # (N,) byte offset of each <sentence
    chosen = set(range(0, len(starts), every)) if every else set()
    chosen.update(bisect.bisect_right(starts, m.start()) - 1 for m in INSTANCE_ID.finditer(raw)
                  if m.group(1).decode("utf-8") in wanted)
    sentences, line, at = [], 1, 0
    for n in sorted(chosen - {-1}):
        end = raw.find(b"</sentence>", starts[n])
        end = len(raw) if end < 0 else end + len(b"</sentence>")
        line += raw.count(b"\n", at, starts[n])
        at = starts[n]
        sentences += _parse_part(xml_path, raw[starts[n]:end], line - 1)
    parsed = {i.id for s in sentences for i in s.instances}
    missing = sorted(parsed - gold.keys())
    if missing:
        raise WsdFormatError(f"{key_path}: key file and {xml_path.name} disagree: {counted(len(missing), 'instance')} "
                             f"without a gold key ({first_few(missing, 3)})")
    return WsdDataset(name, xml_path.parent, sentences, {i: gold[i] for i in parsed})


def _parse_part(path: Path, text: bytes, line0: int) -> list[Sentence]:
    """The sentences of a part of a data.xml file (one <sentence> element) that starts after ``line0`` lines."""
    parser = xml.parsers.expat.ParserCreate("utf-8")
    handler = _DataXml(path, parser, line0)
    parser.StartElementHandler, parser.EndElementHandler = handler.start, handler.end
    parser.CharacterDataHandler, parser.buffer_text = handler.chars, True
    try:
        parser.Parse(text, True)
    except xml.parsers.expat.ExpatError as e:
        raise WsdFormatError(f"{path}:{line0 + e.lineno}: malformed XML: "
                             f"{xml.parsers.expat.ErrorString(e.code)}") from None
    return handler.sentences


def load_dataset(folder: str | os.PathLike, require_gold: bool = True) -> WsdDataset:
    """Read a framework-format folder; gold ids must match the XML's instance ids."""
    name, xml_path, key_path = find_dataset_files(folder)
    sentences = read_data_xml(xml_path)
    if key_path is None:
        if require_gold:
            raise WsdFormatError(f"{Path(folder)}: no NAME.gold.key.txt file next to {xml_path.name}")
        return WsdDataset(name, xml_path.parent, sentences, None)
    gold = read_gold_keys(key_path)
    ids = {inst.id for s in sentences for inst in s.instances}
    missing = sorted(ids - gold.keys())
    extra = sorted(gold.keys() - ids)
    if missing or extra:  # (only the side that has any: never "0 ... (e.g. [])")
        said = [f"{counted(len(missing), 'instance')} without a gold key ({first_few(missing, 3)})" if missing else "",
                f"{counted(len(extra), 'gold key line')} for instances not in {xml_path.name} "
                f"({first_few(extra, 3)})" if extra else ""]
        raise WsdFormatError(f"{key_path}: key file and {xml_path.name} disagree: "
                             f"{', '.join(s for s in said if s)}")
    return WsdDataset(name, xml_path.parent, sentences, gold)

"""What ``SenseTagger.tag`` returns and ``elmo-tasks wsd tag`` writes: a ``TaggedToken`` per token and a
``TaggedSentence`` per input line, in three formats (``FORMATS``):

- ``text``: per line the line itself, then one line per tagged word: the word, its sense key, the synset's lemmas,
  a short gloss, the score and the margin (untagged tokens left out);
- ``jsonl``: one JSON array per input line, one object per token (``TaggedToken.record``); an untagged token has
  ``key`` null and a ``reason``;
- ``tsv``: a header row, then one row per tagged word (untagged tokens left out).

The score of a sense is ``cos(v, context) + w_pos * cos(v, gloss)`` (+ ``prior / sense number`` with the prior);
the margin is the best score minus the second best among the word's candidate senses (None: one candidate).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from elmo_features.util.errors import UsageError
from elmo_features.util.paths import is_stream

FORMATS = ("text", "jsonl", "tsv")
EXTENSIONS = {".jsonl": "jsonl", ".json": "jsonl", ".tsv": "tsv", ".txt": "text"}  # --out's extension -> format
GLOSS_CHARS = 70  # the text format's gloss is cut there

# why a token has no sense (``TaggedToken.reason``)
FUNCTION_WORD = "function word"
PUNCTUATION = "punctuation or symbol"
NOT_IN_WORDNET = "not in WordNet"
NO_VECTOR = "no sense vector for this lemma"
NO_CONTEXT = "no context vector"
TSV_COLUMNS = ("line", "start", "end", "token", "lemma", "pos", "key", "synset", "synset_name", "lemmas", "score",
               "margin", "gloss")


@dataclass(frozen=True)
class TaggedToken:
    """One token of a tagged line: ``token`` (a ``/POS`` mark removed) at ``line[start:end]``; for a tagged word
    its sense ``key``, ``lemma`` and ``pos``, the ``synset`` (``offset-pos``) and its ``synset_name``
    (``bank.n.02``), the synset's ``lemmas`` and ``gloss``, the ``score`` and the ``margin`` over the second-best
    candidate (None: one candidate), and where its part of speech came from (``pos_from``: "mark", the token's
    ``/VERB``; "head", the sense file's part-of-speech head from the word's context; "count", the part of speech
    SemCor tags most often for the word, in a file without a head; "wordnet", the only one WordNet has senses of for
    the word); else ``reason`` says why not."""

    token: str
    start: int
    end: int
    key: str | None = None
    lemma: str | None = None
    pos: str | None = None
    synset: str | None = None
    synset_name: str | None = None
    lemmas: tuple[str, ...] = ()
    gloss: str | None = None
    score: float | None = None
    margin: float | None = None
    reason: str | None = None
    pos_from: str | None = None

    def __getitem__(self, name: str):
        """``token["key"]``: the fields read as a dict's, as ``tag`` returned dicts before."""
        if name not in self.__dataclass_fields__:
            raise KeyError(name)
        return getattr(self, name)

    def record(self) -> dict:
        """The token's JSON object (every field; lemmas a list)."""
        return {**asdict(self), "lemmas": list(self.lemmas)}

    def __str__(self) -> str:
        return self.text_line()

    def text_line(self, width: int = 0) -> str:
        """The text format's line: word, key, lemmas, short gloss, score and margin (untagged: the reason)."""
        if self.key is None:
            return f"{self.token:<{width}}  (untagged: {self.reason})"
        margin = "one candidate" if self.margin is None else f"margin {self.margin:.3f}"
        return (f"{self.token:<{width}}  {self.key:<20}  {', '.join(self.lemmas)}: {short_gloss(self.gloss)}  "
                f"(score {self.score:.3f}, {margin})")


@dataclass(frozen=True)
class TaggedSentence:
    """One input line (``text``; ``line``: its number from 1) and its tokens; iterating, indexing and ``len`` go
    over the tokens, ``tagged`` holds those with a sense."""

    text: str
    tokens: list[TaggedToken] = field(default_factory=list)
    line: int = 1

    def __iter__(self):
        return iter(self.tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, i):
        return self.tokens[i]

    @property
    def tagged(self) -> list[TaggedToken]:
        """The tokens that got a sense."""
        return [t for t in self.tokens if t.key is not None]

    def __str__(self) -> str:
        """The text format: the line, then one indented line per tagged word."""
        words = self.tagged
        width = max((len(t.token) for t in words), default=0)
        return "\n".join([self.text] + ([f"  {t.text_line(width)}" for t in words] or ["  (no word tagged)"]))


class TaggedText(list):
    """The ``TaggedSentence`` of every line; prints as the text format."""

    def __str__(self) -> str:
        return "\n\n".join(str(s) for s in self)


def synset_name(wn, sid: str) -> str:
    """NLTK's name of a synset of WordNet ``wn`` (``bank.n.01``): its first lemma, part of speech (``s``: an
    adjective satellite) and that lemma's sense number; its ``offset-pos`` id when WordNet lists no such key."""
    first = wn.synsets[sid].lemmas[0].lower()
    for k in wn.keys_of.get(sid, []):
        lemma, _, rest = k.partition("%")
        if lemma == first and rest[:1] in "12345":
            return f"{first}.{'nvars'[int(rest[0]) - 1]}.{wn.sense_number[k]:02d}"
    return f"{sid[1:]}-{sid[0]}"


def short_gloss(gloss: str | None, limit: int = GLOSS_CHARS) -> str:
    """The definition part of a gloss (its quoted examples dropped), cut at ``limit`` characters."""
    parts = [p.strip() for p in (gloss or "").split(";")]
    text = "; ".join(p for p in parts if p and not p.startswith('"')) or (gloss or "").strip()
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "\u2026"


def format_for(out: str | None, given: str | None, terminal: bool) -> str:
    """The output format: ``given`` (--format); else by --out's extension (``EXTENSIONS``; a pipe or device without
    one, such as /dev/stdout: jsonl, as when piped); else text on a terminal, jsonl when piped. Another extension
    (tags.csv) or none is a UsageError naming the extensions and --format, before any work."""
    if given:
        return given
    if out:
        suffix = out[out.rfind("."):].lower() if "." in out.rpartition("/")[2] else ""
        if suffix in EXTENSIONS or is_stream(out):
            return EXTENSIONS.get(suffix, "jsonl")
        raise UsageError(f"--out {out}: its extension does not set the format (.jsonl or .json: jsonl, .tsv: tsv, "
                         ".txt: text); name the file with one of them, or add --format jsonl (or text, tsv)")
    return "text" if terminal else "jsonl"


def render(sentences: list[TaggedSentence], fmt: str) -> str:
    """The whole output of ``wsd tag`` in format ``fmt`` (``FORMATS``)."""
    if fmt == "jsonl":
        return "".join(json.dumps([t.record() for t in s], ensure_ascii=False) + "\n" for s in sentences)
    if fmt == "tsv":
        rows = ["\t".join(TSV_COLUMNS)]
        for s in sentences:
            for t in s.tagged:
                r = t.record() | {"line": s.line, "lemmas": ", ".join(t.lemmas),
                                  "margin": "" if t.margin is None else t.margin}
                rows.append("\t".join(" ".join(str(r[c]).split()) for c in TSV_COLUMNS))
        return "\n".join(rows) + "\n"
    if fmt == "text":
        return f"{TaggedText(sentences)}\n"
    raise ValueError(f"format {fmt!r}; give one of {', '.join(FORMATS)}")

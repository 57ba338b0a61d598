"""The project's word tokenizer: Penn-Treebank-like, case kept, no sentence splitting.

It follows the word-tokenization rules the biLM training corpus was built with
(../shared/data/corpus/MANIFEST.md, section 3), so task text is split the way the biLM saw text:
quotes normalised to ``"``, dashes ``--``, clitics ``do n't``/``it 's``/``I 'm``, punctuation split
off except inside numbers (``1,000``, ``3.5``, ``10:30``), abbreviations (``Mr.``, ``U.S.``) and
URLs/e-mail addresses kept whole. It is a regex tokenizer (no sentence splitter, no model).
"""
from __future__ import annotations

import re
import unicodedata

from elmo_features.util.errors import ConfigError

_CHAR_MAP = str.maketrans({
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'", "\u00b4": "'", "`": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"', "\u00ab": '"', "\u00bb": '"',
    "\u2014": " -- ", "\u2015": " -- ", "\u2013": " -- ",
    "\u2012": "-", "\u2010": "-", "\u2011": "-", "\u2212": "-",
    "\u2026": "...", "\u00a0": " ", "\u2009": " ", "\u202f": " ", "\u2007": " ",
    "\u2022": " ", "\u00b7": " ",
})
_ABBREV_CAP = set("Mr Mrs Ms Dr Prof St Mt Gen Col Capt Lt Sgt Rev Hon Gov Sen Rep Jr Sr Co Corp Inc Ltd "
                  "Dept Ave Rd Vol Fig Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec Calif Mass Ill "
                  "Tex Va Fla Penn Conn Wash Mich Ariz Colo Ga Md Minn Mo Nev Okla Ore Tenn Wis No Nos "
                  "Art vs Messrs Mmes Bros Reps Drs Del La Ala Ch Pt".split())
_ABBREV_ANY = set("etc vs cf ca approx viz ibid al pp esp fig vol oz lb lbs ft km kg cm mm min sec hr "
                  "hrs no nos st mt figs eds ed chap dept mg cu sq jr sr".split())
_ELISIONS = set("'tis 'twas 'twere 'twill 'em 'n' 'cause 'til 'bout 'round 'gainst 'twixt 'n 'nuff "
                "'cos 'kay".split())
_BARE_CLITICS = {"'s", "'m", "'d", "'ll", "'re", "'ve", "n't"}
_KEEP_TRAILING_APOS = {"th'", "o'", "i'", "an'", "ol'", "t'"}
_D_HOSTS = set("i you he she it we they who what that there where how why".split())

_URL = re.compile(r"^(?:https?://|www\.)\S+$|^[\w.+-]+@[\w-]+(?:\.[\w-]+)+$", re.IGNORECASE)
# split-off punctuation; numbers with , : . inside are protected by the lookarounds
_SPLIT = re.compile(
    r"(\.\.\.+|-{2,}|(?<!\d)[,:]|[,:](?!\d)|[;\"()\[\]{}<>|]|[?!]+|[$%#@*+=~^\\]+"
    r"|(?<![A-Za-z0-9])&|&(?![A-Za-z0-9])|^/|/$|(?<=\s)/|/(?=\s))")
_CLITIC = re.compile(r"^(.+?)(n't|'s|'m|'ll|'re|'ve|'d)$", re.IGNORECASE)
_ACRONYM = re.compile(r"^(?:[A-Za-z]{1,2}\.){2,}$|^[A-Z]\.$")


def _translate(text: str) -> str:
    """``_CHAR_MAP`` applied, and every invisible format character (Unicode category Cf: zero-width space and
    joiners, soft hyphen, BOM, word joiner, left-to-right/right-to-left marks, bidi embeddings, overrides and
    isolates) dropped, so "York\u200f" reads as "York"."""
    return "".join(c for c in text.translate(_CHAR_MAP) if unicodedata.category(c) != "Cf")


def normalize(text: str) -> str:
    """Quote/dash/ellipsis mapping, format characters dropped, NFKC, PTB double quotes -> ``"``, whitespace
    squeezed."""
    if not isinstance(text, str):
        raise TypeError(f"tokenize: text must be a str, got {type(text).__name__} {text!r:.40}")
    text = _translate(unicodedata.normalize("NFKC", _translate(text)))
    text = text.replace("''", '"')
    text = re.sub(r"(?<=\d) -- (?=\d)", "-", text)
    text = "".join(" " if unicodedata.category(c) in ("Cc", "Cs") or c == "\ufffd" else c for c in text)
    return " ".join(text.split())


def _is_abbrev(chunk: str) -> bool:
    stem = chunk[:-1]
    return bool(_ACRONYM.match(chunk)) or stem in _ABBREV_CAP or stem.lower() in _ABBREV_ANY


def _symbols(chunk: str) -> list[str]:
    """Split symbol characters (emoji, currency, math) into their own tokens."""
    out, cur = [], ""
    for c in chunk:
        if unicodedata.category(c) in ("So", "Sk", "Sm", "Sc") and c not in "^~=+<>|$":
            if cur:
                out.append(cur)
            out.append(c)
            cur = ""
        else:
            cur += c
    return out + ([cur] if cur else [])


def _word(chunk: str) -> list[str]:
    """Tokens of one punctuation-free chunk: quotes, edge hyphens, final period, clitics."""
    if chunk.lower() in _BARE_CLITICS or chunk.lower() in _ELISIONS:
        return [chunk]  # already split (re-tokenizing tokenized text is a no-op)
    pre: list[str] = []
    post: list[str] = []
    while len(chunk) > 1 and chunk[0] == "'" and not re.match(r"^'\d\ds?$", chunk):
        pre.append("'")
        chunk = chunk[1:]
    while len(chunk) > 1 and chunk[-1] == "'" and chunk.lower() not in _KEEP_TRAILING_APOS \
            and not chunk.lower().endswith("n't'"):
        post.insert(0, "'")
        chunk = chunk[:-1]
    if len(chunk) > 1 and chunk[0] == "-" and not chunk[1].isdigit():
        pre.append("-")
        chunk = chunk[1:]
    if len(chunk) > 1 and chunk[-1] == "-" and not chunk[-2].isdigit():
        post.insert(0, "-")
        chunk = chunk[:-1]
    if len(chunk) > 1 and chunk.endswith(".") and not _is_abbrev(chunk):
        post.insert(0, ".")
        chunk = chunk[:-1]
    words = [chunk]
    m = _CLITIC.match(chunk)
    if m:
        head, clitic = m.group(1), m.group(2)
        if head.isdigit() or (clitic.lower() == "'d" and head.lower() not in _D_HOSTS):
            pass  # 1950's, archaic answer'd stay whole
        else:
            words = [head, clitic]  # can't -> ca n't, won't -> wo n't
    return pre + [w for w in words if w] + post


def _tokens_of(norm: str) -> list[tuple[str, int, int]]:
    """Tokens of normalized text with their (start, end) in it; the period PTB adds after a final abbreviation
    spans the abbreviation's own period."""
    tokens: list[tuple[str, int, int]] = []
    at = 0
    for raw in norm.split(" "):
        start, at = at, at + len(raw) + 1
        if not raw:
            continue
        if _URL.match(raw):
            tokens.append((raw, start, start + len(raw)))
            continue
        for sym_chunk in _symbols(raw):
            for piece in _SPLIT.split(sym_chunk):
                words = [piece] if piece and _SPLIT.fullmatch(piece) else _word(piece) if piece else []
                for w in words:  # (the pieces and words of a chunk are consecutive substrings of it)
                    tokens.append((w, start, start + len(w)))
                    start += len(w)
    # PTB: a sentence ending in an abbreviation gets its own final period
    last = len(tokens) - 1
    while last >= 0 and tokens[last][0] in ('"', "'", ")", "]"):
        last -= 1
    if last >= 0 and tokens[last][0].endswith(".") and re.search(r"[A-Za-z0-9]", tokens[last][0]):
        end = tokens[last][2]
        tokens.insert(last + 1, (".", end - 1, end))
    return tokens


def tokenize(text: str) -> list[str]:
    """Split raw text into tokens (see the module docstring for the rules). Never returns ""."""
    return [t for t, _, _ in _tokens_of(normalize(text))]


def tokenize_spans(text: str) -> list[tuple[str, int, int]]:
    """``tokenize(text)`` with each token's character offsets in ``text`` (start, end: ``text[start:end]`` is what
    the token was read from, e.g. "“" for the token '"', "don" for "do"; a final abbreviation's added period
    spans that abbreviation's own). Invisible format characters are dropped from tokens: one inside a token is
    inside its span ("New\u200bYork" -> "NewYork" spanning all 8 characters), one at a token's edge is not
    ("York\u200f" -> "York" spanning the 4 letters)."""
    norm, spans = _normalize_spans(text)
    return [(t, spans[s][0], spans[e - 1][1]) for t, s, e in _tokens_of(norm)]


def _normalize_spans(text: str) -> tuple[str, list[tuple[int, int]]]:
    """``normalize(text)`` and, per character of it, the (start, end) of the characters of ``text`` it came from."""
    norm = normalize(text)  # (first: a text that is no str is its error)
    chars = [(o, i, i + 1) for i, c in enumerate(text) for o in _translate(c)]
    nfkc, group = [], []  # NFKC per run of a starter and its combining marks
    for item in chars + [(" ", len(text), len(text))]:
        if group and not unicodedata.combining(item[0]):
            out = unicodedata.normalize("NFKC", "".join(c for c, _, _ in group))
            nfkc += [(o, group[0][1], group[-1][2]) for o in out]
            group = []
        group.append(item)
    chars = [(o, s, e) for c, s, e in nfkc for o in _translate(c)]
    chars = _merge(chars, re.compile("''"), '"')
    chars = _merge(chars, re.compile(r"(?<=\d) -- (?=\d)"), "-")
    chars = [(" " if unicodedata.category(c) in ("Cc", "Cs") or c == "\ufffd" else c, s, e) for c, s, e in chars]
    squeezed: list[tuple[str, int, int]] = []
    for c, s, e in chars:
        if not c.isspace():
            squeezed.append((c, s, e))
        elif squeezed and squeezed[-1][0] != " ":
            squeezed.append((" ", s, e))
    if squeezed and squeezed[-1][0] == " ":
        squeezed.pop()
    mine = "".join(c for c, _, _ in squeezed)
    spans = [(s, e) for _, s, e in squeezed]
    if mine != norm:  # (NFKC across a run boundary, e.g. Hangul jamo: align the two strings)
        spans = _align(mine, norm, spans, len(text))
    return norm, spans


def _merge(chars: list[tuple[str, int, int]], pattern: re.Pattern, by: str) -> list[tuple[str, int, int]]:
    """``pattern.sub(by, text)`` on (char, start, end) triples: a replaced run becomes ``by`` spanning the run."""
    text = "".join(c for c, _, _ in chars)
    out, at = [], 0
    for m in pattern.finditer(text):
        out += chars[at:m.start()] + [(by, chars[m.start()][1], chars[m.end() - 1][2])]
        at = m.end()
    return out + chars[at:]


def _align(mine: str, norm: str, spans: list[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    """Spans for ``norm`` from those of ``mine`` (nearly the same string): equal runs map one to one, a changed run
    takes the span of what it replaced."""
    from difflib import SequenceMatcher

    out: list[tuple[int, int]] = []
    for op, a0, a1, b0, b1 in SequenceMatcher(None, mine, norm, autojunk=False).get_opcodes():
        if op == "equal":
            out += spans[a0:a1]
        elif b1 > b0:
            src = spans[a0:a1] or [spans[min(a0, len(spans) - 1)] if spans else (0, n)]
            out += [(src[0][0], src[-1][1])] * (b1 - b0)
    return out


def whitespace_tokenize(text: str) -> list[str]:
    """Split on runs of whitespace."""
    return text.split()


def whitespace_spans(text: str) -> list[tuple[str, int, int]]:
    """``whitespace_tokenize(text)`` with each token's (start, end) in ``text``."""
    spans, at = [], 0
    for tok in text.split():
        at = text.index(tok, at)
        spans.append((tok, at, at + len(tok)))
        at += len(tok)
    return spans


TOKENIZERS = {"whitespace": whitespace_tokenize, "ptb": tokenize}


def get_tokenizer(name: str):
    """A tokenizer function by name; unknown names raise an error listing the valid ones."""
    try:
        return TOKENIZERS[name]
    except KeyError:
        raise ConfigError(f"tokenizer: unknown tokenizer {name!r}; valid: {', '.join(sorted(TOKENIZERS))}") from None

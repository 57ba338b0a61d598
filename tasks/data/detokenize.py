"""Tokens back to raw text: a tokenized sentence (the WSD framework's ``<wf>``/``<instance>`` tokens, PTB-style)
joined into the string a writer would have typed, with each token's character span in it.

The rules (the inverse of the package's tokenizer, ``elmo_tasks.data.tokenizer``, on ordinary English):

- a space between tokens, except
- no space before closing punctuation (``, . ; : ! ? ) ] } % ...``, any run of those, e.g. ``??!!``), the clitics
  ``n't 's 'm 'd 'll 're 've`` (any letter case: ``do n't`` -> ``don't``) and a lone ``'`` (a possessive:
  ``the students '`` -> ``the students'``);
- no space after opening tokens (``( [ { $ #`` and the opening quotes `````` and `````);
- a plain double quote ``"`` opens and closes in turn within the sentence (the first one opens);
- PTB's bracket and quote codes are written as the characters: `````` and ``''`` as ``"``, ````` as ``'``,
  ``-LRB-``/``-RRB-`` as ``(``/``)`` (also ``-LSB- -RSB- -LCB- -RCB-``).

Each token's span is ``(start, end)`` in the returned text: ``text[start:end]`` is the token as written (``"`` for
``````). Tokens are never split or merged, so the spans are in order and do not overlap.
"""
from __future__ import annotations

import re
from typing import Sequence

_CODES = {"``": '"', "''": '"', "`": "'", "-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]",
          "-LCB-": "{", "-RCB-": "}"}
_CLOSING = re.compile(r"[.,;:!?)\]}%]+|\.\.\.+|'")
_CLITICS = {"n't", "'s", "'m", "'d", "'ll", "'re", "'ve"}
_OPENING = {"(", "[", "{", "$", "#", "``", "`", "-LRB-", "-LSB-", "-LCB-"}


def detokenize(tokens: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """The raw text of ``tokens`` and each token's (start, end) in it (see the module docstring for the rules)."""
    if isinstance(tokens, str):
        raise TypeError("detokenize: tokens must be a list of str, not one str (split it first)")
    parts: list[str] = []
    spans: list[tuple[int, int]] = []
    at, glue, quote_open = 0, True, False  # glue: no space before the next token (the start, or after an opener)
    for i, token in enumerate(tokens):
        if not isinstance(token, str) or not token or any(c.isspace() for c in token):
            raise ValueError(f"detokenize: token {i} is {token!r}; give non-empty tokens without spaces")
        written = _CODES.get(token, token)
        if token == '"':
            closes = quote_open
            quote_open = not quote_open
        else:
            closes = token not in _OPENING and (bool(_CLOSING.fullmatch(written)) or token.lower() in _CLITICS
                                                 or token == "''")
        if parts and not glue and not closes:
            parts.append(" ")
            at += 1
        spans.append((at, at + len(written)))
        parts.append(written)
        at += len(written)
        glue = token in _OPENING or (token == '"' and quote_open)
    return "".join(parts), spans

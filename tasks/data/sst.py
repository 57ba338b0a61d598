"""Stanford Sentiment Treebank PTB-tree files: one tree per line, ``(3 (2 It) (4 (2 's) ...))``."""
from __future__ import annotations

import re
from pathlib import Path

from elmo_features.util.text_input import iter_lines

from elmo_tasks.registry import READERS
from elmo_tasks.data.types import DataFormatError, LabeledSentence, check_reader_file

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
PTB_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}",
               "``": '"', "''": '"'}
BINARY = {"0": "neg", "1": "neg", "3": "pos", "4": "pos"}


class _Tree:
    __slots__ = ("label", "children", "word")

    def __init__(self, label: str, children: list["_Tree"], word: str | None):
        self.label, self.children, self.word = label, children, word

    def leaves(self) -> list[str]:
        if self.word is not None:
            return [self.word]
        return [w for c in self.children for w in c.leaves()]

    def subtrees(self):
        yield self
        for c in self.children:
            yield from c.subtrees()


def parse_tree(text: str) -> _Tree:
    """Parse one labelled PTB tree; raises ValueError describing the problem."""
    tokens = _TOKEN.findall(text)
    pos = 0

    def node() -> _Tree:
        nonlocal pos
        if pos >= len(tokens) or tokens[pos] != "(":
            raise ValueError(f"expected '(' at token {pos}, found {tokens[pos] if pos < len(tokens) else 'end of line'!r}")
        pos += 1
        if pos >= len(tokens) or tokens[pos] in "()":
            raise ValueError(f"missing label after '(' at token {pos}")
        label = tokens[pos]
        pos += 1
        if pos < len(tokens) and tokens[pos] not in "()":  # leaf: (label word)
            word = tokens[pos]
            pos += 1
            if pos >= len(tokens) or tokens[pos] != ")":
                raise ValueError(f"leaf ({label} {word} ...) is not closed (unbalanced parentheses)")
            pos += 1
            return _Tree(label, [], word)
        children = []
        while pos < len(tokens) and tokens[pos] == "(":
            children.append(node())
        if pos >= len(tokens) or tokens[pos] != ")":
            raise ValueError("unbalanced parentheses (missing ')')" if pos >= len(tokens)
                             else f"unexpected {tokens[pos]!r} at token {pos}")
        if not children:
            raise ValueError(f"empty node ({label})")
        pos += 1
        return _Tree(label, children, None)

    tree = node()
    if pos != len(tokens):
        raise ValueError(f"trailing text after the tree: {' '.join(tokens[pos:pos + 5])!r}")
    return tree


def _label(tree: _Tree, binary: bool) -> str | None:
    if tree.label not in ("0", "1", "2", "3", "4"):
        raise ValueError(f"sentiment label must be 0-4, found {tree.label!r}")
    return BINARY.get(tree.label) if binary else tree.label


@READERS.register("sst")
def read_sst(path: str | Path, binary: bool = False, include_subtrees: bool = False,
             ptb_unescape: bool = True) -> list[LabeledSentence]:
    """Read SST trees; the example is the root's leaves with the root label.

    ``binary=True`` drops neutral (2) and maps 0,1 -> "neg", 3,4 -> "pos"; otherwise labels are
    "0".."4". ``include_subtrees=True`` also yields every phrase (training-set augmentation).
    ``ptb_unescape`` turns -LRB- -RRB- ... back into brackets and `` '' into ``"`` (the biLM's form).
    """
    path = Path(path)
    check_reader_file(path, "SST file")
    out: list[LabeledSentence] = []
    for lineno, line in iter_lines(path):  # the text policy of elmo_features.util.text_input
        if not line.strip():
            continue
        try:
            tree = parse_tree(line)
            all_nodes = list(tree.subtrees())
            for sub in all_nodes:
                _label(sub, False)  # every node's label must be 0-4
            for t in all_nodes if include_subtrees else [tree]:
                label = _label(t, binary)
                if label is None:
                    continue
                words = t.leaves()
                if ptb_unescape:
                    words = [PTB_ESCAPES.get(w, w) for w in words]
                out.append(LabeledSentence(tokens=words, label=label))
        except ValueError as e:
            raise DataFormatError(f"malformed tree: {e}", path, lineno) from None
    if not out:
        raise DataFormatError("no trees found (empty file?)", path)
    return out

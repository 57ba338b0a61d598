"""`wsd raw-eval` with another rule for the multi-word units `wsd tag` joins: a probe for choosing the rule on
SemCor's held-out documents (scripts/semcor_held_out.py writes them as a test folder), never on the test sets.

    python scripts/wsd_multiword_probe.py RULE wsd raw-eval --senses S.h5 --test /tmp/semcor_held_out --out DIR

RULE: ``semcor_nv`` (the tagger's rule: multi-word nouns and verbs SemCor tags at least once), ``semcor_all``
(every multi-word lemma SemCor tags, adjectives and adverbs too), ``none`` (no unit joined), ``wordnet_nv`` (every multi-word noun and verb of the sense file), ``wordnet_all`` (every multi-word lemma,
adjectives and adverbs too). The rest of the command line is elmo-tasks's.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from elmo_tasks.wsd import tagging  # noqa: E402


def _with_vectors(self, pos: tuple[str, ...] | None, tagged: bool = False) -> list[tuple[str, str]]:
    """The sense file's multi-word lemmas (of ``pos``: None for any) with a sense vector (``tagged``: and a SemCor
    count)."""
    return [(lemma, p) for (lemma, p), ks in self.by_lemma.items() if "_" in lemma and (pos is None or p in pos)
            and any(self.has[self.index[k]] for k in ks)
            and (not tagged or sum(int(self.counts[self.index[k]]) for k in ks) > 0)]


RULES = {"semcor_nv": tagging.SenseTagger._multiword_lemmas,
         "semcor_all": lambda self: _with_vectors(self, None, tagged=True),
         "none": lambda self: [],
         "wordnet_nv": lambda self: _with_vectors(self, ("NOUN", "VERB")),
         "wordnet_all": lambda self: _with_vectors(self, None)}


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in RULES:
        print(f"usage: {Path(__file__).name} RULE elmo-tasks-arguments...; RULE: {', '.join(RULES)}", file=sys.stderr)
        return 2
    tagging.SenseTagger._multiword_lemmas = RULES[sys.argv[1]]
    from elmo_tasks.cli import main as cli
    return cli(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())

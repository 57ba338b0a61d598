"""WSD examples for heads and the 1-NN method: a sentence with its targets, each carrying the WordNet
candidates of its lemma+pos (sense-number order) and its gold keys.

``read_wsd(path, wordnet=...)`` is the data reader ``raganato`` of run configs.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from elmo_tasks.registry import READERS
from elmo_tasks.wsd.data.inventory import SenseInventory
from elmo_tasks.wsd.data.reader import WsdDataset, WsdFormatError, find_dataset_files, load_dataset

DEFAULT_WORDNET = os.environ.get("ELMO_TASKS_WORDNET", "data/wordnet-3.0")


@dataclass
class WsdTarget:
    """One instance: tokens ``start:end`` of the sentence, its WordNet candidates and gold keys."""

    id: str
    start: int
    end: int
    lemma: str
    pos: str
    candidates: list[str]  # WordNet keys of lemma+pos in sense-number order ([] if WordNet lacks it)
    gold: list[str] = field(default_factory=list)  # [] when unknown

    @property
    def first_sense(self) -> str | None:
        """The WordNet first sense (None when WordNet lacks lemma+pos)."""
        return self.candidates[0] if self.candidates else None


@dataclass
class WsdSentence:
    """A sentence (whitespace tokens; multiword forms are several tokens) and its targets."""

    tokens: list[str]
    targets: list[WsdTarget]
    id: str = ""


def to_examples(dataset: WsdDataset, inventory: SenseInventory) -> list[WsdSentence]:
    """One example per sentence that has at least one instance, in file order."""
    out = []
    for s in dataset.sentences:
        if not s.instances:
            continue
        targets = [WsdTarget(i.id, i.start, i.end, i.lemma, i.pos, inventory.candidates(i.lemma, i.pos),
                             list(dataset.gold[i.id]) if dataset.gold is not None else [])
                   for i in s.instances]
        out.append(WsdSentence(list(s.tokens), targets, s.id))
    return out


def unknown_gold_keys(dataset: WsdDataset, inventory: SenseInventory) -> list[str]:
    """``file:line: key`` for every gold key that is not a sense key of the inventory (WordNet 3.0), in file order.

    Such keys are kept as gold, but no method ever answers them (answers are WordNet candidates), so an instance
    whose only gold keys are unknown always counts as an error, and a training instance with one adds nothing to
    the 1-NN sense averages that a test instance can reach."""
    key_path = _key_path(dataset)
    return [f"{key_path}:{n}: {k}" for n, k in _gold_keys(key_path) if k not in inventory] if key_path else []


def warn_unknown_keys(dataset: WsdDataset, inventory: SenseInventory, what: str) -> list[str]:
    """Gold keys that are not WordNet 3.0 sense keys: one warning line (count, the first file:line), and the list."""
    unknown = unknown_gold_keys(dataset, inventory)
    if unknown:
        print(f"warning: {what}: {len(unknown)} gold key(s) are not WordNet 3.0 sense keys (first: {unknown[0]}); "
              "they stay in the gold but no method can answer them, so instances with only such keys count as "
              "errors", file=sys.stderr, flush=True)
    return unknown


def check_candidates(examples: list[WsdSentence], what: str, where, wordnet) -> int:
    """WsdFormatError when no instance of ``examples`` has a WordNet candidate for its lemma+pos (every method scores
    0: another WordNet, or missing lemma/pos attributes); one warning line when some have none, and one when every
    instance has a single candidate (every method scores 100). Returns the number without a candidate."""
    targets = all_targets(examples)
    missing = [t for t in targets if not t.candidates]
    if targets and all(len(t.candidates) == 1 for t in targets):
        print(f"warning: {what}: each of its {len(targets)} instances has a single WordNet candidate, so every method "
              "(and the first-sense baseline) scores 100: it measures nothing; give a test set with ambiguous words",
              file=sys.stderr, flush=True)
    if not missing:
        return 0
    first = f"{missing[0].id} {missing[0].lemma}#{missing[0].pos}"
    if len(missing) == len(targets):
        raise WsdFormatError(f"{where}: {what}: none of its {len(targets)} instances has a WordNet candidate for its "
                             f"lemma+pos in WordNet {wordnet} (first: {first}): is it for another WordNet, or are "
                             "lemmas/POS missing?")
    print(f"warning: {what}: {len(missing)} of its {len(targets)} instances have no WordNet candidate for their "
          f"lemma+pos (first: {first}); no method can answer them, so they count as errors", file=sys.stderr,
          flush=True)
    return len(missing)


def check_training_set(targets: list[WsdTarget], what: str, where, head: bool) -> None:
    """Before anything is embedded: a training set whose instances all carry one gold key cannot train a head
    (WsdFormatError when one is asked for, else a warning); one warning line when every instance has a single WordNet
    candidate
    (its sense vectors and head cover only words with one sense, so every ambiguous test word backs off)."""
    if not targets:
        raise WsdFormatError(f"{where}: {what} has no <instance> elements")
    keys = {k for t in targets for k in t.gold}
    one = (f"{what}: every one of its {len(targets)} instances has the gold key {next(iter(keys))}" if len(keys) == 1
           else "")
    if one and head:
        raise WsdFormatError(f"{where}: {one}: a head trained on one sense measures nothing; give a training set "
                             "with more senses")
    if one:
        print(f"warning: {one}: the 1-NN rows can answer only that sense (or back off to the first sense): they "
              "measure nothing; give a training set with more senses", file=sys.stderr, flush=True)
    elif all(len(t.candidates) <= 1 for t in targets):
        print(f"warning: {what}: each of its {len(targets)} instances has at most one WordNet candidate, so the "
              "1-NN rows and the head learn nothing about choosing a sense: every ambiguous test word backs off; "
              "give a training set with ambiguous words", file=sys.stderr, flush=True)


def require_known_keys(dataset: WsdDataset, inventory: SenseInventory, wordnet: str | os.PathLike) -> None:
    """WsdFormatError when the gold has keys but none is a sense key of ``wordnet`` (keys of another version)."""
    key_path = _key_path(dataset)
    keys = _gold_keys(key_path) if key_path else []
    if keys and not any(k in inventory for _, k in keys):
        n, k = keys[0]
        raise WsdFormatError(f"{key_path}: none of its {len(keys)} keys is a sense key of WordNet {wordnet} "
                             f"(first: line {n} {k}): is it for another WordNet version?")


def _key_path(dataset: WsdDataset):
    """The gold key file of a data set (None without gold)."""
    return None if dataset.gold is None else find_dataset_files(dataset.folder)[2]


def _gold_keys(key_path) -> list[tuple[int, str]]:
    """(line number, key) of every key of a gold key file, in file order."""
    with open(key_path, encoding="utf-8-sig", errors="replace") as f:
        return [(lineno, k) for lineno, line in enumerate(f, 1) for k in line.split()[1:]]


def all_targets(examples: list[WsdSentence]) -> list[WsdTarget]:
    """Targets of all examples, in order."""
    return [t for ex in examples for t in ex.targets]


def load_inventory(wordnet: str | os.PathLike) -> SenseInventory:
    """The sense inventory of a WordNet 3.0 folder or index.sense file (callers keep it: no module cache)."""
    return SenseInventory.from_path(wordnet)


@READERS.register("raganato", path_kind="folder")
def read_wsd(path: str | os.PathLike, wordnet: str = DEFAULT_WORDNET) -> list[WsdSentence]:
    """Reader for run configs: a framework-format folder -> examples (wordnet: dict folder or index.sense)."""
    return to_examples(load_dataset(path), load_inventory(wordnet))

"""A tiny sense file for the ``wsd tag`` / ``wsd raw-eval`` tests: ``elmo-tasks wsd senses`` run on a tiny WordNet,
a tiny random biLM and a few training sentences (``wsd_toy``); the ``tagger`` fixture reads the ``senses`` fixture of
the module that imports it."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
import yaml

from elmo_tasks.cli import main

# isort: split
from test_tasks_helpers import make_bilm
from wsd_toy import ToyInstance as I
from wsd_toy import write_dataset


def write_toy_wordnet(folder: Path, synsets, keys, exceptions: dict | None = None) -> Path:
    """A WordNet-style folder: data.noun/verb/adj/adv from ``synsets`` (pos, offset, lexfile, lemmas, gloss),
    index.sense from ``keys`` (key, offset, sense number) and, given ``exceptions`` (file name -> lines), the
    NAME.exc files."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {p: ["  1 licence header line"] for p in "nvar"}
    for pos, off, lex, lemmas, gloss in synsets:
        files[pos].append(f"{off} {lex} {pos} {len(lemmas):02x} {' '.join(f'{w} 0' for w in lemmas)} 000 | {gloss}")
    for pos, name in zip("nvar", ("noun", "verb", "adj", "adv")):
        (folder / f"data.{name}").write_text("\n".join(files[pos]) + "\n")
        if exceptions is not None:
            (folder / f"{name}.exc").write_text("".join(line + "\n" for line in exceptions[name]))
    (folder / "index.sense").write_text("".join(f"{k} {off} {n} 0\n" for k, off, n in sorted(keys)))
    return folder


def by_token(sentence) -> dict:
    """A tagged sentence's tokens by their text."""
    return {t.token: t for t in sentence}


def bank_sentences() -> list[list]:
    """Training sentences on the two noun banks, deposit, money, fish and river (three times each)."""
    river = lambda: I("bank", "bank", "NOUN", ["bank%1:17:01::"])  # noqa: E731
    money_bank = lambda: I("bank", "bank", "NOUN", ["bank%1:14:00::"])  # noqa: E731
    return [["we", "sat", "on", "the", river(), "of", "the", I("river", "river", "NOUN", ["river%1:17:00::"])],
            ["I", I("deposited", "deposit", "VERB", ["deposit%2:40:00::"]),
             I("money", "money", "NOUN", ["money%1:21:00::"]), "at", "the", money_bank()],
            ["they", I("fished", "fish", "VERB", ["fish%2:38:00::"]), "in", "the",
             I("river", "river", "NOUN", ["river%1:17:00::"])]] * 3


def build_sense_file(root: Path, write_wordnet: Callable[[Path], Path], sentences: list[list]) -> Path:
    """``root/senses.h5`` made by ``wsd senses`` from the WordNet ``write_wordnet`` writes (root/wn), a tiny biLM
    (root/bilm) and ``sentences`` (root/train), with the config root/c.yaml; returns ``root``."""
    write_wordnet(root / "wn")
    opts, weights = make_bilm(root / "bilm")
    write_dataset(root / "train", "train", sentences)
    cfg = {"name": "tiny", "wordnet": str(root / "wn"), "train": str(root / "train"), "test": [str(root / "train")],
           "sources": {"elmo": {"name": "elmo", "options_file": str(opts), "weights_file": str(weights)}},
           "head": None, "head_dev_every": 2, "knn": ["senses_glosses"]}
    (root / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["wsd", "senses", "--config", str(root / "c.yaml"), "--source", "elmo", "--out",
                 str(root / "senses.h5"), "--cache-dir", "none", "--progress", "off"]) == 0
    return root


@pytest.fixture(scope="module")
def tagger(senses):
    """The ``SenseTagger`` of the test module's ``senses`` fixture (a folder holding senses.h5)."""
    from elmo_tasks.wsd.tagging import SenseTagger

    return SenseTagger(str(senses / "senses.h5"))

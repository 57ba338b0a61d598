"""The WSD comparison config (``configs/wsd_semcor.yaml``): feature sources, 1-NN rows, the trained head.

Unknown keys and unknown component names are errors listing the valid ones (elmo_tasks.experiment.config).
"""
from __future__ import annotations

import copy
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from elmo_features.util.config_files import apply_set
from elmo_features.util.errors import ConfigError
from elmo_features.util.schema import List, Str, build, join_key, key, to_dict

from elmo_tasks.components import resolve_component
from elmo_tasks.experiment.config import TrainingConfig, find_config, load_raw
from elmo_tasks.registry import FEATURES, HEADS
from elmo_tasks.wsd.data.wordnet import GLOSS_TEXTS

KNN_ROWS = ("layers", "average", "learned_mix", "fixed_mix", "dev_layer", "senses", "senses_glosses", "senses_prior")
FRAMEWORK_TESTS = ("senseval2", "senseval3", "semeval2007", "semeval2013", "semeval2015")  # their union is ALL


@dataclass
class WsdConfig:
    """What ``elmo-tasks wsd`` evaluates (see docs/wsd.md)."""

    name: str = "wsd"
    wordnet: str = key(factory=lambda: os.environ.get("ELMO_TASKS_WORDNET", "").strip() or "data/wordnet-3.0",
                       doc="WordNet 3.0 dict folder (or its index.sense); default $ELMO_TASKS_WORDNET, else "
                           "data/wordnet-3.0")
    train: str = key(default="data/wsd/semcor",
                     doc="training folder in the framework format (--train overrides; `data get wsd-framework`)")
    test: list[str] = key(factory=lambda: [f"data/wsd/{n}" for n in FRAMEWORK_TESTS],
                          doc="test folders (--test overrides); the table's ALL column is their union")
    sources: dict = key(factory=dict, doc="source name -> features section ({name: elmo|static|..., ...})")
    features: list[str] = key(factory=list, doc="sources to evaluate by default (--features overrides)")
    knn: list[str] = key(List(Str(choices=KNN_ROWS)), factory=lambda: ["layers", "average", "learned_mix"],
                         doc="1-NN rows per source (dev_layer: the layer whose 1-NN is best on the held-out "
                             "training sentences of head_dev_every; senses: sense vectors for every WordNet sense, "
                             "senses_glosses: + their glosses, docs/wsd.md)")
    gloss_texts: list[str] = key(List(Str(choices=GLOSS_TEXTS)), factory=lambda: ["definition"],
                                 doc="gloss sentences tried for senses_glosses (definition: LMMS's \"lemma - synset "
                                     "lemmas - definition\"; full: with the gloss's usage examples); with more than "
                                     "one, the held-out training sentences choose")
    fixed_mix: list[float] | None = key(default=None,
                                        doc='layer weights of the "fixed_mix" 1-NN row (normalised to sum 1)')
    head: dict | None = key(factory=lambda: {"name": "wsd_linear"}, doc="trained head (null: none)")
    probes: bool = key(default=True, doc="also train the head on each single layer (a linear probe per layer)")
    head_dev_every: int = key(default=20,
                              doc="every Nth training sentence is the head's early-stopping dev set (0: none)")
    dev_split: str = key(Str(choices=("sentences", "documents")), default="sentences",
                         doc="what the 1-NN rows' choices hold out, every head_dev_every-th: sentences, or documents "
                             "(the sentence id's part before the first dot, d000 of d000.s000: like tagging new text)")
    training: TrainingConfig = field(default_factory=TrainingConfig)

    def check(self, where: str) -> None:
        if "fixed_mix" in self.knn and not self.fixed_mix:
            raise ConfigError(f"{join_key(where, 'fixed_mix')}: the knn row 'fixed_mix' needs layer weights, "
                              "e.g. [0.2, 0.3, 0.5]")
        if self.fixed_mix is not None and (any(w < 0 for w in self.fixed_mix) or sum(self.fixed_mix) <= 0):
            raise ConfigError(f"{join_key(where, 'fixed_mix')}: weights must be >= 0 with a positive sum")
        if self.head_dev_every < 0 or self.head_dev_every == 1:
            raise ConfigError(f"{join_key(where, 'head_dev_every')}: must be 0 (no dev set) or >= 2")
        if ({"dev_layer", "senses", "senses_glosses", "senses_prior"} & set(self.knn)) and not self.head_dev_every:
            raise ConfigError(f"{join_key(where, 'knn')}: the rows dev_layer, senses and senses_glosses choose their "
                              "settings on held-out training sentences; set head_dev_every >= 2")
        if not self.gloss_texts:
            raise ConfigError(f"{join_key(where, 'gloss_texts')}: list at least one of {', '.join(GLOSS_TEXTS)}")
        if len(set(self.gloss_texts)) != len(self.gloss_texts):
            raise ConfigError(f"{join_key(where, 'gloss_texts')}: {self.gloss_texts} lists one twice")
        if not self.test:
            raise ConfigError(f"{join_key(where, 'test')}: list at least one test folder")
        for name in self.features:
            if name not in self.sources and not self.sources:
                raise ConfigError(f"{join_key(where, 'features')}: unknown source {name!r}: there are no sources "
                                  "without a config; give --config with a sources section (e.g. --config "
                                  "wsd_semcor: `elmo-tasks configs show wsd_semcor` lists its sources)")
            if name not in self.sources:
                raise ConfigError(f"{join_key(where, 'features')}: unknown source {name!r}; "
                                  f"sources in this config: {', '.join(self.sources)}")
        if self.features and not self.knn and self.head is None:
            raise ConfigError(f"{where} {', '.join(self.features)} {'has' if len(self.features) == 1 else 'have'} no "
                              "method: knn is empty and head is null; list knn rows or give a head")

    def to_dict(self) -> dict:
        return to_dict(self)

    def warn_inert(self, where: str) -> None:
        """Settings that act on no row of the table (``elmo-tasks wsd``) are said to do nothing."""
        inert = []
        if self.fixed_mix is not None and "fixed_mix" not in self.knn:
            inert.append(f"{join_key(where, 'fixed_mix')} weights the fixed_mix row, and knn does not list it")
        if self.gloss_texts != ["definition"] and not {"senses_glosses", "senses_prior"} & set(self.knn):
            inert.append(f"{join_key(where, 'gloss_texts')} chooses the glosses of the rows senses_glosses and "
                         "senses_prior, and knn lists neither")
        for what in inert:
            print(f"warning: {what}: it has no effect", file=sys.stderr)


TABLE_ONLY = ("name", "test", "features", "knn", "fixed_mix", "head", "probes", "training")  # keys `wsd senses`
# never reads (a shared config holds them for the table: only a --set of one is said to do nothing)


def warn_senses_inert(overrides: list[str]) -> None:
    """One warning line per ``--set`` that ``wsd senses`` does not read (it acts on the table alone)."""
    for assignment in overrides:
        top = assignment.partition("=")[0].strip().split(".")[0]
        if top in TABLE_ONLY:
            print(f"warning: --set {assignment}: wsd senses does not read {top} (a setting of the table made by "
                  "`elmo-tasks wsd`): it has no effect", file=sys.stderr)


def resolve_wsd(raw: dict, source: str = "config") -> WsdConfig:
    """Check a raw dict: keys, feature-source sections and the head section are resolved with defaults."""
    cfg = build(WsdConfig, copy.deepcopy(raw), f"{source}:")
    cfg.sources = {str(k): resolve_component(FEATURES, v, f"{source}: sources.{k}") for k, v in cfg.sources.items()}
    if cfg.head is not None:
        cfg.head = resolve_component(HEADS, cfg.head, f"{source}: head")
        takes = getattr(HEADS.get(cfg.head["name"]), "example_type", None)
        if takes not in (None, "WsdSentence"):  # a head for other examples would fail inside its training
            fits = [h for h in HEADS.names() if getattr(HEADS.get(h), "example_type", None) == "WsdSentence"]
            raise ConfigError(f"{source}: head.name {cfg.head['name']} takes {takes} examples, but wsd trains on "
                              f"WsdSentence examples (sense-annotated sentences); use {' or '.join(fits)}, or "
                              "head: null")
    return cfg


def bilm_sources(sources: dict) -> list[str]:
    """The sources whose component declares a ``bilm`` key (the ``elmo`` source, or a plugin's biLM source):
    what ``--bilm`` sets, and the rows the paper's biLM layers are published for."""
    out = []
    for k, v in sources.items():
        name = v.get("name") if isinstance(v, dict) else None
        if isinstance(name, str) and name in FEATURES and "bilm" in getattr(FEATURES.get(name).Config,
                                                                             "__dataclass_fields__", {}):
            out.append(k)
    return out


def load_wsd_config(path: str | Path | None, overrides: list[str] = (), features: list[str] | None = None,
                    bilm: str | None = None, train: str | None = None, test: list[str] | None = None) -> WsdConfig:
    """Read a YAML config (a path or a packaged config's name; None: built-in defaults), apply ``--set``
    overrides, ``--features``, ``--bilm`` (the biLM of every ``elmo`` source), ``--train`` and ``--test``."""
    raw = load_raw(find_config(path), overrides) if path is not None else {}
    if train is not None:
        raw["train"] = train
    if test is not None:
        raw["test"] = list(test)
    if path is None:
        for a in overrides:
            apply_set(raw, a)
    if bilm is not None:
        elmo = bilm_sources(raw.get("sources") or {})
        if not elmo:
            raw.setdefault("sources", {})["elmo"] = {"name": "elmo"}
            elmo = ["elmo"]
        for k in elmo:
            raw["sources"][k]["bilm"] = bilm
            raw["sources"][k].pop("options_file", None)
            raw["sources"][k].pop("weights_file", None)
    if features is not None:
        raw["features"] = list(features)
    elif not raw.get("features"):
        raw["features"] = list(raw.get("sources") or {})
    return resolve_wsd(raw, str(path) if path is not None else "(no --config)")

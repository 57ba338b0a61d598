"""Run configs: YAML -> checked dataclasses; ``--set key.sub=value`` overrides; resolved config for saving.

A config has the sections ``name``, ``data``, ``features``, ``head``, ``training`` and optionally ``compare``.
A component section (``features``, ``head``, a mix, a concat member) is ``{name: REGISTERED_NAME, **hparams}``;
the hyperparameters are checked against the component's ``Config`` dataclass. Unknown keys and unknown names
are errors listing the valid ones. Configs hold hyperparameters only: dimensions and label sets come from code
and data. The checking itself is ``elmo_tasks.components``; this module sits above data, features and heads and
imports their packages, so the registries it looks names up in are full (docs/layers.md).
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml


from elmo_features.util.errors import ConfigError
from elmo_features.util.paths import same_file
from elmo_features.util.provenance import write_text_atomic
from elmo_features.util.config_files import apply_set, read_config_file
from elmo_features.util.schema import Int, List, Map, Num, Str, build, check_options, key, settings_rule, to_dict
from elmo_features.util.wording import did_you_mean

from elmo_tasks import data as _data, features as _features, heads as _heads  # noqa: F401  (fills the registries)
from elmo_tasks.components import resolve_component
from elmo_tasks.data import get_reader
from elmo_tasks.data.registry import check_reader_values, reader_example_types
from elmo_tasks.registry import FEATURES, HEADS, READERS


# ---------------------------------------------------------------- the run config

@dataclass
class DataConfig:
    """Where the data is and how to read it (reader options are checked against the reader's signature)."""

    reader: str = key(doc="a registered reader (conll2003, tsv, csv, sst, hf, raganato: elmo-tasks components readers)")
    train: str = key(doc="the training file or folder")
    dev: str | None = key(default=None, doc="the early-stopping dev set")
    test: str | None = key(default=None, doc="the test set")
    reader_options: dict = key(factory=dict, doc="keyword options of the reader")
    max_train: int | None = key(Int(min=1, nullable=True), None, doc="keep the first N training sentences (null: all)")
    max_dev: int | None = key(Int(min=1, nullable=True), None, doc="keep the first N dev sentences (null: all)")
    max_test: int | None = key(Int(min=1, nullable=True), None, doc="keep the first N test sentences (null: all)")

    def same_files(self) -> list[tuple[str, str]]:
        """The pairs of splits (in train, dev, test order) that name one file or folder (links included)."""
        splits = [s for s in ("train", "dev", "test") if getattr(self, s) is not None]
        return [(a, b) for i, a in enumerate(splits) for b in splits[i + 1:]
                if same_file(getattr(self, a), getattr(self, b))]


SEED_MAX = 2**32 - 1  # numpy's legacy seeding range
SEED = Int(min=0, max=SEED_MAX)


def check_seeds(seeds: list[int], where: str) -> None:
    """Seeds in numpy's range and no seed twice (a repeated seed would run the same run twice into one folder and
    report a spread of 0)."""
    List(SEED).check(seeds, where)
    dup = sorted({s for s in seeds if seeds.count(s) > 1})
    if dup:
        raise ConfigError(f"{where}: seed {dup[0]} is given twice; each seed runs once")


@dataclass
class TrainingConfig:
    """The training loop: Adam (or SGD), an optional learning-rate schedule, early stopping on the dev metric,
    gradient clipping."""

    seed: int = key(SEED, 1)
    max_epochs: int = key(Int(min=1), 10)
    patience: int = key(Int(min=0), 3, doc="epochs without dev improvement before stopping")
    batch_size: int = key(Int(min=1), 32)
    eval_batch_size: int = key(Int(min=1), 256)
    lr: float = key(Num(gt=0, max=10), 1e-3, doc="learning rate (a larger one diverges: the run stops with an error)")
    weight_decay: float = key(Num(min=0, max=1), 0.0, doc="L2 penalty of the optimizer")
    grad_clip: float | None = key(Num(gt=0, nullable=True), 5.0,
                                  doc="max gradient L2 norm; null = no clipping")
    optimizer: Literal["adam", "sgd"] = "adam"
    momentum: float = key(Num(min=0, lt=1), 0.0, doc="sgd only (Ma & Hovy 2016: 0.9)")
    lr_decay: float = key(Num(min=0), 0.0,
                          doc="lr in epoch e = lr / (1 + lr_decay * (e - 1)) (Ma & Hovy 2016: 0.05); 0 = constant")
    lr_reduce_factor: float = key(Num(gt=0, max=1), 1.0,
                                  doc="lr *= this after lr_reduce_patience epochs in a row without dev improvement; "
                                      "1 = never")
    lr_reduce_patience: int = key(Int(min=1), 1, doc="(the count restarts after each reduction)")

    def check(self, where: str) -> None:
        if self.momentum and self.optimizer != "sgd":
            settings_rule(f"{where}.momentum: applies to optimizer: sgd only (optimizer is {self.optimizer!r}); "
                              "remove it or set optimizer: sgd")


@dataclass
class CompareConfig:
    """Feature-source variants (name -> features section) and seeds for ``elmo-tasks compare``."""

    sources: dict = key(factory=dict, doc="name -> features section; at least one")
    seeds: list[int] = key(List(SEED, min_len=1), factory=lambda: [1, 2, 3])
    folds: int | None = key(Int(min=3, nullable=True), None,
                            doc="K-fold cross-validation over train + dev + test (one fold tests, one stops early); "
                                "null: the fixed split")
    fold_seed: int = key(SEED, 0, doc="the permutation that cuts the folds (the same for every source and seed)")
    seeds_by_source: dict[str, list[int]] = key(Map(List(SEED, min_len=1)), factory=dict,
                                                doc="source -> its own seeds (else `seeds`)")

    def check(self, where: str) -> None:
        if not self.sources:
            raise ConfigError(f"{where}.sources: list at least one named feature-source variant")
        check_seeds(self.seeds, f"{where}.seeds")
        for name, seeds in self.seeds_by_source.items():
            check_seeds(seeds, f"{where}.seeds_by_source.{name}")
            if name not in self.sources:
                raise ConfigError(f"{where}.seeds_by_source: {name!r} is not a source; "
                                  f"sources: {', '.join(self.sources)}")

    def seeds_of(self, name: str) -> list[int]:
        """The seeds source ``name`` runs with: its ``seeds_by_source`` entry, else ``seeds``."""
        return list(self.seeds_by_source.get(name, self.seeds))


TOP_KEYS = ("name", "data", "features", "head", "training", "compare")


@dataclass
class RunConfig:
    """A checked config; ``features``/``head`` are resolved component dicts."""

    name: str
    data: DataConfig
    features: dict
    head: dict
    training: TrainingConfig
    compare: CompareConfig | None = None

    def to_dict(self) -> dict:
        d = {"name": self.name, "data": to_dict(self.data), "features": copy.deepcopy(self.features),
             "head": copy.deepcopy(self.head), "training": to_dict(self.training)}
        if self.compare is not None:
            d["compare"] = to_dict(self.compare)
        return d

    def with_features(self, features: dict, seed: int | None = None) -> "RunConfig":
        """A copy with another features section (already resolved) and optionally another seed."""
        new = copy.deepcopy(self)
        new.features = copy.deepcopy(features)
        new.compare = None
        if seed is not None:
            new.training.seed = seed
        return new


def check_reader_options(reader: str, options: dict, where: str) -> None:
    """Unknown reader name or option, or an option of the wrong type -> ConfigError listing the valid ones."""
    try:
        fn = get_reader(reader)
    except KeyError as e:
        raise ConfigError(f"{where}.reader: {e.args[0]}") from None
    check_options(fn, options, f"{where}.reader_options")
    check_reader_values(reader, options, f"{where}.reader_options")


def check_reader_fits_head(reader: str, head: str, source: str) -> None:
    """ConfigError when the reader's examples (its return annotation) are not the kind the head takes (its
    ``example_type``), e.g. a sentence-label reader (tsv) with a token tagger: it would fail inside training.
    A reader or head that declares no known kind is not checked."""
    wanted = getattr(HEADS.get(head), "example_type", None)
    kinds = {getattr(HEADS.get(h), "example_type", None) for h in HEADS.names()} - {None}
    given = reader_example_types(reader) & kinds
    if wanted is None or not given or wanted in given:
        return
    readers = [r for r in READERS.names() if wanted in reader_example_types(r)]
    heads = [h for h in HEADS.names() if getattr(HEADS.get(h), "example_type", None) in given]
    raise ConfigError(f"{source}: data.reader {reader} gives {'/'.join(sorted(given))} examples, but head.name {head} "
                      f"takes {wanted} examples; use a reader of those ({', '.join(readers) or 'none registered'}) "
                      f"or a head for {reader}'s ({', '.join(heads) or 'none registered'})")


def resolve(raw: dict, source: str = "config") -> RunConfig:
    """Check a raw config dict and fill in every default."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping with keys {', '.join(TOP_KEYS)}")
    unknown = sorted(set(raw) - set(TOP_KEYS))
    if unknown:
        raise ConfigError(f"{source}: unknown top-level key(s) {', '.join(map(repr, unknown))}; "
                          f"valid keys: {', '.join(TOP_KEYS)}")
    for k in ("name", "data", "features", "head"):
        if k not in raw:
            raise ConfigError(f"{source}: missing required section {k!r}")
    name = Str().check(raw["name"], f"{source}: name")
    data = build(DataConfig, raw["data"], f"{source}: data")
    check_reader_options(data.reader, data.reader_options, f"{source}: data")
    features = resolve_component(FEATURES, raw["features"], f"{source}: features")
    head = resolve_component(HEADS, raw["head"], f"{source}: head")
    training = build(TrainingConfig, raw.get("training"), f"{source}: training")
    compare = None
    if raw.get("compare") is not None:
        compare = build(CompareConfig, raw["compare"], f"{source}: compare")
        compare.sources = {
            str(k): resolve_component(FEATURES, v, f"{source}: compare.sources.{k}") for k, v in compare.sources.items()
        }
    return RunConfig(name, data, features, head, training, compare)


def _unshare(node: Any) -> Any:
    """A copy in which YAML anchors/aliases are independent, so ``--set`` changes only the path it names."""
    if isinstance(node, dict):
        return {k: _unshare(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_unshare(v) for v in node]
    return node


PACKAGED_CONFIGS = Path(__file__).resolve().parents[1] / "configs"  # the task (and biLM training) configs that ship


def packaged_configs() -> dict[str, Path]:
    """Packaged config name (its path under ``tasks/configs`` without ``.yaml``, e.g. ``ner_conll2003``,
    ``fusion/ner``) -> file, sorted by name."""
    files = sorted(PACKAGED_CONFIGS.rglob("*.yaml"))
    return {f.relative_to(PACKAGED_CONFIGS).with_suffix("").as_posix(): f for f in files}


def packaged_name(spec: str) -> str:
    """The packaged config name ``spec`` stands for: ``NAME``, ``NAME.yaml`` or ``configs/NAME.yaml`` (the path a
    clone of the repository has)."""
    name = spec[: -len(".yaml")] if spec.endswith(".yaml") else spec
    return name[len("configs/"):] if name.startswith("configs/") else name


def find_config(spec: str | Path) -> Path:
    """The config file ``spec`` names: an existing file wins, else a packaged config's name (so that the
    documented commands work from a pip install in any folder; a folder of that name does not hide it), else an
    existing path (a folder: refused where it is read); else one ConfigError line."""
    if not isinstance(spec, (str, os.PathLike)):
        raise TypeError(f"find_config: spec must be a config's path or packaged name (a str or Path), got "
                        f"{type(spec).__name__} {spec!r:.40}")
    path = Path(spec).expanduser()
    if path.is_file():
        return path
    packaged = packaged_configs()
    name = packaged_name(str(spec))
    if name in packaged:
        return packaged[name]
    if path.exists():
        return path
    raise ConfigError(f"{spec}: config file not found, and no packaged config has that name"
                      f"{did_you_mean(name, packaged)}; `elmo-tasks configs list` shows the packaged ones "
                      "(`elmo-tasks configs show NAME --out FILE` copies one)")


def load_raw(path: str | Path, overrides: list[str] | tuple[str, ...] | None = ()) -> dict:
    """Read a YAML config and apply ``--set`` overrides (not yet checked; the one ``--set`` syntax of every command:
    ``elmo_features.util.config_files.apply_set``)."""
    _check_path_argument(path)
    overrides = () if overrides is None else overrides
    if isinstance(overrides, (str, bytes, dict, set, frozenset)) or not hasattr(overrides, "__iter__"):
        raise TypeError(f"overrides must be a list of 'key.sub=value' strings (in the order they apply), got "
                        f"{overrides!r}")
    overrides = list(overrides)  # (a generator is read once: here)
    if not all(isinstance(a, str) for a in overrides):
        raise TypeError(f"overrides must be a list of 'key.sub=value' strings, got {overrides!r}")
    path = Path(path)
    raw = read_config_file(path)
    raw = _unshare(raw if raw is not None else {})
    for a in overrides:
        apply_set(raw, a)
    return raw


def _check_path_argument(path: Any) -> None:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"load_config: path must be a YAML file's path or a packaged config's name, got "
                        f"{type(path).__name__}" + ("; for a dict, use elmo_tasks.experiment.config.resolve(dict)"
                                                    if isinstance(path, dict) else ""))


def load_config(path: str | Path, overrides: list[str] | tuple[str, ...] | None = ()) -> RunConfig:
    """Read, override and check a YAML config (a path, or a packaged config's name: ``find_config``)."""
    _check_path_argument(path)
    return resolve(load_raw(find_config(path), overrides), source=str(path))


def dump_yaml(data: Any, path: str | Path) -> None:
    """Write YAML atomically."""
    write_text_atomic(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))

"""The feature-source contract: frozen per-sentence features computed once, a trainable part (e.g. a mix).

A source turns a data split into per-sentence frozen arrays once (``precompute``, cached on disk when the
source is expensive), pads a batch of them (``collate``), and maps the padded batch to (B, T, D) features in
``forward`` (where trainable parts such as ELMo's scalar mix live; they train with the head). Sources are
built from a resolved ``{name: ..., **hparams}`` section by ``build_features``.

What the rest of the toolkit needs to know about a source, it asks the class (never its registered name):
the input files it reads (``input_paths``, checked before any work), the fingerprints of its frozen models
(``frozen_fingerprints``, recorded in reports and summaries and checked by ``compare --resume`` and
``predict``), and whether it gives every layer as per-word arrays (``offers_layers`` / ``word_layers``, the
WSD 1-NN rows per layer). A source registered from a user's package gets all of that by declaring them
(docs/adding_a_source.md).
"""
from __future__ import annotations

import abc
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from elmo_features.util.devices import module_device
from elmo_features.formats.default_model import empty_spec_problem
from elmo_features.util.errors import ConfigError, ElmoTasksError
from elmo_features.util.paths import check_input_dir, check_input_file, check_input_path

from elmo_tasks.components import component_config
from elmo_tasks.data.fetch import fetch_hint
from elmo_tasks.plugins import PluginError
from elmo_tasks.registry import FEATURES, class_contract


class Memo:
    """In-memory caches shared by the runs that get one FeatureContext (e.g. every run of a comparison, so
    that its k-fold cross-validation embeds each sentence once): loaded frozen models, embedded sentences,
    read data files. A copy sent to another process (pickled) starts empty."""

    max_datasets = 6  # embedded data sets kept whole (train/dev/test of two models)

    def __init__(self, keep_arrays: bool = True) -> None:
        self.models: dict[str, Any] = {}  # loader arguments -> a frozen biLM, static vectors, ...
        self.datasets: OrderedDict[str, list] = OrderedDict()  # data set key -> per-sentence arrays (LRU)
        self.sentences: dict[str, dict[tuple, Any]] = {}  # model key -> tokens -> array (one model at a time)
        self.examples: dict[str, list] = {}  # (reader, path, mtime, options) -> examples
        self.keep_arrays = keep_arrays

    def streaming(self) -> "Memo":
        """A memo sharing this one's loaded models that keeps no embedded arrays: for streams of sentences too
        many to hold (e.g. every WordNet gloss), embedded chunk by chunk and reduced at once."""
        memo = Memo(keep_arrays=False)
        memo.models = self.models
        return memo

    def __reduce__(self):
        return (Memo, ())

    def model(self, key: str, load: Callable[[], Any]) -> Any:
        """The model stored under ``key``, loaded by ``load()`` the first time."""
        if key not in self.models:
            self.models[key] = load()
        return self.models[key]

    def recall(self, key: str, model_key: str, sentences: list[list[str]]) -> list | None:
        """The arrays of a data set remembered under ``key``, else of its sentences (any subset of the
        remembered ones, e.g. a cross-validation fold) under ``model_key``; None when one is missing."""
        if key in self.datasets:
            self.datasets.move_to_end(key)
            return self.datasets[key]
        memo = self.sentences.get(model_key, {})
        hits = [memo.get(tuple(s)) for s in sentences]
        return hits if sentences and all(h is not None for h in hits) else None

    def remember(self, key: str, model_key: str, sentences: list[list[str]], arrays: list) -> None:
        """Keep a data set's arrays (the last ``max_datasets`` data sets; the sentences of one model)."""
        if not self.keep_arrays:
            return
        self.datasets[key] = arrays
        while len(self.datasets) > self.max_datasets:
            self.datasets.popitem(last=False)
        if model_key not in self.sentences:
            self.sentences.clear()  # one model's sentences at a time bounds the memory
            self.sentences[model_key] = {}
        self.sentences[model_key].update((tuple(s), a) for s, a in zip(sentences, arrays))


@dataclass
class FeatureContext:
    """Run settings that are not hyperparameters: where frozen features are cached, progress bars, the torch
    device ("cpu", "cuda:0", ...) the frozen models compute on; and the in-memory caches (``memo``) shared by
    every run given this context (``dataclasses.replace`` keeps it)."""

    cache_dir: Path | None = None
    progress: bool | None = None
    device: str = "cpu"
    memo: Memo = field(default_factory=Memo, compare=False, repr=False)


@dataclass(frozen=True)
class InputPath:
    """A file or folder a source's config names: its key (for messages), the path, and what it must be."""

    key: str
    path: str
    kind: str = "file"  # "file" | "folder" | "path" (either)
    hint: str = ""  # what to do when it is missing (default: the `data get` command of a public data set)


class FeatureSource(nn.Module, abc.ABC):
    """Base class of feature sources: implement ``precompute``, ``collate`` and ``forward``; declare the rest."""

    Config: ClassVar[type]
    output_dim: int
    cached_on_disk: ClassVar[bool] = False  # precompute fills context.cache_dir (computed once before parallel jobs)
    offers_layers: ClassVar[bool] = False  # word_layers gives every layer (L, n, D), whatever the fusion setting
    fingerprint_key: ClassVar[str] = "model_fingerprint"  # the report key of the frozen model's fingerprint
    storage_keys: ClassVar[tuple[str, ...]] = ()  # config keys that say where or how the frozen inputs are stored,
    # not what they give (compare tells two sources apart by the rest and their lookup_fingerprints)
    # precompute's items are float arrays (..., n, D) and a token's features depend on its own rows alone (no
    # statistic over the batch): a head reading some tokens may keep those rows only (tasks/features/subset.py)
    tokenwise: bool = False

    def __init__(self, config: Any, context: FeatureContext):
        super().__init__()
        self.config = config
        self.context = context

    # ------------------------------------------------------------ declared by the class (before any work)
    @classmethod
    def input_paths(cls, config: Any) -> list[InputPath]:
        """The files and folders ``config`` names (checked by ``check_inputs`` before any work; relative ones
        resolve against the current folder). Default: none."""
        return []

    @classmethod
    def check_inputs(cls, config: Any, where: str) -> None:
        """Raise a one-line PathError for a missing input (``where``: the config key path for messages).
        Default: each of ``input_paths`` exists as the kind it declares."""
        for p in cls.input_paths(config):
            at, hint = f"{where}.{p.key}", p.hint or fetch_hint(p.path)
            if p.kind == "folder":
                check_input_dir(p.path, at, hint=hint)
            elif p.kind == "file":
                check_input_file(p.path, at, hint)
            else:
                check_input_path(p.path, at, hint)

    @classmethod
    def frozen_fingerprints(cls, config: Any, memo: Memo) -> list[str]:
        """Fingerprints of the frozen models ``config`` loads (content hashes), without building the source: a
        changed model changes them, so ``compare --resume`` refuses to mix runs and ``predict`` warns. Default:
        none (the source holds no frozen model)."""
        return []

    @classmethod
    def lookup_fingerprints(cls, config: Any, memo: Memo) -> list[str]:
        """Fingerprints that are equal when two configs' frozen inputs give the same features, however they are
        stored (a vectors file with its rows in another order): ``compare`` refuses two such sources. Default:
        ``frozen_fingerprints``."""
        return cls.frozen_fingerprints(config, memo)

    @classmethod
    def describe_frozen(cls, config: Any) -> str:
        """What the frozen fingerprints are of, for messages (e.g. "encoder minilm-l6"). Default: the input
        paths, else the source class."""
        paths = cls.input_paths(config)
        return ", ".join(f"{p.key} {p.path}" for p in paths) if paths else f"the frozen model of {cls.__name__}"

    # ------------------------------------------------------------ the features
    @abc.abstractmethod
    def precompute(self, sentences: list[list[str]], split: str) -> list[Any]:
        """Frozen features, one item per sentence (e.g. an array (n_i, D) or (L, n_i, D))."""

    @abc.abstractmethod
    def collate(self, items: list[Any], T: int) -> Any:
        """Pad a batch of precomputed items to T tokens (tensors)."""

    @abc.abstractmethod
    def forward(self, batch: Any, mask: torch.Tensor) -> torch.Tensor:
        """Padded batch + mask (B, T) -> features (B, T, output_dim)."""

    def word_layers(self, sentences: list[list[str]], split: str) -> list[np.ndarray]:
        """Per-word arrays (L, n_i, D) float32 per sentence with every layer the source has (``offers_layers``),
        whatever its fusion or fixed layer: the WSD 1-NN rows per layer. Default: ``precompute``'s per-sentence
        arrays as one layer (n_i, D) -> (1, n_i, D)."""
        out = []
        for i, a in enumerate(self.precompute(sentences, split)):
            if not isinstance(a, np.ndarray) or a.ndim not in (2, 3) or a.shape[-2] != len(sentences[i]):
                raise TypeError(f"feature source {type(self).__name__}: precompute gives {type(a).__name__} items, "
                                "not per-word arrays (n, D); override word_layers to give (L, n, D) arrays")
            out.append(a[None] if a.ndim == 2 else a)
        return out

    def stream_layers(self, sentences: list[list[str]], split: str) -> Sequence[np.ndarray] | None:
        """``word_layers`` of a long list, read back lazily (nothing in memory until indexed) and with the vectors
        ``word_layers`` gives (the batches of embedding the whole list); None when the source cannot (then callers
        embed the list in chunks, whose batches may round differently in the last float digit)."""
        return None

    def items_of_layers(self, layers: list[np.ndarray]) -> list:
        """``precompute``'s items from ``word_layers``'s arrays of the same sentences (a ``tokenwise`` source)."""
        raise NotImplementedError(f"{type(self).__name__} is tokenwise but has no items_of_layers")

    def fusion_layers(self) -> tuple[int, int] | None:
        """(L, D) of the unfused layer stack ``layers`` gives (for a head's ``output_mix``); None: no layers."""
        return None

    def layers(self, batch: Any) -> torch.Tensor:
        """The unfused layers (L, B, T, D) of a collated batch (only when ``fusion_layers`` is not None)."""
        raise NotImplementedError(f"{type(self).__name__} has no layers to fuse")

    def regularization(self) -> torch.Tensor:
        """A penalty added to the training loss (e.g. the mix weights' L2); 0 by default."""
        return torch.zeros((), device=module_device(self))

    def report(self) -> dict:
        """JSON-able facts for results (mix weights, gamma, OOV rates). The base gives the frozen model's
        fingerprint under ``fingerprint_key`` (from ``frozen_fingerprints``): extend it with
        ``{**super().report(), ...}``."""
        fps = type(self).frozen_fingerprints(self.config, self.context.memo)
        return {self.fingerprint_key: fps[0] if len(fps) == 1 else fps} if fps else {}


FEATURES.set_contract(class_contract(FeatureSource))


def section_class(section: dict) -> type[FeatureSource]:
    """The registered class of a resolved ``{name: ..., **hparams}`` features section."""
    return FEATURES.get(section["name"])


def plugin_call(section: dict, what: str, call: Callable[[type[FeatureSource]], Any]) -> Any:
    """``call(cls)`` for the section's class; an unexpected exception from a class a plugin registered (not an
    ElmoTasksError or OSError, which say what is wrong) is one PluginError line naming the plugin module."""
    cls = section_class(section)
    try:
        return call(cls)
    except (ElmoTasksError, OSError):
        raise
    except Exception as e:
        module = getattr(cls, "__module__", "") or "?"
        if module == "elmo_tasks" or module.startswith("elmo_tasks."):
            raise
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise PluginError(f"plugin module {module}: feature source {section['name']} failed while {what} "
                          f"({type(e).__name__}: {first}); this is a bug in the plugin: rerun with --debug for "
                          "the traceback") from e


def check_section_inputs(section: dict, where: str) -> None:
    """Every input of a resolved features section exists (the class's ``check_inputs``); an empty path (an unset
    variable, which would read as the current folder) is refused first, naming its key."""
    for p in section_input_paths(section):
        if problem := empty_spec_problem(p.path, f"{where}.{p.key}", "the file or folder it names"):
            raise ConfigError(problem)
    plugin_call(section, "checking its inputs",
                lambda cls: cls.check_inputs(component_config(FEATURES, section), where))


def section_lookup_fingerprints(section: dict, memo: Memo) -> list[str]:
    """The class's ``lookup_fingerprints`` of a resolved features section."""
    return plugin_call(section, "fingerprinting its frozen inputs",
                       lambda cls: cls.lookup_fingerprints(component_config(FEATURES, section), memo))


def section_storage_keys(section: dict) -> set[str]:
    """The keys of a resolved section that name where or how its frozen inputs are stored: its input paths' keys
    and the class's ``storage_keys``."""
    return {p.key for p in section_input_paths(section)} | set(section_class(section).storage_keys)


def section_input_paths(section: dict) -> list[InputPath]:
    """The inputs a resolved features section names (the class's ``input_paths``)."""
    return plugin_call(section, "listing its input paths",
                       lambda cls: cls.input_paths(component_config(FEATURES, section)))


def section_frozen_description(section: dict) -> str:
    """What a resolved features section's fingerprints are of (the class's ``describe_frozen``)."""
    return section_class(section).describe_frozen(component_config(FEATURES, section))


def section_fingerprints(section: dict, memo: Memo) -> list[str]:
    """The fingerprints of the frozen models a resolved features section loads (the class's
    ``frozen_fingerprints``), in report order."""
    config = component_config(FEATURES, section)
    config_check = getattr(config, "check", None)
    if config_check is not None:
        config_check("features")
    return plugin_call(section, "fingerprinting its frozen inputs", lambda cls: cls.frozen_fingerprints(config, memo))


def pad_tokens(items: list[np.ndarray], T: int) -> torch.Tensor:
    """Stack arrays (..., n_i, D) into a zero-padded tensor (..., B, T, D) (token axis -2)."""
    if not items:
        raise ValueError("pad_tokens: empty batch")
    lead, D = items[0].shape[:-2], items[0].shape[-1]
    # torch's allocator (64-byte aligned), not NumPy's (16): MKL's GEMM results depend on the alignment of
    # its inputs, so a NumPy buffer made the head's training depend on the process's heap history (a run
    # that computed its features differed from the same run reading them from the cache). Built on the
    # CPU explicitly (host memory, whatever the default device): the caller moves the batch
    out = torch.zeros((*lead, len(items), T, D), dtype=torch.float32, device="cpu")
    view = out.numpy()
    for b, a in enumerate(items):
        view[..., b, : a.shape[-2], :] = a
    return out


def build_features(resolved: dict, context: FeatureContext) -> FeatureSource:
    """A feature source from a resolved ``{name: ..., **hparams}`` section."""
    cls = FEATURES.get(resolved["name"])
    return cls(component_config(FEATURES, resolved), context)


def check_items(source: "FeatureSource", sentences: list[list[str]], items: list, split: str) -> list:
    """``precompute``'s items keep its contract: one per sentence, and an array item has one row per token, (n, D) or
    (L, n, D) (padding would silently give a short item's last tokens zero features). TypeError naming the source."""
    name = type(source).__name__
    if len(items) != len(sentences):
        raise TypeError(f"feature source {name}: precompute gave {len(items)} items for the {len(sentences)} "
                        f"sentences of {split}; give one per sentence")
    for i, (item, sentence) in enumerate(zip(items, sentences)):
        shape = getattr(item, "shape", None)
        if shape is not None and len(shape) in (2, 3) and shape[-2] != len(sentence):
            raise TypeError(f"feature source {name}: precompute gave {shape[-2]} rows for sentence {i + 1} of "
                            f"{split}, which has {len(sentence)} tokens; give one row per token, (n, D) or (L, n, D)")
    return items

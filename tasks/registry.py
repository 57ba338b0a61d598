"""Registries of named components: heads, feature sources, layer fusions, char encoders, data readers.

A component registers itself where it is defined, with a decorator::

    @HEADS.register("token_tagger")
    class TokenTagger(Head): ...

and its package's ``__init__`` imports the module, so importing ``elmo_tasks.heads`` (``elmo_tasks.features``,
``elmo_tasks.data``) fills the registry before any lookup. Components from a user's own package register the same
way, loaded with ``--include MODULE`` or the ``elmo_tasks.plugins`` entry-point group (``elmo_tasks.plugins``).

Each registry can hold a *contract* (``set_contract``), installed by the module that defines the base class:
a component that does not meet it (not a subclass of the base, a missing method, no ``Config`` dataclass) is
refused when it registers, with one line naming what is missing, rather than failing deep inside a run.

This module imports nothing from ``tasks``: it is the bottom layer, so every layer can register into it
(docs/layers.md). Configs name components by these names; a failed lookup is an error listing the valid names.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

from elmo_features.util.errors import ElmoTasksError
from elmo_features.util.wording import did_you_mean

PLUGIN_HINT = ("a component of your own package: load it with --include MODULE, or install a package that declares "
               "it in the entry-point group elmo_tasks.plugins (docs/adding_a_head.md)")


class RegistryError(KeyError):
    """An unknown name was looked up in a registry."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class ContractError(ElmoTasksError, ValueError):
    """A component does not meet its registry's contract (raised when it registers)."""


_PLUGINS_USED: dict[str, None] = {}  # the plugin components this command looked up (in order; see plugins_used)


def plugins_used() -> list[str]:
    """The components of plugin modules (not this package's) looked up since ``new_command``, e.g.
    "head bad_head (module badhead)": an unexpected error then names them."""
    return list(_PLUGINS_USED)


def forget_plugins_used() -> None:
    """A new command starts (``elmo_tasks.cli.main``)."""
    _PLUGINS_USED.clear()


class Registry:
    """A name -> component map, filled by ``@registry.register(name)`` where each component is defined."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Any] = {}
        self._contract: Callable[[str, Any], list[str]] | None = None

    def set_contract(self, check: Callable[[str, Any], list[str]]) -> None:
        """``check(name, obj)`` lists what ``obj`` lacks (empty: it meets the contract); applied to every entry
        registered so far and from now on."""
        self._contract = check
        for name, obj in self._entries.items():
            self._enforce(name, obj)

    def _enforce(self, name: str, obj: Any) -> None:
        problems = self._contract(name, obj) if self._contract is not None else []
        if problems:
            where = f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"
            raise ContractError(f"{self.kind} {name!r} ({where}) cannot be registered: {'; '.join(problems)}")

    def add(self, name: str, obj: Any) -> None:
        """Register ``obj`` under ``name``; names must be unique and ``obj`` must meet the contract."""
        if not isinstance(name, str) or not name:
            raise ContractError(f"{self.kind} names are non-empty strings, got {name!r}")
        if name in self._entries:
            raise ContractError(f"{self.kind} {name!r} is already registered (by "
                                f"{getattr(self._entries[name], '__module__', '?')}); choose another name")
        self._enforce(name, obj)
        self._entries[name] = obj

    def register(self, name: str, **attributes: Any) -> Callable[[Any], Any]:
        """Decorator form of ``add``: ``@HEADS.register("crf_tagger")`` above the class. ``attributes`` are set on
        the component first (e.g. a reader's ``path_kind="folder"``)."""

        def deco(obj: Any) -> Any:
            for k, v in attributes.items():
                setattr(obj, k, v)
            self.add(name, obj)
            return obj

        return deco

    def get(self, name: str) -> Any:
        """The component called ``name``; an unknown name raises RegistryError listing the valid ones."""
        if not isinstance(name, str) or name not in self._entries:
            raise RegistryError(
                f"unknown {self.kind} {name!r}{did_you_mean(name, self.names())}; valid {self.kind} names: "
                f"{', '.join(self.names()) or '(none)'}; "
                f"{PLUGIN_HINT}"
            )
        obj = self._entries[name]
        module = getattr(obj, "__module__", "") or ""
        if module != "elmo_tasks" and not module.startswith(("elmo_tasks.", "elmo_features")):
            _PLUGINS_USED.setdefault(f"{self.kind} {name} (module {module})", None)
        return obj

    def names(self) -> list[str]:
        return sorted(self._entries)

    def items(self) -> list[tuple[str, Any]]:
        """(name, component) pairs by name: a listing, not a lookup (``plugins_used`` is left as it is)."""
        return sorted(self._entries.items())

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)


# Task heads (elmo_tasks.heads.base.Head subclasses), filled by the modules of tasks/heads/.
HEADS = Registry("head")

# Feature sources (elmo_tasks.features.base.FeatureSource subclasses), filled by tasks/features/.
FEATURES = Registry("feature source")

# Fusions of stacked layers (L, B, T, D) -> (B, T, D'), named under a source's ``mix:`` key and a head's
# ``output_mix`` key (the keys keep ELMo's word for the scalar mix; tasks/features/mix.py and fusion.py, docs/fusion.md).
FUSIONS = Registry("fusion")

# Character-level token encoders inside a head, named under ``chars:`` of crf_tagger / sentence_classifier
# (tasks/heads/chars.py, docs/strong_baselines.md).
CHAR_ENCODERS = Registry("char encoder")

# Data readers (path, **options) -> examples, named by ``data.reader`` (tasks/data/, docs/data.md).
READERS = Registry("data reader")


def class_contract(base: type, attributes: tuple[str, ...] = (),
                   config: bool = True) -> Callable[[str, Any], list[str]]:
    """A contract for class components: a subclass of ``base`` that implements every abstract method, has each
    class attribute in ``attributes`` and (``config``) a ``Config`` dataclass of its hyperparameters."""
    import dataclasses
    import inspect

    def check(name: str, obj: Any) -> list[str]:
        if not inspect.isclass(obj) or not issubclass(obj, base):
            return [f"must be a subclass of {base.__module__}.{base.__qualname__}"]
        problems = []
        missing = sorted(getattr(obj, "__abstractmethods__", ()))
        if missing:
            problems.append(f"missing method(s) {', '.join(missing)} of {base.__qualname__}")
        absent = [a for a in attributes if not hasattr(obj, a)]
        if absent:
            problems.append(f"missing class attribute(s) {', '.join(absent)}")
        if config and not (inspect.isclass(getattr(obj, "Config", None)) and dataclasses.is_dataclass(obj.Config)):
            problems.append("needs a Config dataclass of its hyperparameters (an empty @dataclass when it has none)")
        return problems

    return check

"""The one validation module: keys declared once, checked with one-line errors naming the key path."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Literal

import pytest

from elmo_features.util.errors import ConfigError
from elmo_features.util.schema import Int, List, Num, Record, Str, build, check_options, join_key, key, spec_of_type


@dataclass
class Inner:
    width: int = key(Int(min=1), path="embedding.dim", doc="nested in the file")
    mode: Literal["a", "b"] = "a"


@dataclass
class Section:
    name: str = key(doc="required: no default")
    lr: float = key(Num(gt=0), 1e-3, doc="a float key")
    dropout: float = key(Num(min=0, lt=1), 0.0)
    steps: int = 10
    layers: str | list[int] = "all"
    seeds: list[int] = key(List(Int(min=0), min_len=1), factory=lambda: [1])
    inner: Inner | None = None
    checked: bool = False

    def check(self, where: str) -> None:
        if self.steps == 13:
            raise ConfigError(f"{join_key(where, 'steps')}: unlucky")
        self.checked = True


def test_defaults_types_and_the_check_hook():
    s = build(Section, {"name": "x", "lr": 1, "inner": {"embedding": {"dim": 4}}}, "run.yaml:")
    assert s.checked and s.steps == 10 and s.seeds == [1] and s.layers == "all"
    assert s.lr == 1.0 and isinstance(s.lr, float)  # an integer given for a float key is a float
    assert s.inner == Inner(width=4, mode="a")
    assert build(Section, {"name": "x", "lr": "2e-3"}, "f:").lr == 2e-3  # YAML 1.1 reads 2e-3 as a string


@pytest.mark.parametrize("data, message", [
    ({"name": "x", "lrr": 1}, "run.yaml: unknown key 'lrr'; valid keys: name, lr, dropout, steps, layers, seeds"),
    ({}, "run.yaml: missing required key 'name'"),
    ({"name": 3}, "run.yaml: name: expected a string, got 3 (an integer)"),
    ({"name": "x", "lr": 0}, "run.yaml: lr: must be > 0, got 0"),
    ({"name": "x", "dropout": 1.0}, r"run.yaml: dropout: must be in [0, 1), got 1.0"),
    ({"name": "x", "steps": True}, "run.yaml: steps: expected an integer, got True (a boolean)"),
    ({"name": "x", "steps": 13}, "run.yaml: steps: unlucky"),
    ({"name": "x", "seeds": []}, "run.yaml: seeds: expected a list of at least 1 item(s), got 0"),
    ({"name": "x", "seeds": [1, -2]}, "run.yaml: seeds[1]: must be >= 0, got -2"),
    ({"name": "x", "layers": 3.5}, "run.yaml: layers: 3.5 (a number) is none of str | list[int]"),
    ({"name": "x", "inner": {"embedding": {}}}, "run.yaml: inner.embedding: missing required key 'dim'"),
    ({"name": "x", "inner": {"embedding": {"dim": 0}}}, "run.yaml: inner.embedding.dim: must be >= 1, got 0"),
    ({"name": "x", "inner": {"embedding": 4}}, "run.yaml: inner.embedding: expected a mapping, got 4"),
    ({"name": "x", "inner": {"embedding": {"dim": 2}, "mode": "c"}}, "run.yaml: inner.mode: must be one of 'a', 'b'"),
    ({"name": "x", "inner": {"dim": 2}}, "run.yaml: inner: unknown key 'dim'; valid keys: embedding, mode"),
    ({"name": "x", "inner": None, "lr": None}, "run.yaml: lr: must not be null"),
])
def test_errors_are_one_line_naming_the_key_path(data, message):
    with pytest.raises(ConfigError) as e:
        build(Section, data, "run.yaml:")
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_a_section_path_and_extra_keys():
    with pytest.raises(ConfigError, match=r"^cfg: training.lr: must be > 0"):
        build(Section, {"name": "x", "lr": -1}, "cfg: training")
    assert Record(Inner, extra=True).check({"embedding": {"dim": 2}, "other": 1}, "x") == Inner(2)
    with pytest.raises(ConfigError, match="unknown key 'other'"):
        Record(Inner).check({"embedding": {"dim": 2}, "other": 1}, "x")


def test_type_hints_stand_for_specs():
    assert spec_of_type(int | None).check(None, "x") is None
    assert spec_of_type(dict[str, list[int]]).check({"a": [1]}, "x") == {"a": [1]}
    with pytest.raises(ConfigError, match=r"x.a\[0\]: expected an integer"):
        spec_of_type(dict[str, list[int]]).check({"a": ["1"]}, "x")
    with pytest.raises(ConfigError, match="expected a string"):
        Str().check(1, "x")


def test_every_config_declares_each_key_once_with_its_spec():
    """The options blocks, the biLM training config and the run config are dataclasses of ``key`` fields: the
    schema that checks a file is derived from them, so no key has a second declaration."""
    from elmo_features.model import options
    from elmo_features.training.config import TrainConfig
    from elmo_tasks.experiment.config import TrainingConfig

    for name in ("char_cnn", "lstm", "transformer", "token_vectors"):
        block = options.OPTIONS_SCHEMA.fields[name]
        assert isinstance(block, Record) and all("spec" in f.metadata for f in fields(block.cls))
    assert all(f.metadata.get("spec") is not None for f in fields(TrainConfig))
    assert {f.name for f in fields(TrainingConfig)} >= {"lr", "seed", "max_epochs"}


def test_keyword_options_of_a_function_are_checked_like_keys():
    def reader(path: str, columns: Sequence[str] = ("a",), out: Path | None = None, header: bool | str = "auto"):
        return path

    assert check_options(reader, {"columns": ["x"], "out": object(), "header": True}, "r")["columns"] == ["x"]
    with pytest.raises(ConfigError, match=r"^r: unknown key 'colums'; valid keys: columns, out, header \(did you mean columns\?\)$"):
        check_options(reader, {"colums": []}, "r")
    with pytest.raises(ConfigError, match=r"^r.columns\[0\]: expected a string, got 1"):
        check_options(reader, {"columns": [1]}, "r")
    with pytest.raises(ConfigError, match=r"^r.header: 3 \(an integer\) is none of"):
        check_options(reader, {"header": 3}, "r")

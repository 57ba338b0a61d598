"""The layer plan of tasks/ (docs/layers.md): import-linter keeps it, the contract says what we mean, it catches
an upward import (even inside a function), and the registries are full wherever a name is looked up."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYERS = [  # highest first; siblings in one layer
    {"cli"},
    {"wsd.cli"},
    {"wsd.cli_senses"},
    {"wsd.sense_build", "wsd.raw_eval", "wsd.ranks", "wsd.run", "wsd.tagging", "wsd.sense_file", "wsd.tag_output",
     "wsd.multiword", "wsd.pos_head", "wsd.semcor_sums", "wsd.example_sums", "wsd.sense_method", "wsd.table", "wsd.plot", "wsd.config", "wsd.knn", "wsd.senses",
     "wsd.baselines", "wsd.vectors"},
    {"experiment.compare"},
    {"experiment.run", "experiment.parallel", "experiment.preflight", "experiment.compare_checks",
     "experiment.data_record", "experiment.checkpoint", "experiment.run_folder"},
    {"experiment.training", "experiment.crossval", "experiment.plots", "experiment.summary"},
    {"experiment.data_parallel"},
    {"experiment.config", "experiment.records"},
    {"heads", "wsd.head", "wsd.gloss_cache"},
    {"features"},
    {"metrics"},
    {"data", "wsd.data"},
    {"components"},
    {"plugins"},
    {"registry"},
]
ROOM_CONTRACTS = {"tasks-experiment": "experiment", "tasks-wsd": "wsd"}  # rooms split across the layers above

ROOMS = [  # elmo_features, highest first (docs/layers.md)
    {"embed"},
    {"cli_embed", "hub"},
    {"training", "encoders"},
    {"embedding"},
    {"formats"},
    {"model"},
    {"util"},
]


def contracts() -> dict[str, dict]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    return {c["id"]: c for c in config["contracts"]}


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports")
    if exe is None:
        pytest.skip("lint-imports is not installed (pip install import-linter, or the package's `test` extra)")
    env = {**os.environ, "PYTHONPATH": str(cwd)}  # the code under cwd, not an installed copy
    return subprocess.run([exe, "--no-cache", "--no-logo"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_contracts_name_the_intended_layers():
    c = contracts()
    layers = c["tasks-layers"]
    assert layers["type"] == "layers" and layers["containers"] == ["elmo_tasks"] and layers["exhaustive"] is True
    assert [set(re.split(r"\s*[|:]\s*", layer.strip())) for layer in layers["layers"]] == LAYERS
    assert not layers.get("ignore_imports")  # no exceptions to the plan
    standalone = c["elmo-features-standalone"]
    assert (standalone["type"], standalone["source_modules"], standalone["forbidden_modules"]) == \
        ("forbidden", ["elmo_features"], ["elmo_tasks"])
    clis = c["cli-modules"]
    assert clis["type"] == "protected" and clis["allowed_importers"] == ["elmo_tasks.cli"]
    assert set(clis["protected_modules"]) == {"elmo_tasks.cli.run", "elmo_tasks.cli.components", "elmo_tasks.wsd.cli", "elmo_tasks.data.cli"}
    rooms = c["elmo-features-layers"]
    assert rooms["type"] == "layers" and rooms["containers"] == ["elmo_features"] and rooms["exhaustive"] is True
    assert [set(re.split(r"\s*[|:]\s*", layer.strip())) for layer in rooms["layers"]] == ROOMS
    assert not rooms.get("ignore_imports")
    top = {p.stem for p in (REPO / "elmo_features").glob("*.py") if p.stem != "__init__"}
    assert len(top) <= 8, f"elmo_features has {len(top)} top-level modules: {sorted(top)}"
    assert top | {p.parent.name for p in (REPO / "elmo_features").glob("*/__init__.py")} == set().union(*ROOMS)
    # every module and package of tasks/ is in a layer (what `exhaustive` checks, here without the tool); the
    # rooms split across layers have exhaustive contracts of their own, with the same order inside
    def children(folder: Path) -> set[str]:
        return ({p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
                | {p.parent.name for p in folder.glob("*/__init__.py")})

    top = children(REPO / "tasks")
    assert len(top - {p.parent.name for p in (REPO / "tasks").glob("*/__init__.py")}) <= 8
    placed = set().union(*LAYERS)
    assert layers["exhaustive_ignores"] == list(ROOM_CONTRACTS.values())
    assert top == {n.split(".")[0] for n in placed}
    for cid, room in ROOM_CONTRACTS.items():
        inner = c[cid]
        assert inner["containers"] == [f"elmo_tasks.{room}"] and inner["exhaustive"] is True
        names = [set(re.split(r"\s*[|:]\s*", layer.strip())) for layer in inner["layers"]]
        assert set().union(*names) == children(REPO / "tasks" / room)
        assert {n.split(".")[1] for n in placed if n.startswith(room + ".")} == set().union(*names)
        order = [next(i for i, layer in enumerate(LAYERS) if f"{room}.{n}" in layer) for layer in names for n in layer]
        assert order == sorted(order)  # the room's own order agrees with the plan


def test_lint_imports_keeps_every_contract():
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 kept, 0 broken" in result.stdout


def test_lint_imports_catches_upward_imports_inside_functions(tmp_path):
    """A copy of the code with a data module importing a head, and elmo_features importing tasks, both inside
    a function: the contracts break and name the import."""
    for package, name in (("elmo_features", "elmo_features"), ("tasks", "elmo_tasks")):  # (importable by name)
        shutil.copytree(REPO / package, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "models"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    with open(tmp_path / "elmo_tasks" / "data" / "types.py", "a", encoding="utf-8") as f:
        f.write("\n\ndef _upward():\n    from elmo_tasks.heads.base import Head\n\n    return Head\n")
    with open(tmp_path / "elmo_features" / "util" / "paths.py", "a", encoding="utf-8") as f:
        f.write("\n\ndef _into_tasks():\n    import elmo_tasks.data\n\n    return elmo_tasks.data\n")
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "4 kept, 2 broken" in result.stdout
    assert "elmo_tasks.data is not allowed to import elmo_tasks.heads" in result.stdout
    assert "elmo_features.util.paths -> elmo_tasks.data" in result.stdout


FULL = {  # every registry with every component of the code base
    "READERS": ["conll2003", "csv", "hf", "raganato", "sst", "tsv"],
    "FEATURES": ["concat", "elmo", "static", "transformer"],
    "FUSIONS": ["average", "concat_project", "gated", "layer_attention", "scalar"],
    "CHAR_ENCODERS": ["cnn", "lstm"],
    "HEADS": ["crf_tagger", "sentence_classifier", "token_tagger", "wsd_linear"],
}
# Fresh interpreters importing modules that look names up, in order: (module, the registries full afterwards;
# the others must still be empty, i.e. nothing in a lower layer filled them by importing upwards).
RUNS = [
    [("elmo_tasks.data", {"READERS": [r for r in FULL["READERS"] if r != "raganato"]}),  # get_reader; WSD's reader
     ("elmo_tasks.wsd.data.examples", {"READERS"}),  # registers where WSD data lives
     ("elmo_tasks.features.base", {"READERS", "FEATURES", "FUSIONS"}),  # build_features, build_fusion
     ("elmo_tasks.heads.token_input", set(FULL))],  # a head's chars: section
    [("elmo_tasks.experiment.config", set(FULL))],  # resolve (configs name readers, sources, mixes, heads, char encoders)
]
CHECK = """
import importlib, json, sys
import elmo_tasks.registry as r
for module in sys.argv[1:]:
    importlib.import_module(module)
    print(json.dumps([module, {k: getattr(r, k).names() for k in %r}]))
""" % sorted(FULL)


def test_importing_a_lookup_module_fills_its_registries_and_no_more():
    procs = [subprocess.Popen([sys.executable, "-c", CHECK, *[m for m, _ in run]], cwd=REPO, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for run in RUNS]  # in parallel
    for run, proc in zip(RUNS, procs):
        stdout, stderr = proc.communicate(timeout=900)  # generous: on a loaded machine torch takes a minute
        assert proc.returncode == 0, stderr
        lines = [json.loads(line) for line in stdout.splitlines()]
        assert [m for m, _ in lines] == [m for m, _ in run]
        for (module, full), (_, names) in zip(run, lines):
            want = full if isinstance(full, dict) else {k: FULL[k] for k in full}
            assert names == {k: want.get(k, []) for k in FULL}, module


def test_every_data_module_imports_on_its_own():
    """The data rooms (tasks/data, tasks/wsd/data) sit on one layer and import each other: each WSD data module
    must import first in a fresh interpreter, with no circle through tasks/data/__init__."""
    modules = ["elmo_tasks.data"] + [f"elmo_tasks.wsd.data.{p.stem}" for p in sorted((REPO / "tasks" / "wsd" / "data").glob("*.py"))
                                if p.stem != "__init__"]
    procs = {m: subprocess.Popen([sys.executable, "-c", f"import {m}"], cwd=REPO, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE) for m in modules}
    failed = {m: p.communicate(timeout=600)[1].strip().splitlines()[-1:] for m, p in procs.items()}
    assert {m: e for m, e in failed.items() if procs[m].returncode != 0} == {}


def test_one_environment_variable_per_cache_and_retired_names_warn(tmp_path):
    """The feature cache and the download cache have a variable each; the retired names warn and are not read."""
    code = ("import elmo_features.util.env as e; from elmo_features.util.cli_types import DEFAULT_CACHE; "
            "print(DEFAULT_CACHE, e.download_cache_dir()); e.warn_retired()")
    env = {**os.environ, "ELMO_TASKS_FEATURE_CACHE": str(tmp_path / "f"), "ELMO_TASKS_DOWNLOAD_CACHE": str(tmp_path / "d"),
           "ELMO_TASKS_CACHE": str(tmp_path / "old")}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == [str(tmp_path / "f"), str(tmp_path / "d")]
    assert out.stderr.strip() == ("warning: $ELMO_TASKS_CACHE is no longer read; set ELMO_TASKS_FEATURE_CACHE "
                                  "(features) and ELMO_TASKS_DOWNLOAD_CACHE (downloads)")
    names = subprocess.run(["grep", "-rhoE", "ELMO_[A-Z0-9_]+", "elmo_features", "tasks"], cwd=REPO, capture_output=True,
                           text=True).stdout.split()
    assert {n for n in names if not n.startswith("ELMO_TASKS_")} <= {"ELMO_FEATURES_ONEDNN", "ELMO_FEATURES_BF16_EMULATE"}

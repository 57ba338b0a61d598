"""Components from the user's own package (``--include MODULE``): listed by ``components``, usable in ``run``,
``compare`` (also in its worker processes) and ``wsd``; a feature source registered only from a plugin gets the
path checks before work, a fingerprint in the summary, ``--resume`` refusal when its model changes, ``predict``'s
warning and per-layer WSD rows, from what its class declares. A component that breaks its contract is refused
when it registers. Each command runs as a user runs it: the installed ``elmo-tasks`` in a fresh process."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from plugin_fixture import PLUGIN, write_plugin, write_task, write_wsd

from elmo_tasks.features.base import FeatureSource
from elmo_tasks.registry import FEATURES, ContractError, Registry, class_contract


def cli(args: list[str], cwd: Path, expect: int = 0) -> subprocess.CompletedProcess:
    """``elmo-tasks ARGS`` in ``cwd`` (the console script when installed: the current folder is not on its path)."""
    script = shutil.which("elmo-tasks", path=str(Path(sys.executable).parent))
    cmd = [script] if script else [sys.executable, "-m", "elmo_tasks.cli"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ELMO_TASKS_DOWNLOAD_CACHE": str(cwd / "cache")}
    proc = subprocess.run(cmd + args, cwd=cwd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == expect, (proc.stdout[-2000:], proc.stderr[-2000:])
    return proc


@pytest.fixture
def task(tmp_path) -> Path:
    write_plugin(tmp_path, broken=True)
    write_task(tmp_path)
    return tmp_path


def test_components_lists_an_included_plugin_and_unknown_names_say_how_to_include_one(task):
    out = cli(["components", "heads", "--include", PLUGIN], task).stdout
    assert "linear_tagger" in out and f"[{PLUGIN}.components]" in out
    err = cli(["components", "heads", "linear_tagger"], task, expect=2).stderr.strip()
    assert err.count("\n") == 0 and "unknown head 'linear_tagger'" in err and "--include MODULE" in err
    assert "elmo_tasks.plugins" in err
    err = cli(["run", "acme.yaml"], task, expect=2).stderr.strip()  # a config naming it, without --include
    assert err.count("\n") == 0 and "--include MODULE" in err


def test_a_component_missing_a_method_is_refused_when_it_registers(task):
    err = cli(["components", "--include", "acme_broken"], task, expect=2).stderr.strip()
    assert err == ("error: --include acme_broken: head 'half_head' (acme_broken.HalfHead) cannot be registered: "
                   "missing method(s) predict of Head")
    err = cli(["components", "--include", "no_such_module"], task, expect=2).stderr.strip()
    assert err.startswith("error: --include no_such_module: module not found") and err.count("\n") == 0


def test_contract_checks_in_process():
    reg = Registry("widget")
    reg.set_contract(class_contract(FeatureSource))
    with pytest.raises(ContractError, match="must be a subclass of elmo_tasks.features.base.FeatureSource"):
        reg.add("w", object)

    class NoForward(FeatureSource):
        Config = None

        def precompute(self, sentences, split):
            return []

        def collate(self, items, T):
            return items

    with pytest.raises(ContractError, match=r"missing method\(s\) forward of FeatureSource; needs a Config dataclass"):
        reg.add("no_forward", NoForward)
    assert "no_forward" not in FEATURES and "no_forward" not in reg


def test_a_plugin_source_gets_path_checks_fingerprints_resume_refusal_and_predict_warning(task):
    (task / "model.bin").rename(task / "model.moved")  # the plugin's declared input is missing: refused first
    err = cli(["run", "acme.yaml", "--include", PLUGIN], task, expect=2).stderr.strip()
    assert err.count("\n") == 0 and "features.model_path: model.bin not found" in err
    assert not (task / "runs").exists()  # before any work
    (task / "model.moved").rename(task / "model.bin")
    # compare on a worker process (--jobs 2): the worker loads the plugin too
    cli(["compare", "acme.yaml", "--include", PLUGIN, "--results-dir", "res", "--jobs", "2", "--progress", "off"], task)
    fp = hashlib.sha256(b"acme model v1").hexdigest()
    summary = (task / "res" / "summary.md").read_text()
    assert f"frozen model `{fp[:12]}`" in summary
    assert f"--include {PLUGIN}" in summary  # the command as typed, with the plugin
    (grid,) = (task / "runs" / "acme").glob("compare-*")
    cli(["compare", "acme.yaml", "--include", PLUGIN, "--results-dir", "res", "--resume", str(grid)], task)
    (task / "model.bin").write_bytes(b"acme model v2")  # the frozen model changes
    err = cli(["compare", "acme.yaml", "--include", PLUGIN, "--results-dir", "res", "--resume", str(grid)], task,
              expect=2).stderr.strip()
    assert "finished with another frozen model" in err and fp[:12] in err
    (task / "in.txt").write_text("the cat ran\n")
    proc = cli(["predict", str(grid / "hashed-seed1"), "in.txt", "--include", PLUGIN], task)
    assert "changed since it was trained: model_path model.bin (fingerprint" in proc.stderr
    words_and_tags = proc.stdout.split()
    assert words_and_tags[::2] == ["the", "cat", "ran"] and set(words_and_tags[1::2]) <= {"D", "N", "V"}


def test_a_plugin_source_gets_per_layer_wsd_rows(tmp_path):
    write_plugin(tmp_path)
    write_task(tmp_path)
    write_wsd(tmp_path)
    cli(["wsd", "--config", "wsd.yaml", "--include", PLUGIN, "--out", "o", "--no-plot", "--progress", "off"], tmp_path)
    table = (tmp_path / "o" / "table5.md").read_text()
    for row in ("acme 1-NN, layer 0", "acme 1-NN, layer 1", "acme 1-NN, average of layers"):
        assert f"| {row} |" in table

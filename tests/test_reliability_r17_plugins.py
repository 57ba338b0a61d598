"""Plugins that cannot hurt, environment variables named, masks checked, early stops told (docs/reliability.md,
"Round four: plugins, environment, masks, stops"): each case replayed as a user meets it.

Entry-point plugins are faked as an installed distribution: a ``NAME-1.0.dist-info`` folder (METADATA and
entry_points.txt) and the plugin's module, in a folder on ``sys.path`` (in-process) or on ``PYTHONPATH``."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from elmo_features.util import stop
from elmo_tasks import plugins
from elmo_tasks.cli import main

from signal_helpers import default_stop_signals, foreground_signals
from test_tasks_helpers import one_line_error, static_config_file

REPO = Path(__file__).resolve().parents[1]
FAST = ["--cache-dir", "none", "--progress", "off"]
STARTING = ("interrupted; it was still starting (checking its inputs, loading), and nothing was written: rerun the "
            "same command")


def _installed_plugin(site: Path, dist: str, module: str, source: str, entry: str = "") -> None:
    """Distribution ``dist`` installed in the folder ``site``: its module ``module`` (``source``) declared as the
    ``elmo_tasks.plugins`` entry point ``entry`` (default: the module's name)."""
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[elmo_tasks.plugins]\n{entry or module} = {module}\n")
    (site / f"{module}.py").write_text(source)


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on sys.path for fake installed distributions; the entry points are loaded again by the next command,
    and the plugin modules imported are forgotten afterwards."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setattr(plugins, "_ENTRY_POINTS_LOADED", [False])
    monkeypatch.setattr(plugins, "_INCLUDED", list(plugins._INCLUDED))
    before = set(sys.modules)
    yield folder
    for name in set(sys.modules) - before:
        if name.startswith("r17_"):
            sys.modules.pop(name, None)


# ---------------------------------------------------------------- C13: --include of the toolkit itself

def test_c13_including_the_toolkit_itself_is_refused_and_no_run_is_made(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(plugins, "_INCLUDED", list(plugins._INCLUDED))
    env, cfg = static_config_file(tmp_path)
    argv = ["run", cfg, "--out", "R", "--include", "elmo_tasks", *FAST]
    monkeypatch.setattr(sys, "argv", ["elmo-tasks", *argv])  # (as typed: the old walk ran the command's __main__)
    assert main(argv) == 2
    one_line_error(capsys, "--include elmo_tasks: this is the toolkit's own code")
    assert not Path("R").exists()
    for name in ("elmo_features", "elmo_tasks.cli", "elmo_features.model.scalar_mix"):
        assert main(["components", "--include", name]) == 2
        one_line_error(capsys, f"--include {name}: this is the toolkit's own code")


def test_c13_a_packages_main_module_is_not_run_by_include(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_INCLUDED", list(plugins._INCLUDED))
    pkg = tmp_path / "r17_tool"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text("LOADED = True\n")
    (pkg / "__main__.py").write_text("open('ran_main', 'w').close()\nraise SystemExit(0)\n")
    try:
        assert main(["components", "--include", "r17_tool"]) == 0
        assert "r17_tool.helpers" in sys.modules and "r17_tool.__main__" not in sys.modules
        assert not (tmp_path / "ran_main").exists()
    finally:
        for name in ("r17_tool", "r17_tool.helpers", "r17_tool.__main__"):
            sys.modules.pop(name, None)


# ---------------------------------------------------------------- C12: a plugin's prints stay off stdout

def test_c12_an_installed_plugin_that_prints_leaves_the_commands_output_alone(site, capsys):
    _installed_plugin(site, "r17-chatty", "r17_chatty", "print('acme plugin v1 loaded')\n")
    assert main(["configs", "show", "ner_conll2003"]) == 0
    out, err = capsys.readouterr()
    assert "acme plugin" not in out and "acme plugin v1 loaded" in err
    assert isinstance(yaml.safe_load(out), dict)  # (valid YAML, as `configs show X > my.yaml` writes it)


def test_c12_an_include_module_that_prints_leaves_the_commands_output_alone(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_INCLUDED", list(plugins._INCLUDED))
    (tmp_path / "r17_printer.py").write_text("print('{\"not\": \"a result\"}')\n")
    try:
        assert main(["components", "--include", "r17_printer"]) == 0
    finally:
        sys.modules.pop("r17_printer", None)
    out, err = capsys.readouterr()
    assert "not" not in out and '{"not": "a result"}' in err


# ---------------------------------------------------------------- C11: a failing entry point is named and skipped

@pytest.mark.parametrize("source,said", [("raise KeyboardInterrupt\n", "KeyboardInterrupt"),
                                         ("import sys\nsys.exit(3)\n", "it called sys.exit(3)"),
                                         ("import no_such_module_r17\n", "ModuleNotFoundError")])
def test_c11_a_failing_entry_point_is_named_and_skipped(site, capsys, source, said):
    _installed_plugin(site, "r17-broken", "r17_broken", source, entry="broken")
    assert main(["configs", "list"]) == 0
    out, err = capsys.readouterr()
    assert "ner_conll2003" in out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: plugin broken (entry point of distribution r17-broken, "
                                                   "module r17_broken) was not loaded: "), err
    assert said in lines[0] and "--include" not in err and "rerun" not in err, err


def test_c11_a_real_stop_while_an_entry_point_loads_still_stops_the_command(site, capsys):
    _installed_plugin(site, "r17-slow", "r17_slow", "import os, signal\nos.kill(os.getpid(), signal.SIGINT)\n"
                                                    "for _ in range(1000):\n    pass\n")
    with foreground_signals():  # (Ctrl-C at Python's own handler, as in a terminal, however the suite started)
        assert main(["configs", "list"]) == 128 + signal.SIGINT
    out, err = capsys.readouterr()
    assert out == "" and err.strip() == STARTING, err
    stop.check()  # (the stop request is not left behind for the next command of this process)


def _spawn(args: list[str], cwd: Path, extra_path: str = "") -> subprocess.Popen:
    """``python -m elmo_tasks.cli ARGS`` (the command itself) with the stop signals at their default action."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (extra_path, str(REPO)) if p),
           "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "elmo_tasks.cli", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=default_stop_signals)


def test_c11_ctrl_c_while_an_installed_plugin_loads_stops_the_command_with_the_starting_line(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    _installed_plugin(site, "r17-sleepy", "r17_sleepy", f"open({str(tmp_path / 'loading')!r}, 'w').close()\n"
                                                        "import time\ntime.sleep(60)\n")
    p = _spawn(["configs", "list"], tmp_path, str(site))
    t0 = time.monotonic()
    while not (tmp_path / "loading").exists() and p.poll() is None and time.monotonic() - t0 < 120:
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130 and out == "" and err.strip() == STARTING, (p.returncode, err[-800:])


# ---------------------------------------------------------------- G07: a stop in a command's first second

def _stop_handler_installed(pid: int) -> bool:
    """Whether process ``pid`` catches SIGTERM (Linux /proc: its SigCgt mask): the command's first handler is in."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except OSError:
        pass
    return False


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc to see the handler installed")
def test_g07_a_stop_in_the_first_second_of_a_command_says_it_was_still_starting(tmp_path):
    (tmp_path / "in.txt").write_text("hello world\n")
    commands = (["run", "c.yaml", "--out", "R"], ["wsd", "tag", "in.txt"], ["wsd", "senses", "--config", "w.yaml"],
                ["compare", "c.yaml"], ["embed", "in.txt", "o.h5"])
    for args in commands:
        p = _spawn(args, tmp_path)
        t0 = time.monotonic()
        while not _stop_handler_installed(p.pid) and p.poll() is None and time.monotonic() - t0 < 60:
            time.sleep(0.005)
        p.send_signal(signal.SIGTERM)  # (while torch still loads)
        _, err = p.communicate(timeout=60)
        assert p.returncode == 143 and err.strip() == STARTING, (args, p.returncode, err[-800:])


# ---------------------------------------------------------------- G04: $ELMO_TASKS_DOWNLOAD_CACHE checked and named

def test_g04_a_download_cache_variable_naming_a_file_is_named(tmp_path, capsys, monkeypatch):
    (tmp_path / "afile").write_text("not a folder\n")
    monkeypatch.setenv("ELMO_TASKS_DOWNLOAD_CACHE", str(tmp_path / "afile"))
    assert main(["models", "list"]) == 2
    one_line_error(capsys, f"$ELMO_TASKS_DOWNLOAD_CACHE: {tmp_path / 'afile'} is a file, not a folder")
    assert main(["models", "get", "minilm-l6"]) == 2  # (before any download)
    one_line_error(capsys, f"$ELMO_TASKS_DOWNLOAD_CACHE: {tmp_path / 'afile'} is a file, not a folder")
    monkeypatch.setenv("ELMO_TASKS_DOWNLOAD_CACHE", str(tmp_path / "afile" / "sub"))
    assert main(["models", "list"]) == 2
    one_line_error(capsys, "$ELMO_TASKS_DOWNLOAD_CACHE: cannot create", "is a file, not a folder")
    monkeypatch.setenv("ELMO_TASKS_DATA", str(tmp_path / "afile"))  # (the data folder: `data list` said all missing)
    assert main(["data", "list"]) == 2
    one_line_error(capsys, f"$ELMO_TASKS_DATA: {tmp_path / 'afile'} is a file, not a folder")


def test_g04_models_list_says_when_its_cache_folder_cannot_be_read(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ELMO_TASKS_IGNORE_INSTALLED_ENCODERS", "1")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "encoders").write_text("")  # (where the fetched models' folders should be)
    monkeypatch.setenv("ELMO_TASKS_DOWNLOAD_CACHE", str(tmp_path / "cache"))
    assert main(["models", "list"]) == 2
    one_line_error(capsys, f"models list: the download cache: {tmp_path / 'cache' / 'encoders'} is a file")
    if os.geteuid() == 0:  # (root reads any folder)
        return
    (tmp_path / "cache" / "encoders").unlink()
    (tmp_path / "cache" / "encoders").mkdir(mode=0)
    try:
        assert main(["models", "list"]) == 2
        one_line_error(capsys, "models list: the download cache:", "cannot be read (permission denied)")
    finally:
        (tmp_path / "cache" / "encoders").chmod(0o755)


# ---------------------------------------------------------------- F10: masks are bool or 0/1

def test_f10_scalar_mix_refuses_a_mask_that_is_not_bool_or_0_1():
    from elmo_features.model.scalar_mix import ScalarMix

    torch.manual_seed(0)
    mix, layers = ScalarMix(3, layer_norm="batch"), torch.randn(3, 2, 4, 5)  # (L, B, T, D)
    real = torch.tensor([[True, True, True, False], [True, True, False, False]])  # (B, T)
    expected = mix(layers, real)
    for same in (real.float(), real.long(), real.to(torch.uint8)):
        assert torch.equal(mix(layers, same), expected)
    for bad, shown in ((real * 0.5, "0.5"), (real * 2.0, "2.0"), (real.long() * 2 - 1, "-1")):
        with pytest.raises(ValueError, match=f"ScalarMix mask must be bool .* or hold only 0 and 1; it holds {shown}"):
            mix(layers, bad)


def test_f10_the_heads_and_fusions_refuse_a_mask_that_is_not_bool_or_0_1():
    from elmo_tasks.features.fusion import normalize_layers
    from elmo_tasks.heads.base import BiLSTMEncoder
    from elmo_tasks.heads.crf import ConditionalRandomField

    emissions, layers = torch.randn(2, 4, 3), torch.randn(2, 2, 4, 3)  # (B, T, K), (L, B, T, D)
    real = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])  # (B, T) as 0/1 numbers
    crf, encoder = ConditionalRandomField(3), BiLSTMEncoder(3, 0)
    assert torch.equal(crf.log_partition(emissions, real.float()), crf.log_partition(emissions, real.bool()))
    assert torch.equal(encoder(emissions, real.float()), encoder(emissions, real.bool()))
    calls = {"CRF mask": lambda m: crf.log_partition(emissions, m),
             "BiLSTMEncoder mask": lambda m: encoder(emissions, m),
             "fusion mask": lambda m: normalize_layers(layers, m, "batch")}
    for name, call in calls.items():
        with pytest.raises(ValueError, match=f"{name} must be bool .* it holds 0.5"):
            call(real * 0.5)


# ---------------------------------------------------------------- the suite started with SIGINT ignored

def test_the_signal_tests_pass_when_the_suite_starts_with_sigint_and_sighup_ignored(tmp_path):
    """As a background job of a script (SIGINT ignored) under nohup (SIGHUP ignored): the tests that inspect or send
    signals set the dispositions they rely on."""
    def ignoring() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    tests = ["tests/test_reliability_r14.py::test_a_users_program_that_imports_the_command_keeps_its_own_ctrl_c",
             "tests/test_reliability_r14.py::test_a_stop_signal_while_the_command_loads_is_one_line",
             "tests/test_reliability_r17_plugins.py::test_c11_a_real_stop_while_an_entry_point_loads_still_stops_the_"
             "command"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
                        str(tmp_path / "t"), *tests], cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
                       preexec_fn=ignoring)
    assert r.returncode == 0, r.stdout[-3000:]
    assert "3 passed" in r.stdout, r.stdout[-500:]

"""Hostile list six, the command-line cases: a plugin package whose submodule fails to import, the sense tagger's
Python API given strings, and a command started from a deleted current folder."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from elmo_tasks.cli import main

from test_reliability_outputs_r3 import senses  # noqa: F401 (a pytest fixture: a tiny senses file)
from test_tasks_helpers import one_line_error

ROOT = Path(__file__).resolve().parents[1]


def _package(tmp_path, monkeypatch, name: str, files: dict[str, str]) -> None:
    pkg = tmp_path / name
    pkg.mkdir()
    for f, text in files.items():
        (pkg / f).write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_j02_include_names_the_submodule_that_failed(tmp_path, monkeypatch, capsys):
    _package(tmp_path, monkeypatch, "r6pkg", {"__init__.py": "", "good.py": "X = 1\n",
                                             "extra.py": "raise ImportError('optional dependency foo missing')\n"})
    assert main(["components", "--include", "r6pkg"]) == 2
    line = one_line_error(capsys, "--include r6pkg: importing its submodule r6pkg.extra (")
    assert "extra.py) failed (ImportError: optional dependency foo missing)" in line
    assert "is it installed" not in line  # the package was found: the hint would point the wrong way


def test_j02_include_a_module_that_raises_or_is_missing(tmp_path, monkeypatch, capsys):
    _package(tmp_path, monkeypatch, "r6bad", {"__init__.py": "import r6_no_such_dependency\n"})
    assert main(["components", "--include", "r6bad"]) == 2
    one_line_error(capsys, "--include r6bad: importing it (")
    assert main(["components", "--include", "r6_nowhere"]) == 2
    one_line_error(capsys, "--include r6_nowhere: module not found; is it installed, or in the current folder")


@pytest.mark.parametrize("given, message", [
    (["the bank of the river"], "sentence 0 is a str"),  # (a str is raw text: test_wsd_tag_text)
    ([["bank", None]], "sentence 0 has a token of type NoneType"),
])
def test_f06_sense_tagger_api_checks_its_sentences(senses, given, message):  # noqa: F811 (the fixture)
    from elmo_tasks.wsd.tagging import SenseTagger

    tagger = SenseTagger(str(senses / "senses.h5"))
    with pytest.raises(TypeError, match=message):
        tagger.tag(given)
    assert tagger.tag([["bank"]])[0][0]["key"] is not None  # a right call still tags


def test_p03_a_deleted_current_folder_is_named(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    code = "import os, runpy, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); sys.argv = ['elmo-tasks', 'run', 'x.yaml']; " \
           "runpy.run_module('elmo_tasks.cli', run_name='__main__')"
    p = subprocess.run([sys.executable, "-c", code, str(gone)], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert p.stderr == ("error: the current folder no longer exists (it was deleted while this shell was in it); cd to "
                        "an existing folder and run the command again\n")

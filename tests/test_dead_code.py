"""No unused code in the two packages: vulture finds nothing beyond tests/vulture_whitelist.py (registered components,
torch hooks, public API)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def vulture(*paths: str) -> subprocess.CompletedProcess:
    exe = shutil.which("vulture")
    if exe is None:
        pytest.skip("vulture is not installed (pip install vulture, or the package's `test` extra)")
    return subprocess.run([exe, *paths, "--min-confidence", "60"], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_no_unused_code_beyond_the_whitelist():
    result = vulture("elmo_features", "tasks", "tests/vulture_whitelist.py")
    assert result.returncode == 0 and result.stdout == "", result.stdout


def test_the_check_finds_a_function_nobody_calls(tmp_path):
    for package in ("elmo_features", "tasks"):
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "models"))
    with open(tmp_path / "tasks" / "metrics.py", "a", encoding="utf-8") as f:
        f.write("\n\ndef forgotten_helper():\n    return 1\n")
    exe = shutil.which("vulture") or pytest.skip("vulture is not installed")
    result = subprocess.run([exe, "elmo_features", "tasks", str(REPO / "tests" / "vulture_whitelist.py"),
                             "--min-confidence", "60"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 3 and "unused function 'forgotten_helper'" in result.stdout

"""Shared test fixtures: offline hub settings, the ../shared data folder (skip when absent)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("ELMO_TASKS_SHARED", REPO.parent / "shared" / "data"))


def shared_path(*parts: str) -> Path:
    """A path under ../shared/data, or skip the test with a clear reason when it is absent."""
    p = SHARED_DATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"needs {p} (the project's ../shared/data folder), which is absent on this machine")
    return p


@pytest.fixture
def fixture_dir() -> Path:
    """The AllenNLP tiny-ELMo fixture with bilm-tf reference outputs."""
    return shared_path("allennlp_elmo_fixture")

"""The environment variables the toolkit reads, all named ``ELMO_TASKS_*``: one per cache, one per switch."""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

from elmo_features.util.paths import check_output_dir

FEATURE_CACHE = "ELMO_TASKS_FEATURE_CACHE"  # default of --cache-dir: frozen features (safe to delete)
DOWNLOAD_CACHE = "ELMO_TASKS_DOWNLOAD_CACHE"  # downloads and fetched models (default ~/.cache/elmo_tasks)
ONEDNN = "ELMO_TASKS_ONEDNN"  # "0": plain torch linears instead of oneDNN's packed GEMMs
BF16_EMULATE = "ELMO_TASKS_BF16_EMULATE"  # "1": the emulated bf16 path on any CPU (tests)
RETIRED = {"ELMO_TASKS_CACHE": f"{FEATURE_CACHE} (features) and {DOWNLOAD_CACHE} (downloads)",
           "ELMO_FEATURES_ONEDNN": ONEDNN, "ELMO_FEATURES_BF16_EMULATE": BF16_EMULATE}


def feature_cache_default() -> str:
    """The frozen-feature cache folder when --cache-dir is not given."""
    return os.environ.get(FEATURE_CACHE) or ".cache/features"


def download_cache_dir() -> Path:
    """Where downloads and fetched models are kept when no folder is given: $ELMO_TASKS_DOWNLOAD_CACHE (set but
    blank: unset), checked as a folder before use, its error naming the variable; else ~/.cache/elmo_tasks."""
    value = os.environ.get(DOWNLOAD_CACHE, "")
    if not value.strip():
        return Path.home() / ".cache" / "elmo_tasks"
    return check_output_dir(value, f"${DOWNLOAD_CACHE}", writable=False)


def flag(name: str, default: str) -> str:
    """The value of switch ``name``."""
    return os.environ.get(name, default)


@functools.cache
def warn_retired() -> None:
    """One warning line per retired variable that is set (they are no longer read)."""
    for old, new in RETIRED.items():
        if old in os.environ:
            print(f"warning: ${old} is no longer read; set {new}", file=sys.stderr, flush=True)

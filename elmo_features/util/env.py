"""The environment variables the toolkit reads, all named ``ELMO_TASKS_*``: one per cache, one per switch."""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

from elmo_features.util.once import first_time
from elmo_features.util.paths import check_output_dir

FEATURE_CACHE = "ELMO_TASKS_FEATURE_CACHE"  # default of --cache-dir: frozen features (safe to delete)
DOWNLOAD_CACHE = "ELMO_TASKS_DOWNLOAD_CACHE"  # downloads and fetched models (default ~/.cache/elmo_tasks)
DEBUG = "ELMO_TASKS_DEBUG"  # on: the traceback of an error (as --debug)
ONEDNN = "ELMO_TASKS_ONEDNN"  # off: plain torch linears instead of oneDNN's packed GEMMs
BF16_EMULATE = "ELMO_TASKS_BF16_EMULATE"  # on: the emulated bf16 path on any CPU (tests)
IGNORE_INSTALLED_ENCODERS = "ELMO_TASKS_IGNORE_INSTALLED_ENCODERS"  # on: packaged encoders from the download cache
SWITCH_ON, SWITCH_OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")  # (any case)
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


def switch(name: str, default: bool, otherwise: str, environ=None) -> bool:
    """The switch variable ``name`` (in ``environ``, default os.environ): 1/true/yes/on (any case) is on,
    0/false/no/off is off, unset or empty is ``default``; any other value is ``default`` too, with one warning line
    per command naming the variable, the values it takes and ``otherwise`` (what stays: "tracebacks stay off")."""
    value = (os.environ if environ is None else environ).get(name, "")
    word = value.strip().lower()
    if word in SWITCH_ON or word in SWITCH_OFF:
        return word in SWITCH_ON
    if word and first_time(("switch", name, value)):
        print(f"warning: {name}={value!r} is not one of {'/'.join(SWITCH_ON)} or {'/'.join(SWITCH_OFF)}; {otherwise}",
              file=sys.stderr, flush=True)
    return default


@functools.cache
def warn_retired() -> None:
    """One warning line per retired variable that is set (they are no longer read)."""
    for old, new in RETIRED.items():
        if old in os.environ:
            print(f"warning: ${old} is no longer read; set {new}", file=sys.stderr, flush=True)

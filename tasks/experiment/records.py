"""Reading the JSON records commands leave behind (a run's ``metrics.json``): a file that parses but has the wrong
shape (a list, a string where a mapping belongs; edited by hand, or by another program) is one CheckpointError
naming what is wrong, never an AttributeError deep inside the command; and where a run records its data files
(``data_locations``)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from elmo_features.util.errors import CheckpointError

from elmo_tasks.features.fingerprints import is_fingerprint_key

METRICS_MAPPINGS = ("features", "plugin_modules", "dev", "test")  # metrics.json keys whose values are objects


def read_metrics(path: str | Path, fix: str = "rerun the run", finished: bool = False, needs_test: bool = False) -> dict:
    """A run's metrics.json: a JSON object whose ``METRICS_MAPPINGS`` (when present) are objects and whose features
    report is well formed (``finished``: with everything a summary row reads, test scores when ``needs_test``); else
    CheckpointError "PATH: damaged (what); FIX"."""
    path = Path(path)
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _damaged(path, " ".join(str(e).split())[:160], fix) from None
    if not isinstance(m, dict):
        raise _damaged(path, f"a JSON {type(m).__name__}, not an object", fix)
    wrong = [k for k in METRICS_MAPPINGS if m.get(k) is not None and not isinstance(m[k], dict)]
    if wrong:
        raise _damaged(path, f"{', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} not a mapping", fix)
    plugins = m.get("plugin_modules") or {}
    problem = (_report_problem(m.get("features") or {}, "features")
               or next((f"plugin_modules.{k} is not a sha256" for k, v in plugins.items() if not isinstance(v, str)), None)
               or (_record_problem(m, needs_test) if finished else None))
    if problem:
        raise _damaged(path, problem, fix)
    return m


def _record_problem(m: dict, needs_test: bool) -> str | None:
    """What a finished run's record lacks for a summary row: its scores (numbers) and the facts of its training."""
    for key, kind in (("features", dict), ("primary_metric", str), ("best_epoch", int), ("epochs_run", int),
                      ("seconds", dict)):
        if not isinstance(m.get(key), kind) or isinstance(m.get(key), bool):
            return f"{key} is missing or not a {kind.__name__}"
    if needs_test and not m.get("test"):
        return "it has no test scores"
    for split in ("dev", "test"):
        bad = [k for k, v in (m.get(split) or {}).items()
               if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)))]
        if bad:
            return f"{split}.{bad[0]} is not a number"
    return None


def _report_problem(report: dict, where: str) -> str | None:
    """What is wrong with a (nested, concat) features report: its ``sources`` a list of reports, fingerprints
    strings or lists of strings."""
    for k, v in report.items():
        if is_fingerprint_key(k):
            if v is not None and not isinstance(v, str) and not (
                    isinstance(v, list) and all(isinstance(x, str) for x in v)):
                return f"{where}.{k} is not a fingerprint"
    subs = report.get("sources")
    if subs is None:
        return None
    if not isinstance(subs, list) or not all(isinstance(s, dict) for s in subs):
        return f"{where}.sources is not a list of mappings"
    return next((p for i, s in enumerate(subs) if (p := _report_problem(s, f"{where}.sources[{i}]"))), None)


def _damaged(path: Path, why: str, fix: str) -> CheckpointError:
    return CheckpointError(f"{path}: damaged ({why})" + (f"; {fix}" if fix else ""))


def data_locations(stats: dict, cfg, run_dir: Path) -> dict:
    """Where the run's data files are: each split's stats and, for a run given its examples (a fold of a
    comparison), the config's data files the examples were cut from, as {split: {resolved, from_run}}. ``resolved``
    is the path when the run read it (a relative path in the config names it from the folder the run was made in),
    ``from_run`` the path from the run folder (a project moved or copied as a whole keeps that relation): ``predict``
    never writes onto them."""
    out = {}
    for split in ("train", "dev", "test"):
        given = getattr(cfg.data, split, None)
        path = stats.get(split, {}).get("resolved") or (os.path.abspath(given) if isinstance(given, str) else None)
        if path:
            out[split] = {"resolved": path, "from_run": os.path.relpath(path, os.path.abspath(run_dir))}
    return out

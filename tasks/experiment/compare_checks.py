"""The checks ``run_comparison`` makes before any work (the same as ``elmo-tasks compare``'s, for API callers):
its arguments, and the results folder it would write (claimed, and replaceable by this comparison)."""
from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from elmo_features.util.arguments import check_int
from elmo_features.util.errors import ConfigError, OutputExistsError, PathError
from elmo_features.util.locking import OutputLock
from elmo_features.util.paths import check_input_dir

from elmo_tasks.experiment.config import RunConfig, check_seeds
from elmo_tasks.features.base import section_lookup_fingerprints, section_storage_keys
from elmo_tasks.experiment.preflight import RESULTS_LOCK, check_given_once, claim_results_folder


def check_comparison_args(cfg: RunConfig, sources: list[str] | None, seeds: list[int] | None, folds: int | None,
                          jobs: int = 1, threads: int | None = None, resume: str | Path | None = None,
                          flag: str = "") -> None:
    """``sources`` (variants of cfg.compare, each once, no two the same section), ``seeds`` (each once), ``folds``
    (0, None or >= 3), ``jobs`` and ``threads`` (>= 1) and ``resume`` (a comparison folder of this config) as the
    CLI checks them: ConfigError/TypeError/PathError naming the argument (``flag`` + its name: "--" for the CLI),
    before any work."""
    check_int(jobs, f"{flag}jobs")
    if threads is not None:
        check_int(threads, f"{flag}threads")
    _check_sources_and_folds(cfg, sources, seeds, folds)
    if resume is not None:
        check_input_dir(resume, f"{flag}resume", hint="give the compare-STAMP folder printed when the comparison was "
                                                      "interrupted")
        check_comparison_folder(Path(resume), cfg.name, f"{flag}resume")


def check_comparison_folder(folder: Path, name: str, flag: str = "--resume") -> None:
    """``--resume`` takes only a folder that ``compare`` made for this config (RUNS_DIR/NAME/compare-STAMP, holding
    SOURCE-seedN run folders): any other folder would get a whole comparison's runs written into it."""
    others = [p.name for p in folder.iterdir() if not (p.is_dir() and "-seed" in p.name) and not p.name.startswith(".")]
    if not folder.resolve().name.startswith("compare-") or folder.resolve().parent.name != name or others:
        raise PathError(f"{flag} {folder}: not a comparison folder of {name!r} (expected RUNS_DIR/{name}/compare-STAMP "
                        f"holding SOURCE-seedN run folders{'; it holds ' + ', '.join(sorted(others)[:3]) if others else ''}"
                        "); give the folder printed when the comparison was interrupted")


def check_distinct_sources(cfg: RunConfig, names: list[str]) -> None:
    """No two selected sources are one resolved section under two names: their rows would measure one thing twice
    (and a paired test would compare it with itself). ConfigError naming both."""
    seen: dict[str, str] = {}
    for n in names:
        key = json.dumps(cfg.compare.sources[n], sort_keys=True, default=str)
        if key in seen:
            raise ConfigError(f"compare.sources: {seen[key]} and {n} are the same feature source (identical "
                              "sections); their rows would measure one thing twice and a paired test would compare it "
                              "with itself: drop one, or select the others with --sources")
        seen[key] = n


def _without(section: dict, keys: set[str]) -> str:
    return json.dumps({k: v for k, v in section.items() if k not in keys}, sort_keys=True, default=str)


def check_distinct_inputs(cfg: RunConfig, names: list[str], memo) -> None:
    """No two selected sources load the same frozen inputs (by what they give: a copy of a vectors file, the same
    vectors in another row order or format; the same biLM by folder and by its two files) with otherwise identical
    settings: their rows would measure one thing twice. ConfigError naming both and the fingerprint."""
    seen: list[tuple[str, dict, list[str], set[str]]] = []
    for name in names:
        section = cfg.compare.sources[name]
        fps, stored = section_lookup_fingerprints(section, memo), section_storage_keys(section)
        for other, o_section, o_fps, o_stored in seen:
            drop = stored | o_stored
            if fps and fps == o_fps and _without(section, drop) == _without(o_section, drop):
                raise ConfigError(f"compare.sources: {other} and {name} load the same frozen inputs (fingerprint "
                                  f"{fps[0][:12]}: they give the same features) with the same settings; their rows "
                                  "would measure one thing twice and a paired test would compare it with itself: drop "
                                  "one, or select the others with --sources")
        seen.append((name, section, fps, stored))


def _check_sources_and_folds(cfg: RunConfig, sources: list[str] | None, seeds: list[int] | None,
                             folds: int | None) -> None:
    if cfg.compare is None:
        raise ConfigError(f"{cfg.name}: no 'compare' section (name the feature-source variants to compare)")
    valid = ", ".join(cfg.compare.sources)
    if sources is not None:
        if isinstance(sources, str) or not all(isinstance(s, str) for s in sources):
            raise TypeError(f"sources: expected a list of variant names (of: {valid}), got {sources!r}")
        if not sources:
            raise ConfigError(f"sources: empty; name at least one of: {valid}")
        check_given_once(sources, "sources", "the source")
        unknown = sorted(set(sources) - set(cfg.compare.sources))
        if unknown:
            raise ConfigError(f"sources: unknown variant(s) {', '.join(unknown)}; valid: {valid}")
    if seeds is not None:
        if isinstance(seeds, (str, int)):
            raise TypeError(f"seeds: expected a list of integers, got {seeds!r}")
        check_seeds(list(seeds), "seeds")
    if folds is not None and (isinstance(folds, bool) or not isinstance(folds, int)):
        raise TypeError(f"folds: expected an integer (3 or more, or 0 for the fixed split), got {folds!r}")
    if folds is not None and folds != 0 and folds < 3:
        raise ConfigError(f"folds: give 3 or more folds (one tests, one stops early), or 0 for the fixed split, "
                          f"got {folds}")
    check_distinct_sources(cfg, list(sources or cfg.compare.sources))


def _held_here(results_dir: Path) -> bool:
    """This process holds the results folder's lock already (``elmo-tasks compare`` claims it before calling)."""
    try:
        holder = (results_dir / RESULTS_LOCK).read_text(encoding="utf-8").split()
    except OSError:
        return False
    return holder == [str(os.getpid()), socket.gethostname()]


def claim_results(results_dir: Path, name: str) -> OutputLock | None:
    """``claim_results_folder`` for an API caller (the lock to release), or None when this process holds it already
    or is a torchrun rank other than 0 (rank 0 writes the results)."""
    if int(os.environ.get("RANK", "0") or 0) != 0 or _held_here(results_dir):
        return None
    return claim_results_folder(results_dir, "summary.json", name, "results_dir")


def comparison_identity(cfg: RunConfig, sources: list[str] | None, seeds: list[int] | None,
                        folds: int | None) -> dict:
    """What a comparison's summary.json records of the settings and the grid it measured (JSON values)."""
    names = sources or list(cfg.compare.sources)
    grid = {"sources": {n: cfg.compare.sources[n] for n in names},
            "seeds": {n: list(seeds) if seeds else cfg.compare.seeds_of(n) for n in names},
            "folds": cfg.compare.folds if folds is None else folds}
    base = {k: v for k, v in cfg.to_dict().items() if k in ("head", "data", "training")}
    return json.loads(json.dumps({**base, "grid": grid}))


def check_results_replaceable(results_dir: Path, identity: dict) -> None:
    """The summary.json in ``results_dir`` (a comparison of this config: ``claim_results_folder``) may be replaced
    by this comparison's: same settings, and no source or seed of its table left out; else OutputExistsError."""
    try:
        saved = json.loads((results_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(saved, dict):
        return
    old, new = saved.get("grid") or {}, identity["grid"]
    problem = _grid_problem(old)
    if problem:
        raise OutputExistsError(f"--results-dir {results_dir}: its summary.json is damaged ({problem}); rerunning "
                                "would replace it: move it away, or choose another --results-dir")
    differ = [k for k in ("head", "data", "training") if k in saved and saved[k] != identity[k]]
    if old and old.get("folds") != new["folds"]:
        differ.append("folds")
    lost = [f"{n} seed {s}" for n, ss in (old.get("seeds") or {}).items() for s in ss
            if n not in new["sources"] or (old.get("sources") or {}).get(n) != new["sources"][n]
            or s not in new["seeds"][n]]
    if differ or lost:
        why = (f"other settings ({', '.join(differ)} differ)" if differ else
               f"runs this command would drop from its table ({', '.join(lost[:3])}{', ...' if len(lost) > 3 else ''})")
        raise OutputExistsError(f"--results-dir {results_dir}: holds a comparison with {why}; rerunning would replace "
                                "it: choose another --results-dir, or give a grid that includes those runs with the "
                                "same settings (--resume COMPARE_DIR reuses finished runs)")


def _grid_problem(grid) -> str | None:
    """What is wrong with a summary.json's ``grid`` (sources and seeds as mappings, seeds lists of integers)."""
    if not isinstance(grid, dict):
        return "grid is not a mapping"
    for k in ("sources", "seeds"):
        if not isinstance(grid.get(k) or {}, dict):
            return f"grid.{k} is not a mapping"
    if any(not isinstance(ss, list) for ss in (grid.get("seeds") or {}).values()):
        return "grid.seeds holds a value that is not a list"
    return None

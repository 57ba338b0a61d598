"""Embed and pool every WordNet sense's gloss for one source of a WSD config, into a feature cache, ahead of the
`wsd` run that needs them (the same key: that run then reads them back). The computation resumes where a stopped
one left off, so a slow encoder's gloss phase can be spread over several sittings.

    python scripts/precompute_glosses.py --config wsd_senses --source mpnet --cache-dir CACHE --threads 1

Then `elmo-tasks wsd --config wsd_senses --features mpnet --cache-dir CACHE ...` uses them.
"""
from __future__ import annotations

import argparse
import sys
import time

from elmo_features.util.errors import ElmoTasksError, UsageError
from elmo_features.util.paths import check_output_dir
from elmo_features.util.threads import set_threads
from elmo_tasks.features.base import FeatureContext
from elmo_tasks.wsd.config import load_wsd_config
from elmo_tasks.wsd.sense_method import load_graph, sense_glosses


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="wsd_senses")
    ap.add_argument("--source", required=True)
    ap.add_argument("--cache-dir", required=True)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    try:
        return run(args)
    except ElmoTasksError as e:  # one line, exit 2, as the toolkit's commands
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2


def run(args) -> int:
    if not args.cache_dir.strip():
        raise UsageError("--cache-dir: empty path (an unset variable?); give the folder the wsd run will use")
    check_output_dir(args.cache_dir, "--cache-dir")
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads {args.threads}: give at least 1 (or leave it out: all cores)")
    if args.threads:
        set_threads(args.threads)
    cfg = load_wsd_config(args.config, features=[args.source])
    if args.source not in cfg.sources:
        raise UsageError(f"--source {args.source}: {args.config} has no such source; it has "
                         f"{', '.join(cfg.sources) or 'none'}")
    graph = load_graph(cfg.wordnet)
    for text in cfg.gloss_texts:  # each gloss text the config's held-out sentences choose among
        t0 = time.perf_counter()
        pooled = sense_glosses(cfg.sources[args.source], graph, FeatureContext(cache_dir=args.cache_dir),
                               progress=True, text=text)
        shape = next(iter(pooled.values())).shape
        print(f"glosses ({text}) of {shape[0]:,} senses, {shape[1]} layers of {shape[2]}, in the cache "
              f"({time.perf_counter() - t0:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

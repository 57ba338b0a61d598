"""Do two comparisons give the same per-run numbers? (e.g. ``compare --jobs 1`` against ``--jobs 2``)

    python bench/same_runs.py runs/jobs1_check/summary.json results/ner_conll2003/minilm/summary.json \
        --sources glove,elmo_mix,glove+elmo_mix --out results/bench/jobs_equality.md

Reads the ``runs`` of both summary.json files (each names its command, commit and machine), pairs them by
(source, seed, fold), and writes a Markdown table of the primary test metric of each pair, their difference and
whether every pair is identical to the last digit.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import now, write_atomic  # noqa: E402


def _runs(summary: dict, sources: set[str] | None) -> dict:
    metric = summary["primary_metric"]
    return {(r["source"], r["seed"], r.get("fold")): r["test"][metric] for r in summary["runs"]
            if sources is None or r["source"] in sources}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--sources", default=None, help="comma-separated sources to pair (default: all in both)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    sa, sb = (json.loads(Path(p).read_text()) for p in (args.a, args.b))
    want = set(args.sources.split(",")) if args.sources else None
    ra, rb = _runs(sa, want), _runs(sb, want)
    keys = sorted(set(ra) & set(rb), key=str)
    if not keys:
        sys.exit("error: no (source, seed, fold) in both summaries")
    same = all(ra[k] == rb[k] for k in keys)
    m = sa["primary_metric"]
    lines = [f"# Same per-run numbers? {Path(args.a).parent.name} against {Path(args.b).parent.name}", "",
             f"Written by `python bench/same_runs.py {args.a} {args.b}"
             + (f" --sources {args.sources}" if args.sources else "") + f"` on {now()}.", ""]
    for label, s, p in (("A", sa, args.a), ("B", sb, args.b)):
        mach = s.get("machine", {})
        lines.append(f"* {label}: `{p}`: `{s.get('command', '?')}`, commit `{s.get('git_commit', '?')}`, "
                     f"{mach.get('cpu_model', '?')}, torch threads {mach.get('torch_threads', '?')}")
    lines += ["", f"| source | seed | fold | A test {m} | B test {m} | B - A |", "|---|---|---|---|---|---|"]
    for k in keys:
        lines.append(f"| {k[0]} | {k[1]} | {'' if k[2] is None else k[2]} | {ra[k] * 100:.4f} | {rb[k] * 100:.4f} | "
                     f"{(rb[k] - ra[k]) * 100:+.4f} |")
    lines += ["", f"**{'Identical' if same else 'NOT identical'}**: {sum(ra[k] == rb[k] for k in keys)} of "
                  f"{len(keys)} runs give the same {m} to the last digit.", ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        write_atomic(Path(args.out), text)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

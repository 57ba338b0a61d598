"""Do two WSD tables give the same rows? (e.g. the committed results/wsd against a rerun on newer code)

    python scripts/wsd_same_rows.py results/wsd/scores.json runs/wsd_check/scores.json --out results/bench/x.md

Reads the ``rows`` of both scores.json files (each names its command, commit and machine), pairs them by row id,
and writes a Markdown table of each test set's F1 and the exact correct-answer counts, and whether every row of
the first file is reproduced by the second.
"""
from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path


def _machine(s: dict) -> str:
    m = s.get("machine", {})
    return f"{m.get('cpu_model', '?')}, torch threads {m.get('torch_threads', '?')}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", help="scores.json of the reference table")
    ap.add_argument("b", help="scores.json of the table to check")
    ap.add_argument("--out", help="write the Markdown here (default: stdout)")
    args = ap.parse_args(argv)
    a, b = (json.loads(Path(p).read_text(encoding="utf-8")) for p in (args.a, args.b))
    rows_b = {r["id"]: r for r in b["rows"]}
    sets = [t["name"] for t in a["tests"]] + ["ALL"]
    lines = [f"# Same WSD rows? {Path(args.b).parent.name} against {Path(args.a).parent.name}", "",
             f"Written by `python scripts/wsd_same_rows.py {' '.join(sys.argv[1:] if argv is None else argv)}` on "
             f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.", "",
             f"* A: `{args.a}`: `{a['command']}`, commit `{a['git_commit']}`, {_machine(a)}",
             f"* B: `{args.b}`: `{b['command']}`, commit `{b['git_commit']}`, {_machine(b)}", "",
             "| row | " + " | ".join(f"A {s} | B {s}" for s in sets) + " | correct answers A / B |",
             "|---|" + "---|---|" * len(sets) + "---|"]
    same = 0
    for r in a["rows"]:
        o = rows_b.get(r["id"])
        cells = []
        for s in sets:
            fa = r["scores"].get(s, {}).get("F1")
            fb = (o or {}).get("scores", {}).get(s, {}).get("F1")
            cells += [f"{fa}", f"{fb}"]
        ca = r["scores"].get("ALL", {}).get("correct")
        cb = (o or {}).get("scores", {}).get("ALL", {}).get("correct")
        equal = o is not None and all(r["scores"][s] == o["scores"].get(s) for s in r["scores"])
        same += equal
        lines.append(f"| {r['label']} | " + " | ".join(cells) + f" | {ca} / {cb}{'' if equal else ' (differs)'} |")
    verdict = "**Identical**" if same == len(a["rows"]) else "**Not identical**"
    lines += ["", f"{verdict}: {same} of {len(a['rows'])} rows of A have the same counts and scores in B "
                  f"(B has {len(b['rows'])} rows)."]
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

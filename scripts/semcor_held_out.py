"""Write the held-out documents of a framework training folder (SemCor) as a test folder of their own, for choices
made on raw text (`elmo-tasks wsd raw-eval --test FOLDER`) without touching the test sets.

    python scripts/semcor_held_out.py --train data/wsd/semcor --out /tmp/semcor_held_out [--every 20]

The documents are the ones `wsd senses` holds out to choose its settings (every ``--every``-th document in order of
first appearance: ``sense_method.held_out_sentences``, dev_split documents). Writes FOLDER/NAME.data.xml (the
original XML's <text> elements of those documents, unchanged) and FOLDER/NAME.gold.key.txt (their lines of the gold
key file), NAME being the folder's name.
"""
from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from elmo_features.util.provenance import write_text_atomic  # noqa: E402
from elmo_tasks.wsd.data.reader import find_dataset_files  # noqa: E402


def held_out_documents(root: ET.Element, every: int) -> list[ET.Element]:
    """Every ``every``-th <text> element, by the document part of its sentences' ids in order of first appearance
    (as ``sense_method.document_of`` reads them)."""
    order: dict[str, int] = {}
    kept = []
    for text in root.iter("text"):
        sentence = text.find("sentence")
        doc = (sentence.get("id") if sentence is not None else text.get("id", "")).split(".", 1)[0]
        order.setdefault(doc, len(order))
        if order[doc] % every == every - 1:
            kept.append(text)
    return kept


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train", required=True, help="the framework training folder (SemCor)")
    p.add_argument("--out", required=True, help="the folder to write (its name names the files)")
    p.add_argument("--every", type=int, default=20, help="every N-th document is held out (default: 20, as wsd senses)")
    args = p.parse_args()
    try:
        _, xml_path, key_path = find_dataset_files(args.train)
    except (FileNotFoundError, ValueError) as e:  # (a wrong folder: one line, exit 2)
        print(f"error: --train {args.train}: {e}", file=sys.stderr)
        return 2
    if key_path is None:
        print(f"error: --train {args.train}: no gold key file beside {xml_path.name}", file=sys.stderr)
        return 2
    root = ET.parse(xml_path).getroot()
    texts = held_out_documents(root, args.every)
    ids = {inst.get("id") for t in texts for inst in t.iter("instance")}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    corpus = ET.Element("corpus", root.attrib)
    corpus.extend(texts)
    xml = '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(corpus, encoding="unicode") + "\n"
    write_text_atomic(out / f"{out.name}.data.xml", xml)
    lines = [line for line in key_path.read_text(encoding="utf-8").splitlines() if line.split(" ", 1)[0] in ids]
    write_text_atomic(out / f"{out.name}.gold.key.txt", "\n".join(lines) + "\n")
    print(f"wrote {out}: {len(texts)} documents, {sum(1 for t in texts for _ in t.iter('sentence')):,} sentences, "
          f"{len(lines):,} instances")
    return 0


if __name__ == "__main__":
    sys.exit(main())

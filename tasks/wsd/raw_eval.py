"""WSD on raw text, measured (``elmo-tasks wsd raw-eval``): how much of a sense file's gold-lemma score survives
when the tagger meets the test sentences as a user's text, without the data set's lemmas, parts of speech or tokens.

Each sentence of a framework-format test set is joined back into raw text (``elmo_tasks.data.detokenize``), tagged
by ``SenseTagger.tag`` (the package's tokenizer, morphy's base forms, the part of speech from the sense file's head)
and aligned to the gold instances by character span: an instance is *aligned* when one of the tagger's tokens has
exactly its span. A multi-word instance (``take off``, ``old age``) is aligned when the tagger joined its words into one
unit (a multi-word noun or verb of WordNet, ``elmo_tasks.wsd.multiword``); otherwise it counts as unanswered. Four answer sets, each scored by the framework's scorer
(P over the answered instances, R over all, F1, coverage = answered / all):

- ``gold``: the sense file's best sense among the senses of the gold lemma and part of speech, on the data set's own
  tokens (a multi-word instance: the mean of its words' vectors): the gold-lemma row;
- ``gold_first_sense``: WordNet's first sense of the gold lemma and part of speech;
- ``raw``: the tagger's sense of the aligned token;
- ``raw_first_sense``: WordNet's first sense of the lemma and part of speech the tagger chose for that token.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from elmo_features.util.provenance import machine, timestamp, write_text_atomic

from elmo_tasks.data.detokenize import detokenize
from elmo_tasks.wsd.data.reader import WsdDataset
from elmo_tasks.wsd.data.scorer import Score, merge_scores, score, write_key_file
from elmo_tasks.wsd.pos_head import token_vectors
from elmo_tasks.wsd.tag_output import TaggedSentence, TaggedToken
from elmo_tasks.wsd.tagging import SenseTagger
from elmo_tasks.wsd.vectors import all_layers

NAME = "wsd raw-eval"  # the results folder's marker (raw_eval.json's "name")
MODES = {"gold": "gold lemma + POS (the data set's tokens)", "gold_first_sense": "gold lemma + POS, first sense",
         "raw": "raw text (tagger's tokens, lemma, POS)", "raw_first_sense": "raw text, first sense"}
CHUNK = 256  # sentences tagged at a time (progress between chunks)


@dataclass
class RawSentence:
    """A test sentence as raw text, and the character span of each of its instances in it."""

    text: str
    spans: dict[str, tuple[int, int]]


def raw_sentences(dataset: WsdDataset) -> list[RawSentence]:
    """Every sentence of ``dataset`` detokenized, with each instance's (start, end) in its text."""
    out = []
    for s in dataset.sentences:
        text, spans = detokenize(s.tokens)
        out.append(RawSentence(text, {i.id: (spans[i.start][0], spans[i.end - 1][1]) for i in s.instances}))
    return out


def align(tagged: TaggedSentence, spans: dict[str, tuple[int, int]]) -> dict[str, TaggedToken]:
    """The tagger's token of each instance whose span one token has exactly (instance id -> token)."""
    by_span = {(t.start, t.end): t for t in tagged}
    return {iid: by_span[span] for iid, span in spans.items() if span in by_span}


def first_sense(tagger: SenseTagger, lemma: str | None, pos: str | None) -> str | None:
    """WordNet's first sense key of ``lemma`` as ``pos`` among the sense file's keys (None: it has none)."""
    keys = tagger.by_lemma.get(((lemma or "").lower(), pos), [])
    return keys[0] if keys else None


def raw_answers(tagger: SenseTagger, sentences: list[RawSentence], progress: bool = False) -> dict[str, TaggedToken]:
    """The aligned tagger token of every instance of ``sentences`` (instances not aligned are left out)."""
    tokens: dict[str, TaggedToken] = {}
    for i in range(0, len(sentences), CHUNK):
        part = sentences[i:i + CHUNK]
        for tagged in tagger.tag("\n".join(s.text for s in part)):
            tokens.update(align(tagged, part[tagged.line - 1].spans))
        if progress:
            print(f"  tagged {min(i + CHUNK, len(sentences)):,}/{len(sentences):,} sentences", file=sys.stderr)
    return tokens


def gold_answers(tagger: SenseTagger, dataset: WsdDataset) -> tuple[dict[str, str], dict[str, str]]:
    """(the sense file's answers, the first senses) for every instance from its gold lemma and part of speech, on the
    data set's own tokens."""
    best, first = {}, {}
    weights = tagger.meta["layers"]
    for i in range(0, len(dataset.sentences), CHUNK):
        part = dataset.sentences[i:i + CHUNK]
        for s, layers in zip(part, all_layers(tagger.source, [s.tokens for s in part], "raw-eval")):  # [(L, n, D)]
            for inst in s.instances:
                keys = tagger.by_lemma.get((inst.lemma.lower(), inst.pos), [])
                if keys:
                    first[inst.id] = keys[0]
                cands = [k for k in keys if tagger.has[tagger.index[k]]]
                v = token_vectors(layers[:, inst.start:inst.end].mean(axis=1, keepdims=True), weights)[0]  # (D,)
                if cands and v.any():
                    best[inst.id] = tagger.best_sense(cands, v)[0]
    return best, first


def _as_row(s: Score) -> dict:
    """A score's counts, P/R/F1 and coverage (answered / all), in percent."""
    return {**s.as_dict(), "coverage": round(100 * s.answered / s.total, 1) if s.total else 0.0}


def evaluate_set(tagger: SenseTagger, dataset: WsdDataset, keys_dir: Path | None = None,
                 progress: bool = False) -> dict:
    """Every mode's scores on one data set (``MODES``), the alignment counts, and how often the tagger's part of
    speech and lemma are the gold ones on the answered instances; ``keys_dir``: write each mode's answers there
    (``keys_dir/MODE/NAME.key.txt``, the framework's answer format)."""
    sentences = raw_sentences(dataset)
    tokens = raw_answers(tagger, sentences, progress)
    answers = {"raw": {iid: t.key for iid, t in tokens.items() if t.key}}
    answers["raw_first_sense"] = {iid: first_sense(tagger, t.lemma, t.pos) for iid, t in tokens.items() if t.key}
    answers["gold"], answers["gold_first_sense"] = gold_answers(tagger, dataset)
    instances = dataset.instances
    by_id = {i.id: i for i in instances}
    tagged = [(by_id[iid], t) for iid, t in tokens.items() if t.key]
    order = [i.id for i in instances]
    if keys_dir is not None:
        for mode in MODES:
            write_key_file(keys_dir / mode / f"{dataset.name}.key.txt", answers[mode], order)
    return {"name": dataset.name, "folder": str(dataset.folder), "instances": len(instances),
            "multiword": sum(1 for i in instances if i.end - i.start > 1), "aligned": len(tokens),
            "pos_as_gold": sum(1 for i, t in tagged if t.pos == i.pos),
            "lemma_as_gold": sum(1 for i, t in tagged if t.lemma == i.lemma.lower()),
            "scores": {mode: _as_row(score(dataset.gold, answers[mode])) for mode in MODES}}


def evaluate(tagger: SenseTagger, datasets: list[WsdDataset], keys_dir: Path | None = None,
             progress: bool = False) -> dict:
    """``evaluate_set`` per data set, and ALL: their union (the framework's convention: counts summed)."""
    started = time.time()
    sets = []
    for ds in datasets:
        if progress:
            print(f"{ds.name}: {len(ds.sentences):,} sentences, {len(ds.instances):,} instances", file=sys.stderr)
        sets.append(evaluate_set(tagger, ds, keys_dir, progress))
    total = {k: sum(s[k] for s in sets) for k in ("instances", "multiword", "aligned", "pos_as_gold", "lemma_as_gold")}
    all_row = {"name": "ALL", **total,
               "scores": {m: _as_row(merge_scores(Score(**{k: s["scores"][m][k] for k in ("correct", "answered", "total")})
                                                  for s in sets)) for m in MODES}}
    return {"tests": sets, "all": all_row, "seconds": round(time.time() - started, 1)}


def summary(result: dict, senses: str, tagger: SenseTagger, prior: bool, command: str, commit: str,
            unknown: dict[str, list[str]] | None = None) -> dict:
    """``evaluate``'s result with its provenance: the command, the commit, the machine, the sense file's source;
    ``unknown``: per data set, its gold keys that are not WordNet's (``file:line: key``, as ``wsd`` records them)."""
    meta, unknown = tagger.meta, unknown or {}
    tests = [{**t, "gold_keys_not_in_wordnet": len(unknown.get(t["name"], [])),
              "first_not_in_wordnet": unknown.get(t["name"], [])[:3]} for t in result["tests"]]
    return {"name": NAME, "command": command, "git_commit": commit, "machine": machine(), "date": timestamp(),
            "senses": senses, "source": meta.get("source"), "lemmas": len(meta["lemmas"]) if meta.get("lemmas") else
            None, "prior": prior, "pos_head": tagger.pos_head is not None, **result, "tests": tests}


def render(summary: dict) -> str:
    """The markdown table of a ``summary``: F1 per mode and set, then the raw-text pipeline's counts."""
    cols = [*summary["tests"], summary["all"]]
    names = [c["name"] for c in cols]
    scope = f" (a {summary['lemmas']}-lemma sense file)" if summary.get("lemmas") else ""
    lines = [f"# WSD on raw text: {summary['source']} sense vectors{scope}", "",
             f"Sense file `{summary['senses']}`{', with its first-sense prior' if summary['prior'] else ''}; "
             f"part of speech of unmarked words from "
             f"{'its part-of-speech head' if summary['pos_head'] else 'the SemCor count (the file has no head)'}. "
             "ALL is the union of the test sets.", "",
             "F1 (%) by the framework's scorer:", "",
             "| answers | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for mode, label in MODES.items():
        lines.append(f"| {label} | " + " | ".join(f"{c['scores'][mode]['F1']:.1f}" for c in cols) + " |")
    lines += ["", "The raw-text pipeline:", "", "| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    pct = lambda a, b: f"{100 * a / b:.1f}%" if b else "–"  # noqa: E731
    rows = [("instances", lambda c: f"{c['instances']:,}"),
            ("multi-word instances", lambda c: f"{c['multiword']:,}"),
            ("aligned by span", lambda c: pct(c["aligned"], c["instances"])),
            ("coverage (answered / all)", lambda c: f"{c['scores']['raw']['coverage']:.1f}%"),
            ("precision", lambda c: f"{c['scores']['raw']['P']:.1f}"),
            ("recall", lambda c: f"{c['scores']['raw']['R']:.1f}"),
            ("tagger's POS = gold (answered)", lambda c: pct(c["pos_as_gold"], c["scores"]["raw"]["answered"])),
            ("tagger's lemma = gold (answered)", lambda c: pct(c["lemma_as_gold"], c["scores"]["raw"]["answered"]))]
    for label, cell in rows:
        lines.append(f"| {label} | " + " | ".join(cell(c) for c in cols) + " |")
    bad = [f"{t['name']} {t['gold_keys_not_in_wordnet']}" for t in summary["tests"]
           if t.get("gold_keys_not_in_wordnet")]
    if bad:
        lines += ["", f"Gold keys that are not sense keys of its WordNet: {', '.join(bad)} (kept as gold; no answer "
                  "can match them, so an instance whose only gold keys are such counts as an error)."]
    m = summary["machine"]
    lines += ["", "Each sentence is joined back into raw text (punctuation and clitics attached: docs/wsd.md, "
              "\"WSD on raw text\") and tagged as `wsd tag` tags a line; an instance is aligned when one of the "
              "tagger's tokens has exactly its character span. P is over the answered instances, R and coverage over "
              "all, as the framework's scorer counts them. The gold rows read the data set's lemma, part of speech and "
              "tokens with the same sense file.", "",
              f"Command: `{summary['command']}`", "",
              f"Commit {summary['git_commit']}, {summary['date']}, {m['cpu_model']} ({m['cpu_cores']} cores, "
              f"{m['torch_threads']} torch threads), {summary['seconds'] / 60:.1f} min.", ""]
    return "\n".join(lines)


def key_files(names: list[str]) -> list[str]:
    """The answer files ``evaluate`` writes for the data sets ``names``, relative to the results folder."""
    return [f"keys/{mode}/{name}.key.txt" for name in names for mode in MODES]


def earlier_key_files(out: Path) -> list[str]:
    """The answer files the run that wrote ``out/raw_eval.json`` recorded (none: no earlier run, or unreadable)."""
    import json

    try:
        earlier = json.loads((out / "raw_eval.json").read_text(encoding="utf-8"))
        return [str(k) for k in earlier.get("keys", key_files([t["name"] for t in earlier["tests"]]))]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []


def write_results(summary: dict, out: Path) -> None:
    """``out/raw_eval.json`` and ``out/raw_eval.md`` (atomically), then the answer files an earlier run into
    ``out`` wrote that this one did not (only those its raw_eval.json records), so the folder is one run's."""
    import json

    summary = {**summary, "keys": key_files([t["name"] for t in summary["tests"]])}
    stale = [k for k in earlier_key_files(out) if k not in summary["keys"]]
    write_text_atomic(out / "raw_eval.json", json.dumps(summary, indent=1) + "\n")
    write_text_atomic(out / "raw_eval.md", render(summary))
    keys = (out / "keys").resolve()
    for k in stale:
        path = (out / k).resolve()
        if path.parent.parent == keys and path.name.endswith(".key.txt"):  # (never a file outside out/keys)
            path.unlink(missing_ok=True)

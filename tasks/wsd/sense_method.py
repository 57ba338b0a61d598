"""The sense-vector rows of the WSD table (``knn: [senses, senses_glosses]``): their choices on held-out training
sentences, then 1-NN over every WordNet candidate on the test sets (``tasks/wsd/senses.py``)."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from elmo_features.util.errors import ConfigError

from elmo_tasks.wsd.data.examples import WsdSentence, all_targets
from elmo_tasks.features.base import FeatureContext, build_features, section_fingerprints
from elmo_tasks.wsd.knn import SenseSums
from elmo_tasks.wsd.senses import (EXAMPLE_MODES, POOLINGS, POS, PRIOR_GRID, STEPS, W_GRID, Candidates, Graph, accuracy,
                              answer, candidate_cosines, context_centroids, gloss_layers, mix, mixed_gloss, propagate,
                              subset_key, wordnet_fingerprint)
from elmo_tasks.wsd.data.wordnet import WordNet

ROWS = ("senses", "senses_glosses", "senses_prior")


@dataclass
class SensePlan:
    """What the held-out training sentences chose, and the gloss vectors of the chosen layers."""

    weights: list[float]
    layer_label: str
    pooling: str | None = None
    gloss_text: str | None = None  # the gloss sentences chosen (wordnet.GLOSS_TEXTS)
    gloss_label: str | None = None  # the gloss layers chosen (a layer candidate's label)
    gloss_weights: list[float] | None = None
    w: dict[str, float] = field(default_factory=dict)
    prior: float = 0.0  # the weight of a first-sense prior (1 / sense number), for the row senses_prior
    examples: str = "none"  # how WordNet's usage examples are used (senses.EXAMPLE_MODES)
    example_sums: SenseSums | None = None  # their per-layer sums per sense key
    gloss: np.ndarray | None = None  # (S, D) float32
    held_out: dict = field(default_factory=dict)


def layer_candidates(L: int) -> list[tuple[str, list[float]]]:
    """Single layers, then the sums of the top k layers (k = 2..L)."""
    out = [(f"layer {l}", [1.0 if i == l else 0.0 for i in range(L)]) for l in range(L)]
    out += [(f"sum of the top {k} layers", [1.0 if i >= L - k else 0.0 for i in range(L)]) for k in range(2, L + 1)]
    return out


@dataclass
class HeldOut:
    """Every ``every``-th training sentence (or document: ``by``) held out: sense sums of the others, the held-out
    instances and their layer vectors. Small (a twentieth of the training vectors), so it can outlive the training
    arrays."""

    every: int
    sums: SenseSums
    targets: list
    vecs: np.ndarray  # (H, L, D)
    by: str = "sentences"


def document_of(sentence_id: str) -> str:
    """The document a framework sentence id names: its part before the first dot (``d000`` of ``d000.s000``)."""
    return sentence_id.split(".", 1)[0]


def held_out_sentences(train_ex: list[WsdSentence], every: int, by: str = "sentences") -> list[bool]:
    """Per training sentence, whether it is held out: every ``every``-th sentence, or every sentence of every
    ``every``-th document (in order of first appearance), a split like tagging new text: a held-out document's
    topics, and the senses they bring, were not seen in training (in SemCor, 10.1% of the held-out instances have
    a sense the rest never tags, against 7.5% with every 20th sentence)."""
    if by == "sentences":
        return [i % every == every - 1 for i in range(len(train_ex))]
    order = {d: i for i, d in enumerate(dict.fromkeys(document_of(ex.id) for ex in train_ex))}
    return [order[document_of(ex.id)] % every == every - 1 for ex in train_ex]


def check_hold_out(train_ex: list[WsdSentence], every: int, by: str = "sentences") -> None:
    """Every ``every``-th training sentence (document) holds some annotated instance, or ConfigError (before any
    embedding): each choice on the held-out sentences would be a tie at 0 accuracy, the first candidate taken."""
    if every < 2:
        raise ConfigError(f"head_dev_every {every}: the sense vectors choose their settings on held-out training "
                          "sentences; set head_dev_every >= 2")
    held = held_out_sentences(train_ex, every, by)
    if not any(t.gold for ex, h in zip(train_ex, held) if h for t in ex.targets):
        unit = "sentence" if by == "sentences" else "document"
        units = len(train_ex) if by == "sentences" else len({document_of(ex.id) for ex in train_ex})
        raise ConfigError(f"head_dev_every {every}: holds out no annotated instance of the {units:,} training "
                          f"{unit}s (every {every}th {unit}); the settings chosen on held-out sentences would be "
                          f"chosen on nothing: give a smaller head_dev_every" +
                          (", or dev_split: sentences" if by == "documents" else ""))


def hold_out(train_ex: list[WsdSentence], train_vecs: np.ndarray, every: int, by: str = "sentences") -> HeldOut:
    """Split the training instances by sentence (or document): the held-out sentences' annotated instances."""
    check_hold_out(train_ex, every, by)
    targets = all_targets(train_ex)
    held = held_out_sentences(train_ex, every, by)
    is_dev = np.concatenate([np.full(len(ex.targets), h) for ex, h in zip(train_ex, held)])
    fit = [t for t, d in zip(targets, is_dev) if not d]
    held_rows = np.flatnonzero(is_dev & np.array([bool(t.gold) for t in targets]))
    return HeldOut(every, SenseSums.from_targets(fit, train_vecs, rows_of=np.flatnonzero(~is_dev)),
                   [targets[i] for i in held_rows],
                   np.ascontiguousarray(train_vecs[held_rows]), by)


def held_candidates(train_ex: list[WsdSentence], graph: Graph, every: int, by: str = "sentences") -> list[str]:
    """The graph's sense keys among the candidates of the held-out sentences' annotated instances: the senses whose
    glosses the held-out choices score (every rank computes the same list)."""
    held = held_out_sentences(train_ex, every, by)
    return sorted({k for ex, h in zip(train_ex, held) if h for t in ex.targets if t.gold for k in t.candidates
                   if k in graph.index})


def plan_senses(section: dict, graph: Graph, held_out: HeldOut, context: FeatureContext, glosses: Sequence[str],
                progress: bool | None, extra: list[tuple[str, list[float]]] = (),
                examples: SenseSums | None = None, pooled: dict | None = None,
                gloss_rows: np.ndarray | None = None) -> SensePlan:
    """Choose the layer mix among the single layers, the sums of the top k and the ``extra`` candidates (a learned
    mix), how WordNet's usage ``examples`` (``example_sums.example_sums``) are used, and with ``glosses`` (gloss texts,
    ``wordnet.GLOSS_TEXTS``; empty: none) the gloss text, pooling and layers and w per part of speech, by 1-NN
    accuracy on the held-out sentences, with sense vectors built from the other sentences. ``pooled``: the gloss
    layers of each text, when they are embedded already ({text: ``sense_glosses``'s}); ``gloss_rows`` (G,): the
    graph rows ``pooled``'s arrays hold when they hold only those (``held_candidates``: the choices need no more;
    ``plan.gloss`` is then None, for the caller to fill with ``chosen_glosses``)."""
    every, sums, held, held_vecs = held_out.every, held_out.sums, held_out.targets, held_out.vecs
    L = held_vecs.shape[1]
    scores, candidates = {}, dict(layer_candidates(L)) | {label: list(w) for label, w in extra}
    for label, weights in candidates.items():
        context_vecs, step = propagate(graph, sums.keys, sums.centroids(weights))
        v = np.einsum("nld,l->nd", held_vecs, np.asarray(weights, dtype=np.float32))
        scores[label] = accuracy(held, answer(held, candidate_cosines(held, v, graph, context_vecs, step, None),
                                              graph, {})[0])
    best = max(scores, key=scores.get)  # the first of equals: single layers come first, a learned mix last
    weights = candidates[best]
    plan = SensePlan(weights, best, held_out={"instances": len(held), "every": every, "by": held_out.by,
                                              "layers": {k: round(a, 4) for k, a in scores.items()}})
    v = np.einsum("nld,l->nd", held_vecs, np.asarray(weights, dtype=np.float32))
    if examples is not None:
        _plan_examples(plan, examples, graph, held_out, v)
    context_vecs, step = sense_context(graph, sums, plan)
    if not glosses:
        return plan
    t0 = time.perf_counter()
    pooled = pooled or {text: sense_glosses(section, graph, context, progress, text) for text in glosses}
    plan.held_out["gloss_seconds"] = round(time.perf_counter() - t0, 1)
    _plan_glosses(plan, pooled, held, v, graph, context_vecs, step, candidates, gloss_rows)
    if gloss_rows is not None:
        plan.held_out["gloss_senses"] = len(gloss_rows)  # (the senses whose glosses the choices embedded)
    return plan


def sense_context(graph: Graph, sums: SenseSums, plan: SensePlan) -> tuple[np.ndarray, np.ndarray]:
    """Every WordNet sense's context vector (S, D) and step (S,) for the plan's layers and use of WordNet's examples,
    from the training ``sums``."""
    keys, centroids, example_only = context_centroids(sums, plan.example_sums, plan.examples, plan.weights)
    return propagate(graph, keys, centroids, example_only)


def _plan_examples(plan: SensePlan, examples: SenseSums, graph: Graph, held_out: HeldOut, v: np.ndarray) -> None:
    """Choose how WordNet's usage examples are used (``EXAMPLE_MODES``, "none" first of equals) by the held-out
    accuracy of full coverage with the chosen layers ``v`` (H, D)."""
    plan.example_sums = examples
    held, accs = held_out.targets, {}
    for mode in EXAMPLE_MODES:
        plan.examples = mode
        context_vecs, step = sense_context(graph, held_out.sums, plan)
        accs[mode] = accuracy(held, answer(held, candidate_cosines(held, v, graph, context_vecs, step, None),
                                           graph, {})[0])
    plan.examples = max(accs, key=accs.get)
    plan.held_out["examples"] = {"tagged": int(plan.example_sums.counts.sum()), "senses": len(plan.example_sums.keys),
                                 "accuracy": {m: round(a, 4) for m, a in accs.items()}, "chosen": plan.examples}
    if plan.examples == "none":
        plan.example_sums = None  # (not kept in memory)


def sense_glosses(section: dict, graph: Graph, context: FeatureContext, progress: bool | None,
                  text: str = "definition", ranks=None) -> dict[str, np.ndarray] | None:
    """Every sense's gloss (``text``: ``wordnet.GLOSS_TEXTS``) pooled per layer by the source ``section``
    (``senses.gloss_layers``), keyed in ``context.cache_dir`` by the section, its models' fingerprints, WordNet's
    and the text; ``ranks``: shared by the torchrun ranks, rank 0 gets them (None on the others)."""
    source = build_features(section, replace(context, cache_dir=None, memo=context.memo.streaming()))
    what = {"section": section, "models": section_fingerprints(section, context.memo),
            "wordnet": wordnet_fingerprint(graph.wn), "version": 1}
    if text != "full":  # (the full gloss field was the only text once: its caches keep their key)
        what["text"] = text
    what.update(subset_key(graph))  # (the senses of a few lemmas: a cache of their own)
    return gloss_layers(graph, source, json.dumps(what, sort_keys=True), context.cache_dir, progress, text, ranks)


def chosen_glosses(section: dict, graph: Graph, context: FeatureContext, progress: bool | None, text: str,
                   pooling: str, weights: Sequence[float], ranks=None) -> np.ndarray | None:
    """Every sense's gloss vector (S, D) float32 as the choices made it (``text``, ``pooling``, layer ``weights``),
    embedded once (``senses.mixed_gloss``), keyed in ``context.cache_dir`` like ``sense_glosses`` plus the choice;
    ``ranks``: shared by the torchrun ranks, rank 0 gets them (None on the others)."""
    source = build_features(section, replace(context, cache_dir=None, memo=context.memo.streaming()))
    what = {"section": section, "models": section_fingerprints(section, context.memo),
            "wordnet": wordnet_fingerprint(graph.wn), "version": 1, "text": text, "pooling": pooling,
            "layers": [float(x) for x in weights], **subset_key(graph)}
    return mixed_gloss(graph, source, json.dumps(what, sort_keys=True), context.cache_dir, progress, text, pooling,
                       weights, ranks)


def _best_w_per_pos(held: list, cands: Candidates, graph: Graph) -> tuple[dict[str, float], dict[str, float], float]:
    """The gloss weight w of each part of speech with the best held-out accuracy (the smallest w of equals), those
    accuracies, and the accuracy of all held-out instances with them: ``answer``'s choices for every w of
    ``W_GRID`` at once (one array operation per instance, not one call per w)."""
    W = np.asarray(W_GRID)  # (G,)
    right = np.zeros((len(held), len(W)), dtype=bool)  # (N, G): whether the answer with w is a gold key
    for n, (t, rows, c, g) in enumerate(zip(held, cands.rows, cands.ctx, cands.gloss)):
        if not len(rows) or not np.any(c):  # (answer's back-off: WordNet's first sense)
            right[n] = t.first_sense in t.gold
            continue
        best = np.argmax(c[None, :] + W[:, None] * g[None, :], axis=1)  # (G,) as answer's c + w * g, first of equals
        right[n] = [graph.keys[rows[b]] in t.gold for b in best]
    w_pos, acc_pos, chosen = {}, {}, right[:, W_GRID.index(0.0)].copy()  # (N,) (another part of speech: w 0)
    for pos in POS:
        part = np.array([t.pos == pos for t in held], dtype=bool)  # (N,)
        if not part.any():
            continue
        accs = right[part].mean(axis=0)  # (G,)
        k = int(np.argmax(accs))
        w_pos[pos], acc_pos[pos] = W_GRID[k], round(float(accs[k]), 4)
        chosen[part] = right[part, k]
    return w_pos, acc_pos, float(np.mean(chosen)) if len(held) else 0.0


def _plan_glosses(plan: SensePlan, pooled: dict[str, dict[str, np.ndarray]], held: list, v: np.ndarray, graph: Graph,
                  context_vecs: np.ndarray, step: np.ndarray, candidates: dict[str, list[float]],
                  rows: np.ndarray | None = None) -> None:
    """Choose the gloss text, pooling and layers (the same candidates as the context's: a gloss may be best read
    from another layer) and w per part of speech on the held-out sentences; then the first-sense prior's weight.
    ``rows``: the graph rows ``pooled`` holds (all when None)."""
    best_total, choice = -1.0, None
    for text, by_pooling in pooled.items():
        for pooling in POOLINGS:
            for label, weights in candidates.items():
                gloss = mix(by_pooling[pooling], weights)  # (S, D), or (G, D) for ``rows``
                cands = candidate_cosines(held, v, graph, context_vecs, step, gloss, rows)
                w_pos, acc_pos, total = _best_w_per_pos(held, cands, graph)
                plan.held_out[f"glosses_{text}_{pooling}_{label}"] = {"w": w_pos, "accuracy_by_pos": acc_pos,
                                                                       "accuracy": round(total, 4)}
                if total > best_total:  # the first of equals: the context's own layers are tried in the same order
                    best_total, choice = total, (text, pooling, label, weights, w_pos, gloss, cands)
    plan.gloss_text, choice = choice[0], choice[1:]
    plan.pooling, plan.gloss_label, plan.gloss_weights, plan.w, plan.gloss, cands = choice
    if rows is not None:
        plan.gloss = None  # (the candidates' only: the caller embeds every sense's with the choice)
    priors = [accuracy(held, answer(held, cands, graph, plan.w, p)[0]) for p in PRIOR_GRID]
    plan.prior = PRIOR_GRID[int(np.argmax(priors))]
    plan.held_out["prior"] = {"weights": list(PRIOR_GRID), "accuracy": [round(a, 4) for a in priors]}


def sense_rows(report, cfg, name: str, graph: Graph, sums: SenseSums, plan: SensePlan,
               test_vecs: list[np.ndarray]) -> None:
    """The rows ``senses`` (full coverage) and ``senses_glosses`` of one source on every test set."""
    context_vecs, step = sense_context(graph, sums, plan)
    coverage = {STEPS[i]: int((step == i).sum()) for i in range(len(STEPS))} | {"none": int((step < 0).sum())}
    full = {"none": "full coverage", "unseen": "full coverage with WordNet's examples for senses SemCor lacks",
            "all": "full coverage with WordNet's examples"}[plan.examples]
    which = [("senses", full, {}, 0.0)]
    if "senses_glosses" in cfg.knn and plan.gloss is not None:
        which.append(("senses_glosses", f"+ glosses ({plan.gloss_text}, {plan.pooling} pooling, {plan.gloss_label})",
                      plan.w, 0.0))
    if "senses_prior" in cfg.knn and plan.gloss is not None:
        which.append(("senses_prior", f"+ glosses + first-sense prior {plan.prior:g}", plan.w, plan.prior))
    for row, label, w, prior in which:
        answers, backoff = {}, 0
        for ts, vecs in zip(report.tests, test_vecs):
            v = np.einsum("nld,l->nd", vecs, np.asarray(plan.weights, dtype=np.float32))
            cands = candidate_cosines(ts.targets, v, graph, context_vecs, step, plan.gloss if w else None)
            answers[ts.name], b = answer(ts.targets, cands, graph, w, prior)
            backoff += b
        report.add(f"{name}-{row}", f"{name} sense vectors, {label}, {plan.layer_label}", answers, "senses", name,
                   plan.layer_label, weights=[round(x, 6) for x in plan.weights], backoff=backoff,
                   senses={"coverage": coverage, "examples": plan.examples, "w": w, "gloss_text": plan.gloss_text if w else None,
                           "pooling": plan.pooling if w else None, "prior": prior,
                           "gloss_layers": [round(x, 6) for x in plan.gloss_weights] if w else None,
                           "held_out": plan.held_out})


def load_graph(wordnet: str | Path) -> Graph:
    """The WordNet graph of a dict folder (read once per WSD run)."""
    return Graph(WordNet(wordnet))

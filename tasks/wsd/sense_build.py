"""``elmo-tasks wsd senses``: the sense vectors of every WordNet sense (or of a few lemmas' senses) written to a
sense file (``tagging``'s format) with their provenance.

SemCor's instances are streamed into per-sense sums (``semcor_sums``), the settings are chosen on its held-out
documents (``sense_method.plan_senses``), the glosses are embedded in chunks written to the cache as they come
(``senses.pooled_layers``: a rerun after a stop resumes). ``lemmas``: only those lemmas' senses, their SemCor
instances and their glosses (a build of seconds, for trying it); without SemCor (``train_dir`` None) only with
``lemmas``, from the glosses alone.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import h5py
import numpy as np

from elmo_features.util.errors import ConfigError, DivergedError, PathError, UsageError
from elmo_features.util.provenance import atomic_path, git_commit, package_version, real_output
from elmo_features.util.room import H5pyRoomWatch, close_once, disk_full, room_cause, room_left, size_text
from elmo_features.util.wording import counted, first_few

from elmo_tasks.data.tokenizer import normalize
from elmo_tasks.features.base import FeatureContext, build_features, section_fingerprints
from elmo_tasks.wsd.data.examples import (WsdSentence, load_inventory, require_known_keys, to_examples,
                                          warn_unknown_keys)
from elmo_tasks.wsd.data.reader import load_dataset, load_dataset_where
from elmo_tasks.wsd.data.wordnet import WordNet
from elmo_tasks.wsd.example_sums import example_sums
from elmo_tasks.wsd.pos_head import train_pos_head, write_pos_head
from elmo_tasks.wsd.ranks import from_main, gather_streamed
from elmo_tasks.wsd.semcor_sums import all_sums, held_out_of, stream_sums
from elmo_tasks.wsd.sense_method import SensePlan, check_hold_out, chosen_glosses, held_candidates, layer_candidates, \
    plan_senses, sense_context, sense_glosses
from elmo_tasks.wsd.senses import POS, STEPS, Graph, mix, wordnet_fingerprint
from elmo_tasks.wsd.sense_file import FORMAT, SENSE_ARRAYS, non_finite_senses, sense_digest

POS_FEW = {"train_sentences": 500, "held_sentences": 200}  # the part-of-speech head of a --lemmas build (quick)
POS_FEW_EVERY = 12  # a --lemmas build reads every 12th SemCor sentence for it, besides those of its lemmas
DEFAULT_TOP = 4  # without held-out SemCor instances: the sum of the top 4 layers (LMMS's choice), w 1, sentence pooling


def lemma_keys(wn: WordNet, lemmas: Sequence[str]) -> list[str]:
    """The sense keys of ``lemmas`` (any letter case, spaces or underscores; folded as ``wsd tag`` folds a word:
    fullwidth ｂａｎｋ is bank), or UsageError naming those WordNet lacks."""
    by_lemma: dict[str, list[str]] = {}
    for k in wn.synset_of:
        by_lemma.setdefault(k.partition("%")[0], []).append(k)
    wanted = [normalize(lemma).lower().replace(" ", "_") for lemma in lemmas if lemma.strip()]
    missing = [lemma for lemma in wanted if lemma not in by_lemma]
    if not wanted:
        raise UsageError("--lemmas: no lemma given; give lemmas, e.g. bank,plant")
    if missing:  # (the first five: a long list of typos would make a line of kilobytes)
        given = f" ({len(missing):,} of the {len(wanted):,} given)" if len(missing) > 5 else ""
        raise UsageError(f"--lemmas: {first_few(missing)}{given}: not "
                         f"{'a lemma' if len(missing) == 1 else 'lemmas'} of WordNet {wn.folder}")
    return sorted({k for lemma in wanted for k in by_lemma[lemma]})


def _only_senses(train_ex: list[WsdSentence], graph: Graph) -> list[WsdSentence]:
    """The training sentences with an instance of the graph's senses, with only those instances."""
    out = []
    for ex in train_ex:
        targets = [t for t in ex.targets if any(k in graph.index for k in t.gold)]
        if targets:
            out.append(replace(ex, targets=targets))
    return out


def default_plan(L: int, gloss: dict[str, np.ndarray] | None, why: str) -> SensePlan:
    """The settings without held-out instances to choose them: the sum of the top ``DEFAULT_TOP`` layers for the
    context and the gloss, the definition with sentence pooling, w 1 per part of speech, no prior."""
    label, weights = layer_candidates(L)[L + min(DEFAULT_TOP, L) - 2] if L > 1 else ("layer 0", [1.0])
    plan = SensePlan(weights, label, "sentence", "definition", label, weights, {p: 1.0 for p in POS},
                     held_out={"default": why})
    if gloss is not None:
        plan.gloss = mix(gloss["sentence"], weights)  # (S, D)
    return plan


def build_sense_file(cfg, name: str, train_dir: str | None, out: str | Path, context: FeatureContext,
                     progress: bool | None = None, command: str = "", lemmas: Sequence[str] | None = None,
                     ranks=None) -> dict | None:
    """Sense vectors of every WordNet sense (``lemmas``: of those lemmas' senses) from source ``name`` of ``cfg``
    trained on ``train_dir`` (None: from the glosses alone, only with ``lemmas``), written to ``out``
    (atomically); returns the meta dict. ``ranks`` (torchrun, ``elmo_tasks.wsd.ranks``): the ranks share SemCor
    and the glosses, rank 0 writes the file (None on the others)."""
    section = cfg.sources[name]
    wn = WordNet(cfg.wordnet)
    graph = Graph(wn, lemma_keys(wn, lemmas)) if lemmas else Graph(wn)
    if train_dir is None and not lemmas:
        raise UsageError("wsd senses needs SemCor for all of WordNet: get it with `elmo-tasks data get wsd-framework`")
    source = build_features(section, replace(context, cache_dir=None, memo=context.memo.streaming()))
    trouble = feature_trouble(source)
    if trouble and trouble[0]:  # (before any long work: every vector would be NaN)
        raise DivergedError(f"wsd senses: the feature source {name} {trouble[1]}; nothing was written: fix or replace "
                            f"the model of sources.{name}")
    train_ex: list[WsdSentence] = []
    train_ds = None
    if train_dir is not None:
        inventory = load_inventory(cfg.wordnet)
        train_ds = (load_dataset_where(train_dir, graph.index.__contains__, POS_FEW_EVERY) if lemmas else
                    load_dataset(train_dir))  # (a few lemmas: their sentences, found unparsed in the raw XML)
        require_known_keys(train_ds, inventory, cfg.wordnet)  # keys of another WordNet: no sense at all, refused
        warn_unknown_keys(train_ds, inventory, f"training set {train_ds.name}")
        train_ex = to_examples(train_ds, inventory)
        if lemmas:
            train_ex = _only_senses(train_ex, graph)
    why = None
    if lemmas:
        try:
            check_hold_out(train_ex, cfg.head_dev_every, cfg.dev_split)
        except ConfigError:
            why = (f"no held-out SemCor instance of {', '.join(lemmas)}" if train_ex else
                   "no SemCor instance of " + ", ".join(lemmas) if train_dir is not None else "no SemCor")
    else:
        check_hold_out(train_ex, cfg.head_dev_every, cfg.dev_split)  # (before the training set is embedded)
    shard = (ranks.rank, ranks.world_size) if ranks is not None else (0, 1)
    streamed = None
    if train_ex:
        with ranks.all_ok("semcor", "SemCor's sums") if ranks is not None else contextlib.nullcontext():
            streamed = stream_sums(source, train_ex, cfg.head_dev_every, cfg.dev_split, progress, shard=shard)
        if ranks is not None:
            streamed = gather_streamed(ranks, streamed)
    main = ranks is None or ranks.is_main
    if why is None:
        plan = _choose(cfg, section, graph, context, progress, train_ex, streamed, ranks)
    else:
        pooled = sense_glosses(section, graph, context, progress, ranks=ranks)  # (the definition's)
        plan = None
        if main:
            L = source.word_layers([["the"]], "check")[0].shape[0]
            plan = default_plan(L, pooled, why)
            settings = f"{plan.layer_label}, sentence pooling of the definition"
            print(f"wsd senses: {why}: " + (f"each sense's vector is its gloss's ({settings})" if streamed is None
                                            else f"default settings ({settings}, gloss weight w 1)"), file=sys.stderr)
    with ranks.all_ok("senses", "the sense file") if ranks is not None else contextlib.nullcontext():
        if main:  # (the other ranks wait for rank 0's file)
            return _finish(cfg, name, train_dir, out, context, progress, command, lemmas, graph, source, train_ds,
                           train_ex, streamed, plan)
    return None


def lean_glosses(candidates: int, texts: int, senses: int) -> bool:
    """Whether to embed every text of the held-out ``candidates``' glosses, then the chosen text of every sense's,
    rather than every text of every sense's: when that is fewer glosses (all of WordNet: 2 x 19k + 207k against
    2 x 207k; not a few lemmas, whose senses are nearly all candidates)."""
    return candidates * texts + senses < senses * texts


def _choose(cfg, section, graph, context, progress, train_ex, streamed, ranks) -> SensePlan | None:
    """The settings chosen on the held-out SemCor documents, with every sense's gloss vector (rank 0's plan; None
    on the other ranks). The choices score only the candidates of the held-out instances, so when they are fewer
    than the senses (all of WordNet), only their glosses are embedded with every text, layer and pooling, and then
    every sense's gloss once, with the chosen ones (``chosen_glosses``): a third of the embedding, and one (S, D)
    array in memory instead of every layer of every pooling of every text."""
    main = ranks is None or ranks.is_main
    examples = example_sums(section, graph, context, progress, ranks)  # (every rank embeds its share)
    keys = held_candidates(train_ex, graph, cfg.head_dev_every, cfg.dev_split)
    lean = lean_glosses(len(keys), len(cfg.gloss_texts), len(graph.keys))
    part = Graph(graph.wn, keys) if lean else graph
    pooled = {text: sense_glosses(section, part, context, progress, text, ranks) for text in cfg.gloss_texts}
    plan = None
    with ranks.all_ok("choices", "the held-out choices") if ranks is not None else contextlib.nullcontext():
        if main:
            held_out = held_out_of(streamed, train_ex, cfg.head_dev_every, cfg.dev_split)
            plan = plan_senses(section, graph, held_out, context, cfg.gloss_texts, progress, examples=examples,
                               pooled=pooled, gloss_rows=np.array([graph.index[k] for k in part.keys]) if lean
                               else None)
        held_out = None  # (what the choices needed: out of memory before the glosses of every sense)
        if streamed is not None:
            streamed.held_vecs = np.zeros((0,) + streamed.held_vecs.shape[1:], np.float32)  # (not a view: freed)
    del pooled
    if lean:
        choice = from_main(ranks, lambda: (plan.gloss_text, plan.pooling, plan.gloss_weights))
        gloss = chosen_glosses(section, graph, context, progress, *choice, ranks=ranks)  # (S, D) on rank 0
        if main:
            plan.gloss = gloss
    return plan


def _finish(cfg, name, train_dir, out, context, progress, command, lemmas, graph, source, train_ds, train_ex, streamed,
            plan) -> dict:
    """``build_sense_file`` from the choices on: the sense vectors, the part-of-speech head, the file."""
    section = cfg.sources[name]
    if streamed is not None:
        sums = all_sums(streamed)
        context_vecs, step = sense_context(graph, sums, plan)
        if graph.subset and plan.gloss is not None:  # a few lemmas: a sense that nothing reaches (no instance in its lexicographer file among
            lone = step < 0  # them) takes its gloss, as all of WordNet's propagation would have given it a vector
            context_vecs[lone], step[lone] = plan.gloss[lone], STEPS.index("gloss")
        counts = np.zeros(len(graph.keys), dtype=np.int64)
        for k, c in zip(sums.keys, sums.counts):
            if k in graph.index:
                counts[graph.index[k]] = c
        train = {"folder": str(train_dir), "instances": int(sum(len(ex.targets) for ex in train_ex)),
                 "senses": len(sums.keys)}
    else:  # the glosses alone: each sense's gloss is its context vector (scores are gloss cosines: w 0)
        context_vecs, step = plan.gloss.copy(), np.full(len(graph.keys), STEPS.index("gloss"), dtype=np.int8)
        counts, train, plan.w = np.zeros(len(graph.keys), dtype=np.int64), None, {p: 0.0 for p in POS}
    pos_head = (train_pos_head(source, train_ds.sentences, cfg.head_dev_every, progress, **(
        POS_FEW if lemmas else {})) if train_dir is not None else None)  # (head, record): SemCor's parts of speech
    meta = {"format": FORMAT, "source": name, "section": section,
            "fingerprints": section_fingerprints(section, context.memo), "layers": plan.weights,
            "layer_choice": plan.layer_label, "gloss_text": plan.gloss_text, "pooling": plan.pooling,
            "gloss_layers": plan.gloss_weights, "w": plan.w, "prior": plan.prior, "held_out": plan.held_out,
            "wordnet": str(Path(cfg.wordnet).expanduser().resolve()),
            "wordnet_fingerprint": wordnet_fingerprint(graph.wn),
            "train": train, "steps": {s: int((step == i).sum()) for i, s in enumerate(STEPS)},
            "examples": plan.examples, "pos_head": pos_head[1] if pos_head else None,
            "command": command, "cwd": os.getcwd(),
            "version": package_version(), "git_commit": git_commit()}
    if lemmas:
        meta["lemmas"] = sorted({k.partition("%")[0] for k in graph.keys})
    bad, in_context, in_gloss = non_finite_senses(context_vecs, plan.gloss)
    if bad:  # (a file of them would tag nothing, without a word)
        cause = (feature_trouble(source) or (False, "gives NaN or infinite values for some sentences"))[1]
        raise DivergedError(f"wsd senses: {bad:,} of {counted(len(graph.keys), 'sense')} have NaN or infinite "
                            f"vectors ({in_context:,} context, {in_gloss:,} gloss): the feature source {name} {cause}; "
                            f"{out} was not written: fix or replace the model of sources.{name}")
    _write(out, graph.keys, {"context": context_vecs, "gloss": plan.gloss, "step": step, "counts": counts}, meta,
           pos_head)
    return meta


PROBE = ["the", "bank", "of", "the", "river"]  # a sentence embedded before the build: a source giving NaN is refused


def feature_trouble(source) -> tuple[bool, str] | None:
    """What is wrong with ``source``'s features of ``PROBE``, or None: (True, NaN or infinite values: a diverged or
    damaged model), or (False, values beyond float16's range, in which the gloss vectors are pooled), in words."""
    a = source.word_layers([PROBE], "check")[0]  # (L, n, D)
    if not np.isfinite(a).all():
        return True, (f"gives NaN or infinite features ({(~np.isfinite(a)).mean():.0%} of the values for "
                      f"{' '.join(PROBE)!r}): its model is most likely diverged or damaged")
    top, fp16 = float(np.abs(a).max()), float(np.finfo(np.float16).max)
    if top > fp16:
        return False, f"gives features up to {top:.3g}, beyond float16's range ({fp16:g}) in which glosses are pooled"
    return None


SENSE_FILE_MARGIN = 32 << 10  # bytes a sense file may take besides its arrays' values (headers, heaps, B-trees)


def _write(out, keys: list[str], arrays: dict[str, np.ndarray], meta: dict, pos_head) -> None:
    """The sense file ``out`` (atomically): ``keys``, ``arrays`` (``SENSE_ARRAYS``), the part-of-speech head
    ``pos_head`` ((head, record) or None) and ``meta``, with their checksums. Too little room for it is one PathError
    naming the file and the room it needs (checked first; an HDF5 write failing for room is caught as well, its
    temporary file removed)."""
    need = (sum(a.nbytes for a in arrays.values()) + sum(len(k.encode("utf-8")) + 16 for k in keys)
            + (sum(v.numel() * v.element_size() for v in pos_head[0].state_dict().values()) if pos_head else 0)
            + 2 * len(json.dumps(meta)) + SENSE_FILE_MARGIN)
    room, what, todo = room_left(real_output(out))
    if need > room:
        raise PathError(f"{out}: the sense file needs about {size_text(need)}, but {what} {size_text(room)}; "
                        f"{todo} or write it elsewhere (--out), and run the same command again")
    try:
        with H5pyRoomWatch() as watch, atomic_path(out) as tmp:
            f = h5py.File(tmp, "w")
            try:
                f.create_dataset("keys", data=np.array(keys, dtype=object), dtype=h5py.string_dtype("utf-8"))
                for name in SENSE_ARRAYS:
                    f.create_dataset(name, data=arrays[name])
                    watch.check()
                f.attrs["sha256"] = sense_sha = sense_digest(keys, *(f[n][()] for n in SENSE_ARRAYS))
                watch.check()
                if pos_head:  # (its checksum bound to this file's, recorded in the meta as well)
                    meta["pos_head"] = {**pos_head[1], "sha256": write_pos_head(f, pos_head[0], sense_sha)}
                    watch.check()
                f.attrs["meta"] = json.dumps(meta)
                f.attrs["meta_sha256"] = hashlib.sha256(f.attrs["meta"].encode("utf-8")).hexdigest()
                watch.check()
                f.flush()
            except BaseException as e:
                if not disk_full(e):  # (a file whose write failed for room is left to the process's end: exit_now)
                    close_once(f)
                raise
            f.close()
    except (OSError, RuntimeError) as e:
        if not disk_full(e):
            raise
        error = PathError(f"{out}: {room_cause(e)} while writing the sense file (about {size_text(need)}); it was "
                          f"not written: free some space or write it elsewhere (--out), and run the same command again")
        error.exit_now = True  # the HDF5 library cannot shut down after a failed write (it crashes at exit)
        raise error from None

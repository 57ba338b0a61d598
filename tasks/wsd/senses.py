"""Sense vectors for every WordNet 3.0 sense from a feature source's frozen layers (LMMS: Loureiro & Jorge, ACL
2019, "Language Modelling Makes Sense"), and 1-NN over all of a word's senses with them.

1. **SemCor centroids**: the average vector of each sense's tagged training instances (as the paper's 1-NN).
2. **Propagation** to the senses SemCor never tags: a sense takes its synset's vector (the mean of the synset's
   centroids), else the mean of its hypernym synsets' vectors (``@``, not instance hypernyms), else the mean of
   its lexicographer file's synset vectors. The step each sense came from is kept (``STEPS``).
3. **Glosses**: each sense's augmented gloss "lemma - synset lemmas - gloss" is embedded by the same source and
   pooled (``sentence``: the mean over all its tokens; ``lemma``: over the leading lemma's tokens).

A test instance v takes, among all WordNet candidates of its lemma and part of speech, the sense s maximising
``cos(v, context_s) + w_pos * cos(v, gloss_s)`` (both parts L2-normalised: a weighted concatenation). The layer
mix, w per part of speech, the gloss pooling and the gloss layers (among the same candidates as the context's) are
chosen on held-out training sentences, never on test data.
"""
from __future__ import annotations

import contextlib
import hashlib
import mmap
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from elmo_features.util.memory import release_freed_memory

from elmo_tasks.wsd.data.examples import WsdTarget
from elmo_tasks.wsd.knn import _unit
from elmo_tasks.wsd.data.wordnet import WordNet
from elmo_tasks.wsd.gloss_cache import GlossStore, wait_note
from elmo_tasks.wsd.ranks import from_main, round_parts

STEPS = ("semcor", "synset", "hypernym", "lexfile", "examples", "gloss")  # where a sense's context vector came from
# (-1: nowhere); "examples": WordNet's usage examples only (``example_sums``), SemCor never tags the sense; "gloss":
# its own gloss (a sense file built without SemCor)
EXAMPLE_MODES = ("none", "unseen", "all")  # WordNet's examples: unused, for senses SemCor never tags, for every sense
W_GRID = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)  # gloss weights tried on the held-out sentences
PRIOR_GRID = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)  # weights of a first-sense prior (1 / sense number)
POOLINGS = ("sentence", "lemma")
POS = ("NOUN", "VERB", "ADJ", "ADV")
GLOSS_CHUNK = 2048  # gloss sentences embedded at a time, then written (a stopped run resumes at the next chunk)
POOL_AT = 256  # sentences whose per-word arrays are held at once before pooling (2,048 of WordNet's longest glosses
# would be 1.2 GB for MiniLM; the chunk's sentences are of a length, so 256 still make full batches)


class Graph:
    """WordNet as index arrays over its S sense keys and Y synsets, for vectorised propagation; with ``keys``, over
    those senses only (``subset``: e.g. the senses of a few lemmas) and their synsets."""

    def __init__(self, wn: WordNet, keys: Sequence[str] | None = None):
        self.wn = wn
        self.subset = keys is not None
        self.keys = sorted(set(keys)) if keys is not None else wn.keys()  # (S,)
        self.index = {k: i for i, k in enumerate(self.keys)}
        synsets = sorted({wn.synset_of[k] for k in self.keys}) if self.subset else sorted(wn.synsets)
        y = {s: i for i, s in enumerate(synsets)}
        self.synset = np.array([y[wn.synset_of[k]] for k in self.keys])  # (S,) synset of each key
        edges = [(y[s], y[h]) for s in synsets for h in wn.synsets[s].hypernyms if h in y]
        self.hyper = np.array(edges, dtype=np.int64).reshape(-1, 2)  # (E, 2) child, parent
        self.lexfile = np.array([wn.synsets[s].lexfile for s in synsets])  # (Y,)
        self.n_synsets = len(synsets)


def _group_mean(values: np.ndarray, groups: np.ndarray, n: int, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean of the rows with weight 1 per group: ((n, D) float32 means, (n,) counts), summed in float64 a block of
    rows at a time (all of WordNet's senses at once would be a gigabyte of float64)."""
    take = np.flatnonzero(weights > 0)  # (R,) rows that count
    sums = np.zeros((n, values.shape[1]), dtype=np.float64)  # (n, D)
    for s in range(0, len(take), MIX_ROWS):
        rows = take[s:s + MIX_ROWS]
        np.add.at(sums, groups[rows], values[rows].astype(np.float64))
    counts = np.bincount(groups[take], minlength=n)
    sums /= np.maximum(counts, 1)[:, None]
    return sums.astype(np.float32), counts  # (rows of count 0 stay 0)


def propagate(graph: Graph, keys: Sequence[str], centroids: np.ndarray,
              example_only: Sequence[str] = ()) -> tuple[np.ndarray, np.ndarray]:
    """Centroids (K, D) of the annotated ``keys`` -> a vector for every WordNet sense (S, D) and its step (S,) int8;
    ``example_only``: those of ``keys`` whose centroid comes from WordNet's examples alone (step 4)."""
    S, D = len(graph.keys), centroids.shape[1]
    vec = np.zeros((S, D), dtype=np.float32)  # (S, D)
    step = np.full(S, -1, dtype=np.int8)
    rows = [(graph.index[k], i) for i, k in enumerate(keys) if k in graph.index]
    if rows:
        s_idx, c_idx = map(np.array, zip(*rows))
        vec[s_idx] = centroids[c_idx]
        step[s_idx] = 0
    annotated = step == 0  # (S,) a centroid of its own, from SemCor or WordNet's examples
    step[[graph.index[k] for k in example_only if k in graph.index]] = STEPS.index("examples")
    syn_vec, syn_n = _group_mean(vec, graph.synset, graph.n_synsets, annotated.astype(np.int8))  # (Y, D)
    take = (step < 0) & (syn_n[graph.synset] > 0)
    vec[take], step[take] = syn_vec[graph.synset[take]], 1
    have = syn_n > 0  # (Y,) synsets with a vector
    if len(graph.hyper):
        child, parent = graph.hyper[:, 0], graph.hyper[:, 1]
        hyp_vec, hyp_n = _group_mean(syn_vec[parent], child, graph.n_synsets, have[parent].astype(np.int8))
        take = (step < 0) & (hyp_n[graph.synset] > 0)
        vec[take], step[take] = hyp_vec[graph.synset[take]], 2
    lex_vec, lex_n = _group_mean(syn_vec, graph.lexfile, int(graph.lexfile.max()) + 1, have.astype(np.int8))
    lex_of_key = graph.lexfile[graph.synset]
    take = (step < 0) & (lex_n[lex_of_key] > 0)
    vec[take], step[take] = lex_vec[lex_of_key[take]], 3
    return vec, step


def context_centroids(sums, examples, mode: str, weights: Sequence[float]) -> tuple[list[str], np.ndarray, list[str]]:
    """The annotated senses' keys, centroids (K, D) for the layer mix ``weights`` and the keys whose centroid
    comes from WordNet's examples alone: SemCor's ``sums`` with the ``examples`` sums (``knn.SenseSums``) used as
    ``mode`` says (``EXAMPLE_MODES``: "unseen" adds the senses SemCor never tags, "all" adds every example to its
    sense's instances)."""
    if mode == "none" or examples is None:
        return sums.keys, sums.centroids(weights), []
    if mode not in EXAMPLE_MODES:
        raise ValueError(f"examples mode {mode!r}: expected one of {', '.join(EXAMPLE_MODES)}")
    new = [k for k in examples.keys if k not in sums.index]
    keys = sorted(sums.keys + new)
    at = {k: i for i, k in enumerate(keys)}
    total = np.zeros((len(keys), sums.sums.shape[2]), dtype=np.float64)  # (K, D)
    count = np.zeros(len(keys), dtype=np.int64)
    own = [at[k] for k in sums.keys]
    total[own], count[own] = sums.mixed_sums(weights), sums.counts
    take = [i for i, k in enumerate(examples.keys) if mode == "all" or k not in sums.index]
    rows = [at[examples.keys[i]] for i in take]
    total[rows] += examples.mixed_sums(weights)[take]
    count[rows] += examples.counts[take]
    return keys, (total / count[:, None]).astype(np.float32), new


# ---------------------------------------------------------------- glosses

def wordnet_fingerprint(wn: WordNet) -> str:
    """sha256 of the WordNet files the sense vectors read."""
    h = hashlib.sha256()
    for name in ("index.sense", "data.noun", "data.verb", "data.adj", "data.adv"):
        h.update((wn.folder / name).read_bytes())
    return h.hexdigest()


def subset_key(graph: Graph) -> dict[str, str]:
    """What keys a cache of a subset graph's senses apart (nothing for all of WordNet: its caches keep their key)."""
    return {"senses": hashlib.sha256("\n".join(graph.keys).encode()).hexdigest()} if graph.subset else {}


def gloss_layers(graph: Graph, source, fingerprint: str, cache_dir: Path | None,
                 progress: bool | None = None, text: str = "definition", ranks=None) -> dict[str, np.ndarray] | None:
    """Every sense's augmented gloss (``WordNet.gloss_sentence``'s ``text``) embedded by ``source`` and pooled per
    layer: {pooling: (S, L, D) float16} (``POOLINGS``: ``sentence`` the mean over its tokens, ``lemma`` over the
    leading lemma's), by ``pooled_layers`` (``ranks``: shared by the torchrun ranks)."""
    def sentences() -> list[list[str]]:
        return [graph.wn.gloss_sentence(k, text) for k in graph.keys]

    n_lemma = [len(graph.wn.lemma_of(k).split()) for k in graph.keys]
    return pooled_layers(sentences, lambda i, a: {"sentence": a.mean(axis=1), "lemma": a[:, :n_lemma[i]].mean(axis=1)},
                         POOLINGS, len(graph.keys), source, fingerprint, cache_dir, progress, "glosses", ranks)


def mixed_gloss(graph: Graph, source, fingerprint: str, cache_dir: Path | None, progress: bool | None, text: str,
                pooling: str, weights: Sequence[float], ranks=None) -> np.ndarray | None:
    """Every sense's gloss ``text`` embedded by ``source``, pooled by ``pooling`` and mixed with the layer
    ``weights``: (S, D) float32, each pooled layer rounded to float16 first, as ``gloss_layers``' arrays hold it
    (``mix`` of those gives the same vectors). One (S, D) array instead of every layer of every pooling: what a
    sense file keeps once the choices are made. Cached like them (``fingerprint`` must name the choice)."""
    def sentences() -> list[list[str]]:
        return [graph.wn.gloss_sentence(k, text) for k in graph.keys]

    n_lemma = [len(graph.wn.lemma_of(k).split()) for k in graph.keys]
    w = np.asarray(weights, dtype=np.float32)  # (L,)

    def pool(i: int, a: np.ndarray) -> dict[str, np.ndarray]:
        layers = a.mean(axis=1) if pooling == "sentence" else a[:, :n_lemma[i]].mean(axis=1)  # (L, D)
        return {"mixed": np.einsum("ld,l->d", layers.astype(np.float16), w, dtype=np.float32)[None]}  # (1, D)

    out = pooled_layers(sentences, pool, ("mixed",), len(graph.keys), source, fingerprint, cache_dir, progress,
                        "glosses", ranks, dtype=np.float32)
    return None if out is None else np.array(out["mixed"][:, 0])  # (S, D) float32, read from the cache


def pooled_layers(sentences, pool, poolings: tuple[str, ...], n: int, source, fingerprint: str,
                  cache_dir: Path | None, progress: bool | None, what: str, ranks=None,
                  dtype=np.float16) -> dict[str, np.ndarray] | None:
    """``n`` sentences (``sentences()`` makes them) embedded by ``source`` and pooled per layer:
    {pooling: (n, L, D) ``dtype``}, ``pool(i, (L, n_i, D)) -> {pooling: (L, D)}``. Computed in chunks
    (``source.word_layers``); with ``cache_dir``, written to ``cache_dir/glosses/`` as they come
    (``elmo_tasks.wsd.gloss_cache``: memory-mapped, resumed at the next chunk after a stop) and keyed by
    ``fingerprint`` (the source's and WordNet's). ``ranks`` (torchrun): the chunks are shared by the ranks
    (``elmo_tasks.wsd.ranks``) and rank 0 alone gets the arrays and keeps the cache (None on the others)."""
    main = ranks is None or ranks.is_main
    store = (GlossStore(cache_dir, fingerprint, poolings, n, GLOSS_CHUNK, dtype) if cache_dir is not None and main
             else None)
    with store.lock.acquire(wait=True, on_wait=wait_note) if store is not None else contextlib.nullcontext():
        state = from_main(ranks, lambda: store.progress() if store is not None else {"chunks": 0, "complete": False})
        if state["complete"]:
            return store.open() if main else None
        return _embed_pooled(sentences(), pool, poolings, source, store, state["chunks"], progress, what, ranks,
                             dtype)


def _embed_pooled(sentences: list[list[str]], pool, poolings: tuple[str, ...], source, store, done: int,
                  progress: bool | None, what: str, ranks=None, dtype=np.float16) -> dict[str, np.ndarray] | None:
    """``pooled_layers``' computation, from chunk ``done`` on (the earlier ones are in ``store``'s arrays); with
    ``ranks``, in rounds of one chunk per rank, gathered on rank 0."""
    order = np.argsort([len(s) for s in sentences], kind="stable")  # similar lengths batch well
    main, R = ranks is None or ranks.is_main, 1 if ranks is None else ranks.world_size
    out: dict[str, np.ndarray] = store.open(writable=True) if done and store is not None else {}
    starts = range(0, len(order), GLOSS_CHUNK)
    if done and main:
        print(f"{what}: resuming at {min(done * GLOSS_CHUNK, len(order)):,} of {len(order):,} (cached in "
              f"{store.folder})", file=sys.stderr, flush=True)
    t0, first = time.perf_counter(), min(done * GLOSS_CHUNK, len(order))

    def chunk(c: int):
        """Chunk ``c``'s sentence rows and their pooled layers {pooling: (n, L, D) float16}; None past the end."""
        if c >= len(starts):
            return None
        idx = order[starts[c]:starts[c] + GLOSS_CHUNK]
        pooled: dict[str, np.ndarray] = {}
        for s in range(0, len(idx), POOL_AT):  # (per-word arrays of POOL_AT sentences at a time, pooled at once)
            part = idx[s:s + POOL_AT]
            for j, (i, a) in enumerate(zip(part, source.word_layers([sentences[i] for i in part], what)), s):
                a = a[None] if a.ndim == 2 else a  # (L, n, D)
                for name, value in pool(i, a).items():
                    pooled.setdefault(name, np.zeros((len(idx),) + value.shape, dtype))[j] = value
        return idx, pooled

    for c in range(done, len(starts), R):  # a round: chunk c + r by rank r
        parts = round_parts(ranks, lambda: chunk(c + (ranks.rank if ranks is not None else 0)), what)
        if not main:
            continue
        for idx, pooled in (p for p in parts if p is not None):
            if not out:
                L, Dim = next(iter(pooled.values())).shape[1:]
                out = (store.create(L, Dim) if store is not None else
                       {p: np.zeros((len(sentences), L, Dim), dtype=dtype) for p in poolings})
            for name, values in pooled.items():
                out[name][idx] = values
        end = min(c + R, len(starts))
        del parts
        release_freed_memory()  # (the chunk's per-sentence arrays: their freed pages out of the resident set)
        if store is not None:
            store.mark(out, end)
        if progress is not False and (c // R % 10 == 0 or end == len(starts)):
            last = min(starts[end - 1] + GLOSS_CHUNK, len(order))
            print(f"{what}: {last:,} of {len(order):,} embedded "
                  f"{eta(time.perf_counter() - t0, last - first, len(order) - first)}", file=sys.stderr, flush=True)
    if not main:
        return None
    if store is None:
        return out
    store.mark(out, len(starts), complete=True)
    del out
    return store.open()


def eta(seconds: float, done: int, total: int) -> str:
    """"(12s, about 3 min left)": the time so far and, at the rate so far, the time left for ``total`` items."""
    if done <= 0 or done >= total:
        return f"({seconds:.0f}s)"
    left = seconds * (total - done) / done
    return f"({seconds:.0f}s, about {left / 60:.0f} min left)" if left >= 90 else f"({seconds:.0f}s, about {left:.0f}s left)"


MIX_ROWS = 16384  # senses mixed at a time (a float32 copy of all layers of every sense would be gigabytes)


def mix(layers: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """(S, L, D) -> (S, D) float32: sum_l weights[l] * layers[:, l], ``MIX_ROWS`` senses at a time."""
    w = np.asarray(weights, dtype=np.float32)  # (L,)
    out = np.empty((layers.shape[0], layers.shape[2]), dtype=np.float32)  # (S, D)
    for s in range(0, layers.shape[0], MIX_ROWS):
        out[s:s + MIX_ROWS] = np.einsum("sld,l->sd", _rows(layers, s, s + MIX_ROWS), w, dtype=np.float32)
    return out


def _rows(layers: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Rows start:stop of (S, L, D); a memory-mapped array's are read from its file, so that its pages do not stay
    in the resident set (every gloss array mixed would otherwise count in full)."""
    if not (isinstance(layers, np.memmap) and isinstance(layers.base, mmap.mmap) and layers.flags.c_contiguous):
        return layers[start:stop]
    row = int(np.prod(layers.shape[1:]))  # values per sense
    stop = min(stop, layers.shape[0])
    with open(layers.filename, "rb") as f:
        f.seek(layers.offset + start * row * layers.itemsize)
        return np.fromfile(f, dtype=layers.dtype, count=(stop - start) * row).reshape((-1,) + layers.shape[1:])


# ---------------------------------------------------------------- scoring

@dataclass
class Candidates:
    """Per target: its candidate sense rows, their context and gloss cosines, and its part of speech."""

    rows: list[np.ndarray]
    ctx: list[np.ndarray]
    gloss: list[np.ndarray | None]
    pos: list[str]
    ranks: list[np.ndarray]  # each candidate's WordNet sense number among the target's candidates (1 = first)


def candidate_cosines(targets: Sequence[WsdTarget], vectors: np.ndarray, graph: Graph, context: np.ndarray,
                      step: np.ndarray, gloss: np.ndarray | None, gloss_rows: np.ndarray | None = None) -> Candidates:
    """Cosines of each target vector (N, D) with its candidates' context (S, D) and gloss (S, D) vectors; a
    candidate without a vector (step -1) is left out. Only the candidates' rows are read (of all WordNet's senses,
    the held-out choices score a tenth, 52 times). ``gloss_rows`` (G,): the graph rows of ``gloss``'s (G, D) rows,
    when it holds only those (every candidate's among them)."""
    kept_all = [[(r + 1, graph.index[k]) for r, k in enumerate(t.candidates)
                 if k in graph.index and step[graph.index[k]] >= 0] for t in targets]
    used = np.unique(np.array([i for kept in kept_all for _, i in kept], dtype=np.int64))  # (U,) rows read
    at = np.full(len(graph.keys), -1, dtype=np.int64)
    at[used] = np.arange(len(used))
    C, V = _unit(context[used].astype(np.float64)), _unit(np.asarray(vectors, dtype=np.float64))  # (U, D), (N, D)
    if gloss is not None and gloss_rows is not None:
        in_gloss = np.full(len(graph.keys), -1, dtype=np.int64)  # (S,) row in ``gloss``, -1: none
        in_gloss[gloss_rows] = np.arange(len(gloss_rows))
        if (in_gloss[used] < 0).any():
            raise ValueError("candidate_cosines: a candidate's gloss is not among gloss_rows")
        gloss, used_g = gloss, in_gloss[used]
    else:
        used_g = used
    G = _unit(gloss[used_g].astype(np.float64)) if gloss is not None else None  # (U, D)
    out = Candidates([], [], [], [], [])
    for n, (t, kept) in enumerate(zip(targets, kept_all)):
        rows = np.array([i for _, i in kept], dtype=np.int64)
        out.ranks.append(np.array([r for r, _ in kept], dtype=np.float64))
        out.rows.append(rows)
        out.ctx.append(C[at[rows]] @ V[n])
        out.gloss.append(G[at[rows]] @ V[n] if G is not None else None)
        out.pos.append(t.pos)
    return out


def answer(targets: Sequence[WsdTarget], cands: Candidates, graph: Graph, w: dict[str, float],
           prior: float = 0.0) -> tuple[dict, int]:
    """id -> the best candidate by ``ctx + w[pos] * gloss + prior / sense_number`` (ties: the lower WordNet sense
    number), and how many targets had no candidate vector (then the WordNet first sense, the paper's back-off)."""
    answers, backoff = {}, 0
    for t, rows, c, g, pos, rank in zip(targets, cands.rows, cands.ctx, cands.gloss, cands.pos, cands.ranks):
        if not len(rows) or not np.any(c):
            answers[t.id] = t.first_sense
            backoff += 1
            continue
        score = c + (w.get(pos, 0.0) * g if g is not None else 0.0) + (prior / rank if prior else 0.0)
        answers[t.id] = graph.keys[rows[int(np.argmax(score))]]
    return answers, backoff


def accuracy(targets: Sequence[WsdTarget], answers: dict) -> float:
    """Share of targets whose answer is among their gold keys."""
    return float(np.mean([answers.get(t.id) in t.gold for t in targets])) if targets else 0.0

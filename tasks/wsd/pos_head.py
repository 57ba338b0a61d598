"""The part-of-speech head of a sense file: which part of speech an unmarked word of ``wsd tag`` has, from its
context ("we bank on it": a verb), instead of the part of speech SemCor tags most often for the word.

A linear softmax classifier over the universal tags SemCor's XML gives every token (NOUN, VERB, ADJ, ADV, DET, ADP,
PRON, ., ...), trained on SemCor's own annotation with the feature source's token vectors: the mean of all its
layers, L2-normalised (``token_vectors``; the sense file's own layer mix, chosen for senses, is MiniLM's top layer,
where a linear head is 5 points less accurate: results/wsd_senses/pos_head). It is trained on the sentences of the training
documents (at most ``TRAIN_SENTENCES``, evenly spaced) and measured on those of the held-out documents (every
``every``-th document, as the sense-vector settings hold out; at most ``HELD_SENTENCES``). Training is seeded and
runs on the CPU in seconds. The sense file keeps it in its ``pos_head`` group (the state_dict's arrays, the label
list and the config as JSON attributes, a checksum): read back without pickles.
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
import time
from typing import Sequence

import h5py
import numpy as np
import torch
from torch import nn

from elmo_features.util.errors import StaleCacheError

from elmo_tasks.wsd.data.reader import Sentence
from elmo_tasks.wsd.knn import _unit
from elmo_tasks.wsd.sense_method import held_out_sentences
from elmo_tasks.wsd.vectors import CHUNK, all_layers

GROUP = "pos_head"  # the sense file's group
TAGS = ("NOUN", "VERB", "ADJ", "ADV", "PRON", "DET", "ADP", "NUM", "CONJ", "PRT", ".", "X")  # the universal tags, in
# this order when present (a tag outside them is added after, sorted)
TRAIN_SENTENCES = 3000  # SemCor sentences of the training documents the head is trained on (evenly spaced)
HELD_SENTENCES = 1000  # sentences of the held-out documents its accuracy is measured on (evenly spaced)
SEED, MAX_ITER, L2 = 0, 100, 1e-4  # L-BFGS on the whole training set: its iterations, the weights' L2 penalty
FIX = "make the sense file again with `elmo-tasks wsd senses --source SOURCE --out FILE`"


class PosHead(nn.Module):
    """A linear softmax over ``labels`` (or one hidden ReLU layer of ``hidden`` units first) on (N, dim) vectors,
    standardised first (``shift``, ``scale``: the training vectors' mean and standard deviation per dimension)."""

    def __init__(self, dim: int, labels: Sequence[str], hidden: int = 0, layers: Sequence[float] = (1.0,)):
        super().__init__()
        self.labels, self.layers = list(labels), [float(w) for w in layers]  # layers: the mix of its input vectors
        self.config = {"dim": int(dim), "hidden": int(hidden), "labels": self.labels, "layers": self.layers}
        self.register_buffer("shift", torch.zeros(dim))  # (dim,)
        self.register_buffer("scale", torch.ones(dim))  # (dim,)
        self.net = (nn.Linear(dim, len(labels)) if not hidden else
                    nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, len(labels))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, dim) -> (N, T) logits."""
        return self.net((x - self.shift) / self.scale)

    @torch.no_grad()
    def probabilities(self, vectors: np.ndarray) -> list[dict[str, float]]:
        """Per token vector (n, dim) (``token_vectors`` with the head's ``layers``): {tag: probability}."""
        p = torch.softmax(self(torch.as_tensor(np.asarray(vectors, dtype=np.float32))), dim=-1).numpy()  # (n, T)
        return [dict(zip(self.labels, map(float, row))) for row in p]


def token_vectors(layers: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """A sentence's per-word arrays (L, n, D) -> (n, D) float64: the layers mixed by ``weights``, L2-normalised (the
    vectors ``wsd tag`` compares with the sense vectors, and with the head's own weights, those the head reads)."""
    return _unit(np.einsum("lnd,l->nd", layers.astype(np.float64), np.asarray(weights, dtype=np.float64)))


def _labels(tags: Sequence[str]) -> list[str]:
    seen = set(tags)
    return [t for t in TAGS if t in seen] + sorted(seen - set(TAGS))


def _spaced(rows: list[int], n: int) -> list[int]:
    """At most ``n`` of ``rows``, evenly spaced (all of them when fewer)."""
    if len(rows) <= n:
        return rows
    return [rows[i] for i in np.linspace(0, len(rows) - 1, n).round().astype(int)]


def _embed(source, sentences: Sequence[Sentence], weights: Sequence[float] | None, what: str,
           progress: bool | None) -> tuple[np.ndarray, list[str]]:
    """(N, D) float32 token vectors (``weights`` None: the mean of all layers) of every token of ``sentences`` and
    their tags, ``CHUNK`` sentences at a time."""
    vecs, tags = [], []
    for c in range(0, len(sentences), CHUNK):
        part = sentences[c:c + CHUNK]
        for s, arr in zip(part, all_layers(source, [s.tokens for s in part], what), strict=True):
            w = weights if weights is not None else np.full(arr.shape[0], 1.0 / arr.shape[0])  # (L,)
            vecs.append(token_vectors(arr, w).astype(np.float32))  # (n, D)
            tags.extend(s.pos)
        if progress is not False:
            print(f"POS head: {min(c + CHUNK, len(sentences)):,} of {len(sentences):,} {what} sentences embedded",
                  file=sys.stderr, flush=True)
    return (np.concatenate(vecs) if vecs else np.zeros((0, 0), np.float32)), tags


def train_pos_head(source, sentences: Sequence[Sentence], every: int, progress: bool | None = None, hidden: int = 0,
                   train_sentences: int = TRAIN_SENTENCES,
                   held_sentences: int = HELD_SENTENCES) -> tuple[PosHead, dict] | None:
    """The head on the mean of the source's layers, trained on the sentences of all documents but every ``every``-th (``held_out_sentences``), with
    its accuracy on (up to ``held_sentences`` of) those; and the record the sense file's meta keeps. None when no
    sentence has a part of speech per token."""
    t0 = time.perf_counter()
    usable = [i for i, s in enumerate(sentences) if s.tokens and len(s.pos) == len(s.tokens) and all(s.pos)]
    if not usable:
        return None
    held = held_out_sentences([sentences[i] for i in usable], every, "documents")
    fit = _spaced([i for i, h in zip(usable, held) if not h], train_sentences)
    test = _spaced([i for i, h in zip(usable, held) if h], held_sentences)
    L = all_layers(source, [["the"]], "check")[0].shape[0]
    weights = [1.0 / L] * L
    x, tags = _embed(source, [sentences[i] for i in fit], weights, "training", progress)
    labels = _labels(tags)
    head = fit_head(x, np.array([labels.index(t) for t in tags]), labels, hidden, weights)
    record = {"accuracy": None, "labels": labels, "config": head.config, "seed": SEED, "l2": L2,
              "train": {"sentences": len(fit), "of": len(held) - sum(held), "tokens": len(tags)},
              "held_out": {"every": every, "by": "documents", "documents": _documents(sentences, test),
                           "sentences": len(test), "of": sum(held), "tokens": 0}}
    if test:
        hx, htags = _embed(source, [sentences[i] for i in test], weights, "held-out", progress)
        probs = head.probabilities(hx)
        right = [max(p, key=p.get) == t for p, t in zip(probs, htags)]
        record["accuracy"] = round(float(np.mean(right)), 4)
        record["held_out"]["tokens"] = len(htags)
    record["seconds"] = round(time.perf_counter() - t0, 1)
    return head, record


def _documents(sentences: Sequence[Sentence], rows: list[int]) -> int:
    return len({sentences[i].id.split(".", 1)[0] for i in rows})


def fit_head(x: np.ndarray, y: np.ndarray, labels: Sequence[str], hidden: int = 0,
             layers: Sequence[float] = (1.0,)) -> PosHead:
    """A ``PosHead`` fitted to vectors (N, D) and label indices (N,): cross-entropy + ``L2`` x the squared weights,
    minimised by L-BFGS over the whole set (at most ``MAX_ITER`` iterations) from seeded initial weights: the same
    weights on every run on one machine; ``layers``: the mix ``x`` was made with."""
    torch.manual_seed(SEED)  # (the layers' initial weights)
    head = PosHead(x.shape[1], labels, hidden, layers)
    X, Y = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)), torch.from_numpy(y.astype(np.int64))
    head.shift.copy_(X.mean(dim=0))
    head.scale.copy_(X.std(dim=0).clamp_min(1e-6))
    weights = [p for name, p in head.net.named_parameters() if name.endswith("weight")]
    opt = torch.optim.LBFGS(head.net.parameters(), max_iter=MAX_ITER, history_size=20, line_search_fn="strong_wolfe")

    def loss() -> torch.Tensor:
        opt.zero_grad()
        value = nn.functional.cross_entropy(head(X), Y) + L2 * sum((w ** 2).sum() for w in weights)  # (N, T) logits
        value.backward()
        return value

    opt.step(loss)
    return head.eval()


def _digest(state: dict[str, np.ndarray], config: dict, bound: str | None = None) -> str:
    """sha256 of a head's arrays and config; ``bound``: the sense digest of the file it is written into (a head
    copied into another sense file no longer matches)."""
    h = hashlib.sha256(json.dumps(config, sort_keys=True).encode("utf-8"))
    if bound is not None:
        h.update(f"|file|{bound}|".encode())
    for name in sorted(state):
        a = np.ascontiguousarray(state[name])
        h.update(f"|{name}|{a.dtype.str}|{a.shape}|".encode() + a.tobytes())
    return h.hexdigest()


def write_pos_head(f: h5py.File, head: PosHead, sense_sha: str) -> str:
    """Store ``head`` in the open sense file ``f``: its state_dict's arrays, the config (with the labels) as JSON,
    and their checksum bound to the file's sense digest ``sense_sha`` (returned: the meta records it too)."""
    g = f.create_group(GROUP)
    state = {k: v.detach().numpy() for k, v in head.state_dict().items()}
    for name, a in state.items():
        g.create_dataset(name, data=a)
    g.attrs["config"] = json.dumps(head.config)
    g.attrs["sha256"] = digest = _digest(state, head.config, sense_sha)
    return digest


def _written_by(meta: dict) -> str:
    """The version and commit a sense file's meta records ("version 0.1.0, commit 2dac200"), or what it lacks."""
    said = [f"version {meta['version']}" if meta.get("version") else "",
            f"commit {str(meta['git_commit']).removesuffix('-dirty')}" if meta.get("git_commit") else ""]
    return ", ".join(s for s in said if s) or "it records no version"


def _remake(path, meta: dict) -> str:
    """How to make the sense file at ``path`` again: the command its meta records, run from the folder it ran in, its
    --out pointed at ``path`` (with --force: the file is there); else ``FIX``."""
    try:
        words = shlex.split(str(meta.get("command") or ""))
    except ValueError:
        words = []
    if "--out" not in words[:-1] or words[:3] != ["elmo-tasks", "wsd", "senses"]:
        return FIX
    words[words.index("--out") + 1] = os.path.abspath(path)
    words += [] if "--force" in words else ["--force"]
    cwd = meta.get("cwd")
    return "make it again: " + (f"cd {shlex.quote(str(cwd))} && " if cwd and cwd != os.getcwd() else "") + shlex.join(words)


def read_pos_head(path, dim: int, n_layers: int, meta: dict | None = None) -> PosHead | None:
    """The head stored in the sense file at ``path`` (None: a file without one), for a source of ``n_layers`` layers of
    vectors of ``dim``; arrays read by h5py into the state_dict (no pickle); an edited or misshapen head is one
    StaleCacheError naming the file, a head of an older version's format (its config without ``layers``) one saying
    so, with the version, commit and command that ``meta`` (the file's meta) records."""
    record = (meta or {}).get("pos_head")
    with h5py.File(path, "r") as f:
        g = f.get(GROUP)
        if g is None:
            if record:  # (the meta, checked by its own checksum, says the build wrote one)
                raise StaleCacheError(f"{path}: its meta records a part-of-speech head, but the file holds none "
                                      f"(removed or damaged); {_remake(path, meta)}")
            return None
        try:
            config = json.loads(g.attrs["config"])
            state = {name: g[name][()] for name in g}
            recorded = g.attrs["sha256"]
        except (KeyError, TypeError, ValueError, OSError) as e:
            raise StaleCacheError(f"{path}: its part-of-speech head is unreadable ({e}); " + FIX) from None
        sense_sha = f.attrs.get("sha256")
    bound = isinstance(record, dict) and "sha256" in record
    older = not bound or not isinstance(config, dict) or "layers" not in config  # (written before heads were bound
    # to their file: their checksum is their own; a head without layers is refused below as an older version's)
    if (recorded != _digest(state, config, str(sense_sha)) or bound and recorded != record["sha256"]) and \
            not (older and recorded == _digest(state, config)):
        raise StaleCacheError(f"{path}: its part-of-speech head does not match the checksum written with it (edited, "
                              f"damaged, or copied from another sense file); {_remake(path, meta or {})}")
    if config.get("dim") != dim:
        raise StaleCacheError(f"{path}: its part-of-speech head reads vectors of dimension {config.get('dim')}, its "
                              f"feature source gives {dim}; " + FIX)
    layers = config.get("layers")
    if "layers" not in config:  # (written before the head read a mix of the source's layers)
        raise StaleCacheError(f"{path}: written by an older version of elmo-tasks ({_written_by(meta or {})}), whose "
                              "part-of-speech head this version reads differently; "
                              f"{_remake(path, meta or {})}")
    if not isinstance(layers, list) or len(layers) != n_layers or not np.all(np.isfinite(layers)):
        raise StaleCacheError(f"{path}: its part-of-speech head mixes layers {layers!r}, not {n_layers} weights, one per "
                              "layer of its feature source; " + FIX)
    head = PosHead(dim, config["labels"], config.get("hidden", 0), layers)
    try:
        head.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in state.items()})
    except RuntimeError as e:
        raise StaleCacheError(f"{path}: its part-of-speech head does not fit its config "
                              f"({' '.join(str(e).split())[:160]}); " + FIX) from None
    return head.eval()

"""Held-out perplexity of a BiLanguageModel with the full softmax."""
from __future__ import annotations

import math
import os
import sys

import numpy as np
import torch

from elmo_features.training.data import make_batch, read_sentences, type_char_ids, type_targets
from elmo_features.formats.download import file_sha256
from elmo_features.util.paths import same_file


def read_heldout(cfg, warn: bool = True) -> list[list[str]]:
    """The held-out sample of a TrainConfig: its first ``eval_sentences``, whole (not cut at ``max_sentence_length``
    as training sentences are: every token is evaluated with all its context, and no cut adds a sentence boundary
    that is nearly free to predict); with ``warn``, one warning line when the held-out file is a training file (the
    curve then measures fit)."""
    what = warn and heldout_overlap(cfg.heldout_file, cfg.train_files)
    if what:
        print(f"warning: heldout_file {cfg.heldout_file} {what}: the held-out perplexity measures "
              "fit to the training data, not generalisation; give a separate held-out file", file=sys.stderr)
    sample = zip(range(cfg.eval_sentences), read_sentences([cfg.heldout_file]))
    return [s for _, s in sample]


def heldout_overlap(heldout: str, train_files: list[str]) -> str | None:
    """How the held-out file is a training file: the same file, or a byte copy of one (same size and sha256); or
    None."""
    if any(same_file(heldout, f) for f in train_files):
        return "is one of the train_files"
    try:
        size, digest = os.path.getsize(heldout), None
        for i, f in enumerate(train_files):
            if os.path.getsize(f) == size:  # only a file of the same size can be a copy
                digest = digest or file_sha256(heldout)
                if file_sha256(f) == digest:
                    return f"has the same content as train_files[{i}] ({f})"
    except OSError:  # (an unreadable file is reported where it is read)
        return None
    return None


def exp_or_inf(x: float) -> float:
    """``math.exp(x)``, inf where it would overflow (the perplexity of a diverged model)."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _log_probs(model, h: torch.Tensor, y: torch.Tensor, rows: int) -> torch.Tensor:
    """``model.full_log_probs`` over ``rows`` predictions at a time (a long held-out sentence would otherwise make
    one (N, V) logits matrix). h (N, P), y (N,) -> (N,)."""
    return torch.cat([model.full_log_probs(h[i:i + rows], y[i:i + rows]) for i in range(0, len(y), rows)])


@torch.no_grad()
def perplexity(model, sentences: list[list[str]], vocab: list[str], batch_tokens: int = 4000) -> dict:
    """Forward, backward and mean (of the two log-likelihoods) perplexity over ``sentences``.

    Every prediction counts, including </S> (forward) and <S> (backward); words outside the vocabulary
    are predicted as <UNK>, and their share is reported as ``unk_rate``. ``*_no_unk`` leave them out.
    """
    if not sentences:
        raise ValueError("perplexity: no sentences")
    was_training = model.training
    model.eval()
    index: dict[str, int] = {"<S>": 0, "</S>": 1}
    sents = [np.array([index.setdefault(w, len(index)) for w in s], dtype=np.int32) for s in sentences if s]
    types = list(index)
    chars = torch.from_numpy(type_char_ids(types))
    targets = torch.from_numpy(type_targets(types, vocab))
    order = np.argsort([len(s) for s in sents], kind="stable")
    tot = {"f": 0.0, "b": 0.0, "f_k": 0.0, "b_k": 0.0}
    n = n_known = 0
    start = 0
    while start < len(order):
        end = start
        while end < len(order) and (end - start + 1) * (len(sents[order[end]]) + 2) <= batch_tokens:
            end += 1
        end = max(end, start + 1)
        type_ids, lengths = make_batch(sents, order[start:end])
        tg = torch.where(type_ids >= 0, targets[type_ids.clamp(min=0)], 0)
        top = model.hidden_states(type_ids, lengths, chars)
        h_f, y_f, h_b, y_b = model.prediction_pairs(top, tg, lengths)
        lp_f, lp_b = _log_probs(model, h_f, y_f, batch_tokens), _log_probs(model, h_b, y_b, batch_tokens)
        known = y_f != 2  # the same target multiset in both directions
        tot["f"] += float(lp_f.sum()); tot["b"] += float(lp_b.sum())
        tot["f_k"] += float(lp_f[known].sum()); tot["b_k"] += float(lp_b[y_b != 2].sum())
        n += len(y_f); n_known += int(known.sum())
        start = end
    model.train(was_training)
    return {
        "forward": exp_or_inf(-tot["f"] / n), "backward": exp_or_inf(-tot["b"] / n),
        "mean": exp_or_inf(-(tot["f"] + tot["b"]) / (2 * n)),
        "forward_no_unk": exp_or_inf(-tot["f_k"] / max(1, n_known)),
        "backward_no_unk": exp_or_inf(-tot["b_k"] / max(1, n_known)),
        "predictions": n, "unk_rate": 1 - n_known / n,
    }

"""Probe: the sense-vector rows of ``elmo-tasks wsd`` with cosines of centred vectors.

Runs ``elmo-tasks wsd`` (the arguments after the script name, unchanged) with one difference: before every cosine,
the context space is centred on the mean of the SemCor sense centroids (test and held-out vectors and every
sense's context vector have it subtracted) and the gloss vectors on their own mean. Centring removes the common
direction that anisotropic encoders put in every vector, which can make cosine neighbours more telling. Every
choice is still made on the held-out SemCor sentences; compare its ``scores.json: senses.held_out`` with a plain
run's. Result: ``results/wsd_senses/minilm_centred/`` and the analysis there.

    python scripts/wsd_centring_probe.py wsd --train ... --test ... --config wsd_senses --features minilm ...
"""
from __future__ import annotations

import sys

import numpy as np

import elmo_tasks.wsd.sense_method as method
import elmo_tasks.wsd.senses as senses

_plain = senses.candidate_cosines


def centred_cosines(targets, vectors, graph, context, step, gloss):
    """``senses.candidate_cosines`` on centred vectors: context (S, D) and vectors (N, D) less the mean SemCor
    centroid, gloss (S, D) less the mean gloss."""
    mean = context[step == 0].astype(np.float64).mean(axis=0)  # (D,)
    ctx = context.astype(np.float64) - mean  # (S, D)
    ctx[step < 0] = 0.0
    vecs = np.asarray(vectors, dtype=np.float64) - mean  # (N, D)
    g = None if gloss is None else gloss.astype(np.float64) - gloss.astype(np.float64).mean(axis=0)  # (S, D)
    return _plain(targets, vecs, graph, ctx, step, g)


if __name__ == "__main__":
    senses.candidate_cosines = method.candidate_cosines = centred_cosines
    from elmo_tasks.cli import main

    sys.exit(main(sys.argv[1:]))

"""Context vectors from WordNet's own usage examples (``tasks/wsd/data/wn_examples.py``): each tagged example
sentence embedded by the feature source, its tagged word's vectors pooled per layer, summed per sense key.

They reach senses SemCor never tags with a real context of the word, where propagation can only lend the
synset's, the hypernyms' or the lexicographer file's vector. Whether they are used, and how
(``senses.EXAMPLE_MODES``), is chosen on the held-out SemCor sentences (``sense_method.plan_senses``).
"""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np

from elmo_tasks.features.base import FeatureContext, build_features, section_fingerprints
from elmo_tasks.wsd.data.wn_examples import tagged_examples
from elmo_tasks.wsd.knn import SenseSums
from elmo_tasks.wsd.senses import Graph, pooled_layers, subset_key, wordnet_fingerprint


def example_sums(section: dict, graph: Graph, context: FeatureContext, progress: bool | None,
                 ranks=None) -> SenseSums | None:
    """Per-layer sums (K, L, D) of WordNet's tagged examples by the source ``section``, per sense key; None when
    WordNet has no tagged example. The pooled vectors are cached in ``context.cache_dir`` like the glosses, keyed
    by the section, its models' fingerprints and WordNet's. ``ranks`` (torchrun): embedded by all of them, the sums
    on rank 0 (None on the others)."""
    examples = [e for e in tagged_examples(graph.wn, only=graph.index if graph.subset else None)
                if e.key in graph.index]  # (a subset graph: its senses' only)
    if not examples:
        return None
    source = build_features(section, replace(context, cache_dir=None, memo=context.memo.streaming()))
    fingerprint = json.dumps({"section": section, "models": section_fingerprints(section, context.memo),
                              "wordnet": wordnet_fingerprint(graph.wn), "what": "wordnet examples", "version": 1,
                              **subset_key(graph)},
                             sort_keys=True)
    spans = [(e.start, e.end) for e in examples]
    layers = pooled_layers(lambda: [list(e.tokens) for e in examples],
                           lambda i, a: {"target": a[:, spans[i][0]:spans[i][1]].mean(axis=1)},  # (L, D)
                           ("target",), len(examples), source, fingerprint, context.cache_dir, progress,
                           "wordnet examples", ranks)
    if layers is None:  # (a torchrun rank other than 0)
        return None
    return SenseSums.from_keys([[e.key] for e in examples], layers["target"],  # (E, L, D) float16 in
                               dtype=np.float32)  # (K, L, D): a sense has a few examples, float32 holds their sum

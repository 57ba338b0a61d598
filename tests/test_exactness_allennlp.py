"""Our biLM against AllenNLP 2.10.1's outputs (made by bench/make_exactness_fixture.py, on the CPU its metadata
names) on a clipping config with a 60-token sentence, where the recurrence carries rounding along the sentence:
``precision="reference"`` (AllenNLP's order of operations) within 3e-6 and the default within 1e-5 on any CPU.
A drift of 1e-5 in either fails."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from exactness_fixture import FIXTURE, load_model
from elmo_features import batch_to_ids
from elmo_features.model.precision import set_precision

BOUNDS = {"fp32": 1e-5, "reference": 3e-6}


@pytest.fixture(scope="module")
def expected():
    data = np.load(FIXTURE)
    return data["layers"], json.loads(str(data["sentences"])), json.loads(str(data["meta"]))


@pytest.mark.parametrize("precision", list(BOUNDS))
@pytest.mark.parametrize("threads", [1, 2])
def test_layers_match_allennlp(expected, tmp_path, precision, threads):
    layers, sentences, meta = expected
    bilm = load_model(tmp_path / "model")
    set_precision(bilm, precision)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            ours = bilm(batch_to_ids(sentences)).layers.numpy()  # (L, B, T, D)
    finally:
        torch.set_num_threads(before)
    assert ours.shape == layers.shape
    diff = np.abs(ours - layers).max(axis=(1, 2, 3))  # per layer
    assert diff.max() <= BOUNDS[precision], (precision, threads, diff.tolist(), meta["cpu_model"])
    if precision == "reference" and threads == 1 and meta["cpu_flags"] == _flags():
        assert diff.max() == 0.0  # on the fixture's own CPU kind: bit for bit


def _flags() -> str:
    from elmo_features.util.provenance import machine

    return machine()["cpu_flags"]

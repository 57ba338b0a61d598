"""A small clipping biLM and long sentences, built the same way on every machine (seeded), for the exactness
test against AllenNLP (tests/test_exactness_allennlp.py). Its AllenNLP 2.10.1 outputs are in
tests/data/allennlp_clip_long.npz, made by ``python bench/make_exactness_fixture.py``."""
from __future__ import annotations

from pathlib import Path

import torch

from elmo_features import BiLM, BiLMOptions, load_bilm, save_bilm

FIXTURE = Path(__file__).resolve().parent / "data" / "allennlp_clip_long.npz"
OPTIONS = {"lstm": {"use_skip_connections": True, "projection_dim": 64, "cell_clip": 3, "proj_clip": 3, "dim": 256,
                    "n_layers": 2},
           "char_cnn": {"activation": "relu", "filters": [[1, 32], [2, 32], [3, 64], [4, 64]], "n_highway": 1,
                        "embedding": {"dim": 16}, "n_characters": 262, "max_characters_per_token": 50}}
WORDS = ("the river bank was steep and the water ran fast past the old mill where children played , while "
         "traders at the bank in town counted coins and argued about rates ; nobody noticed the storm").split()


def sentences() -> list[list[str]]:
    """Two long sentences (60 and 38 tokens) and a short one, in one batch."""
    return [[WORDS[(7 * i) % len(WORDS)] for i in range(60)], [WORDS[(3 * i + 1) % len(WORDS)] for i in range(38)],
            WORDS[:5]]


def write_model(folder: Path) -> tuple[Path, Path]:
    """The seeded random biLM (LSTM gain 1.25: rounding is amplified by the recurrence, as in bench/presets.py)
    as options.json + weights.hdf5 in ``folder``; returns their paths."""
    gen = torch.Generator().manual_seed(2018)
    bilm = BiLM(BiLMOptions.from_dict(OPTIONS))
    with torch.no_grad():
        for name, p in bilm.named_parameters():
            if name.endswith("char_embedding.weight"):
                p.copy_(torch.rand(p.shape, generator=gen) * 2 - 1)
                p[0].zero_()
            elif p.dim() >= 2:
                a = (1.25 if name.startswith("lstm.") else 1.0) * (3.0 / p[0].numel()) ** 0.5
                p.copy_((torch.rand(p.shape, generator=gen) * 2 - 1) * a)
            else:
                p.copy_((torch.rand(p.shape, generator=gen) * 2 - 1) * 0.1)
    folder.mkdir(parents=True, exist_ok=True)
    save_bilm(bilm, folder / "options.json", folder / "weights.hdf5")
    return folder / "options.json", folder / "weights.hdf5"


def load_model(folder: Path) -> BiLM:
    """The fixture biLM as both implementations read it: from its files."""
    return load_bilm(*write_model(folder))

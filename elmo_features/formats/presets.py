"""The public pre-trained ELMo models (AllenNLP / bilm-tf releases): options and download URLs.

Each model lives at ``{BASE_URL}/{stem}/elmo_{stem}_options.json`` and ``..._weights.hdf5``.
All share the character CNN of the original ELMo (16-dim char embeddings, 2048 filters of
widths 1..7, ReLU, cell and projection clipping at 3, skip connections between LSTM layers).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from elmo_features.util.errors import UsageError
from elmo_features.util.wording import did_you_mean

BASE_URL = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo"

_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]  # 2048 filters


def _options(lstm_dim: int, projection_dim: int, n_highway: int) -> dict[str, Any]:
    return {
        "lstm": {"use_skip_connections": True, "projection_dim": projection_dim, "cell_clip": 3,
                 "proj_clip": 3, "dim": lstm_dim, "n_layers": 2},
        "char_cnn": {"activation": "relu", "filters": copy.deepcopy(_FILTERS), "n_highway": n_highway,
                     "embedding": {"dim": 16}, "n_characters": 262, "max_characters_per_token": 50},
    }


@dataclass(frozen=True)
class Preset:
    """A named public ELMo model: its options and where its files are."""

    name: str
    stem: str  # e.g. 2x4096_512_2048cnn_2xhighway
    lstm_dim: int
    projection_dim: int
    n_highway: int
    description: str

    @property
    def options(self) -> dict[str, Any]:
        """The model's options.json content (a fresh dict)."""
        return _options(self.lstm_dim, self.projection_dim, self.n_highway)

    @property
    def output_dim(self) -> int:
        return 2 * self.projection_dim

    @property
    def options_filename(self) -> str:
        return f"elmo_{self.stem}_options.json"

    @property
    def weights_filename(self) -> str:
        return f"elmo_{self.stem}_weights.hdf5"

    def options_url(self, base_url: str | None = None) -> str:
        return f"{(base_url or BASE_URL).rstrip('/')}/{self.stem}/{self.options_filename}"

    def weights_url(self, base_url: str | None = None) -> str:
        return f"{(base_url or BASE_URL).rstrip('/')}/{self.stem}/{self.weights_filename}"


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset("small", "2x1024_128_2048cnn_1xhighway", 1024, 128, 1,
               "13.6M parameters, 1B Word Benchmark, output dim 256"),
        Preset("medium", "2x2048_256_2048cnn_1xhighway", 2048, 256, 1,
               "28.0M parameters, 1B Word Benchmark, output dim 512"),
        Preset("original", "2x4096_512_2048cnn_2xhighway", 4096, 512, 2,
               "93.6M parameters, 1B Word Benchmark, output dim 1024 (the ELMo paper's model)"),
        Preset("original-5.5B", "2x4096_512_2048cnn_2xhighway_5.5B", 4096, 512, 2,
               "93.6M parameters, 5.5B tokens (Wikipedia + WMT news crawl), output dim 1024"),
    )
}


def get_preset(name: str) -> Preset:
    """The preset called ``name``; an unknown name is an error listing the valid ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise UsageError(f"unknown ELMo preset {name!r}{did_you_mean(name, PRESETS)}; valid presets: "
                         f"{', '.join(PRESETS)}") from None

"""ELMo options (the bilm-tf / AllenNLP ``options.json``), parsed and checked."""
from __future__ import annotations

from dataclasses import dataclass, field, asdict
from pathlib import Path
from typing import Any

from elmo_features.util.errors import ConfigError
from elmo_features.util.config_files import read_config_file
from elmo_features.util.schema import Bool, Int, List, Num, Obj, Record, Str, join_key, key


BACKBONES = ("lstm", "transformer")  # valid values of the options' "backbone" key ("lstm" when absent)
POSITIONS = ("sinusoidal",)  # valid values of transformer.positions


@dataclass(frozen=True)
class CharCNNOptions:
    """The ``char_cnn`` block (extra keys in the file are ignored)."""

    embedding_dim: int = key(Int(min=1), path="embedding.dim", doc="character embedding width")
    filters: tuple[tuple[int, int], ...] = key(List(List(Int(min=1), min_len=2, max_len=2), min_len=1),
                                               doc="[width, n_filters] of each convolution")
    n_highway: int = key(Int(min=0))
    # bilm-tf trains with 261 and AllenNLP always uses 262 (+1 padding row); the HDF5 char_embed has 261 rows
    # either way, so the runtime always uses 262
    n_characters: int = key(Int(min=1), 262)
    max_characters_per_token: int = key(Int(choices=(50,)), 50, doc="ELMo's character ids")
    activation: str = key(Str(choices=("relu", "tanh")), "relu")

    def __post_init__(self):
        object.__setattr__(self, "filters", tuple((int(w), int(n)) for w, n in self.filters))
        object.__setattr__(self, "n_characters", 262)

    def check(self, where: str) -> None:
        for i, (width, _) in enumerate(self.filters):
            if width > self.max_characters_per_token:  # the convolution runs over the token's character ids
                raise ConfigError(f"{where}.filters[{i}]: width {width} > max_characters_per_token "
                                  f"({self.max_characters_per_token})")

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters)


@dataclass(frozen=True)
class LstmOptions:
    """The ``lstm`` block (extra keys in the file are ignored); a clip of 0 or null means no clipping."""

    dim: int = key(Int(min=1), doc="LSTM cell size")
    projection_dim: int = key(Int(min=1))
    n_layers: int = key(Int(min=1))
    cell_clip: float | None = key(Num(min=0, nullable=True), None)
    proj_clip: float | None = key(Num(min=0, nullable=True), None)
    use_skip_connections: bool = key(Bool(), True)

    def __post_init__(self):
        for k in ("cell_clip", "proj_clip"):
            object.__setattr__(self, k, float(getattr(self, k)) if getattr(self, k) else None)


@dataclass(frozen=True)
class TokenVectorOptions:
    """The ``token_vectors`` extension: frozen word vectors concatenated to the char-CNN output."""

    dim: int = key(Int(min=1))
    n_words: int = key(Int(min=1))
    lowercase: bool = key(Bool(), True)
    source: str = key(Str(), "", doc="free text: where the vectors came from")


@dataclass(frozen=True)
class TransformerOptions:
    """The ``transformer`` block (extension, docs/weights_format.md): one causal stack per direction; ``check`` (run
    by the schema module) holds the rules across keys."""

    dim: int = key(Int(min=1), doc="model width P of each direction (token embedding width; outputs are 2P)")
    n_layers: int = key(Int(min=1))
    n_heads: int = key(Int(min=1))
    ff_dim: int = key(Int(min=1))
    max_positions: int = key(Int(min=3), 256, doc="attention window W in tokens, <S> and </S> included")
    chunk_overlap: int = key(Int(min=0), 128, doc="longer sentences: windows of W tokens overlapping by this many")
    positions: str = key(Str(choices=POSITIONS), "sinusoidal")

    def check(self, where: str, names: dict[str, str] | None = None) -> None:
        """The rules across keys, naming the keys after ``where`` as the options file does (``transformer.dim``), or
        by ``names`` (field -> key) for a config that gives them under other names (train-bilm's flat keys)."""
        name = (names or {}).get
        dim, heads, window, overlap = (name(k, k) for k in ("dim", "n_heads", "max_positions", "chunk_overlap"))
        if self.dim % self.n_heads:
            raise ConfigError(f"{join_key(where, dim)} ({self.dim}) must be a multiple of {heads} ({self.n_heads})")
        if self.chunk_overlap >= self.max_positions:
            raise ConfigError(f"{join_key(where, overlap)} must be in [0, {window}={self.max_positions}), "
                              f"got {self.chunk_overlap}")


# the blocks this runtime reads (other top-level keys are kept verbatim in BiLMOptions.extra)
OPTIONS_SCHEMA = Obj({
    "char_cnn": Record(CharCNNOptions, extra=True, numeric_strings=False, required=True),
    "lstm": Record(LstmOptions, extra=True, numeric_strings=False),  # required for the lstm backbone (checked below)
    "transformer": Record(TransformerOptions, numeric_strings=False),
    "token_vectors": Record(TokenVectorOptions, numeric_strings=False),
    "backbone": Str(choices=BACKBONES),
})


@dataclass(frozen=True)
class BiLMOptions:
    char_cnn: CharCNNOptions
    lstm: LstmOptions | None  # None when backbone == "transformer"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)  # keys kept verbatim (n_tokens_vocab, ...)
    token_vectors: TokenVectorOptions | None = None  # extension (docs/weights_format.md); None = official ELMo
    backbone: str = "lstm"  # extension: "lstm" (ELMo) or "transformer"
    transformer: TransformerOptions | None = None  # set when backbone == "transformer"

    @property
    def projection_dim(self) -> int:
        """Width P of the token embedding and of each direction's output."""
        return self.transformer.dim if self.backbone == "transformer" else self.lstm.projection_dim

    @property
    def n_layers(self) -> int:
        """Contextual layers per direction (LSTM or Transformer)."""
        return self.transformer.n_layers if self.backbone == "transformer" else self.lstm.n_layers

    @property
    def output_dim(self) -> int:
        """Width D of every output layer (2 * projection_dim)."""
        return 2 * self.projection_dim

    @property
    def num_output_layers(self) -> int:
        """L = n_layers + 1 (token layer + one per contextual layer)."""
        return self.n_layers + 1

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "options") -> "BiLMOptions":
        v = OPTIONS_SCHEMA.check(d, f"{source}:")  # every block checked; v holds the parsed blocks
        backbone = v.get("backbone", "lstm")
        if backbone == "transformer":
            if "lstm" in d:
                raise ConfigError(f"{source}: backbone is 'transformer' but there is an 'lstm' block; remove one")
            if "transformer" not in d:
                raise ConfigError(f"{source}: missing required key 'transformer' (the backbone is 'transformer')")
        else:
            if "transformer" in d:
                raise ConfigError(f"{source}: has a 'transformer' block but backbone is 'lstm'; "
                                  "add \"backbone\": \"transformer\" or remove the block")
            if "lstm" not in d:
                raise ConfigError(f"{source}: missing required key 'lstm'")
        extra = {k: x for k, x in d.items() if k not in OPTIONS_SCHEMA.fields}
        return cls(v["char_cnn"], v.get("lstm"), extra, v.get("token_vectors"), backbone, v.get("transformer"))

    @classmethod
    def from_file(cls, path: str | Path) -> "BiLMOptions":
        path = Path(path)
        d = read_config_file(path, kind="json")
        return cls.from_dict(d, source=str(path))

    def to_dict(self) -> dict[str, Any]:
        c, l = self.char_cnn, self.lstm
        d = dict(self.extra)
        d["char_cnn"] = {
            "activation": c.activation,
            "embedding": {"dim": c.embedding_dim},
            "filters": [list(f) for f in c.filters],
            "max_characters_per_token": c.max_characters_per_token,
            "n_characters": c.n_characters,
            "n_highway": c.n_highway,
        }
        if self.backbone == "transformer":  # an LSTM file keeps today's keys (no "backbone" key)
            d["backbone"] = "transformer"
            d["transformer"] = asdict(self.transformer)
        else:
            d["lstm"] = {
                "cell_clip": l.cell_clip if l.cell_clip is not None else 0,
                "dim": l.dim,
                "n_layers": l.n_layers,
                "proj_clip": l.proj_clip if l.proj_clip is not None else 0,
                "projection_dim": l.projection_dim,
                "use_skip_connections": l.use_skip_connections,
            }
        if self.token_vectors is not None:
            t = self.token_vectors
            d["token_vectors"] = {"dim": t.dim, "n_words": t.n_words, "lowercase": t.lowercase, "source": t.source}
        return d

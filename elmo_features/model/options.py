"""ELMo options (the bilm-tf / AllenNLP ``options.json``), parsed and checked."""
from __future__ import annotations

from dataclasses import dataclass, field, asdict
from pathlib import Path
from typing import Any

from elmo_features.util.errors import ElmoTasksError
from elmo_features.util.schema import Bool, Int, List, Num, Obj, SchemaError, Str, read_config_file, validate


class OptionsError(ElmoTasksError, ValueError):
    """An options file is missing a key or has an invalid value."""


# types and ranges of the keys this runtime reads (other keys are kept verbatim in BiLMOptions.extra)
OPTIONS_SCHEMA = Obj({
    "char_cnn": Obj({
        "embedding": Obj({"dim": Int(min=1, required=True)}, required=True),
        "filters": List(List(Int(min=1), min_len=2, max_len=2), min_len=1, required=True),  # [width, n_filters]
        "n_highway": Int(min=0, required=True),
        "n_characters": Int(min=1),
        "max_characters_per_token": Int(choices=(50,)),  # ELMo's character ids
        "activation": Str(choices=("relu", "tanh")),
    }, required=True),
    "lstm": Obj({
        "dim": Int(min=1, required=True),
        "projection_dim": Int(min=1, required=True),
        "n_layers": Int(min=1, required=True),
        "cell_clip": Num(min=0, nullable=True),  # 0 or null: no clipping
        "proj_clip": Num(min=0, nullable=True),
        "use_skip_connections": Bool(),
    }),  # required for the lstm backbone (checked below)
})


@dataclass(frozen=True)
class CharCNNOptions:
    embedding_dim: int
    filters: tuple[tuple[int, int], ...]  # (width, n_filters)
    n_highway: int
    n_characters: int = 262
    max_characters_per_token: int = 50
    activation: str = "relu"

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters)


@dataclass(frozen=True)
class LstmOptions:
    dim: int  # LSTM cell size
    projection_dim: int
    n_layers: int
    cell_clip: float | None = None
    proj_clip: float | None = None
    use_skip_connections: bool = True


@dataclass(frozen=True)
class TokenVectorOptions:
    """The ``token_vectors`` extension: frozen word vectors concatenated to the char-CNN output."""

    dim: int
    n_words: int
    lowercase: bool = True
    source: str = ""  # free text: where the vectors came from


BACKBONES = ("lstm", "transformer")  # valid values of the options' "backbone" key ("lstm" when absent)
POSITIONS = ("sinusoidal",)  # valid values of transformer.positions


@dataclass(frozen=True)
class TransformerOptions:
    """The ``transformer`` block (extension, docs/weights_format.md): one causal stack per direction."""

    dim: int  # model width P of each direction (token embedding width; outputs are 2P)
    n_layers: int
    n_heads: int
    ff_dim: int
    max_positions: int = 256  # attention window W in tokens, sentence boundaries included
    chunk_overlap: int = 128  # longer sentences: windows of W tokens overlapping by this many
    positions: str = "sinusoidal"


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
        try:
            validate(d, OPTIONS_SCHEMA, source)  # types and ranges first (also: d is an object)
        except SchemaError as e:
            raise OptionsError(str(e)) from None
        backbone = d.get("backbone", "lstm")
        if backbone not in BACKBONES:
            raise OptionsError(f"{source}: unknown backbone {backbone!r}; valid backbones: {', '.join(BACKBONES)}")
        if backbone == "transformer":
            if "lstm" in d:
                raise OptionsError(f"{source}: backbone is 'transformer' but there is an 'lstm' block; remove one")
        elif "transformer" in d:
            raise OptionsError(f"{source}: has a 'transformer' block but backbone is 'lstm'; "
                               "add \"backbone\": \"transformer\" or remove the block")
        try:
            cnn = d["char_cnn"]
            act = cnn.get("activation", "relu")
            if act not in ("relu", "tanh"):
                raise OptionsError(f"{source}: char_cnn.activation must be 'relu' or 'tanh', got {act!r}")
            if cnn.get("max_characters_per_token", 50) != 50:
                raise OptionsError(f"{source}: max_characters_per_token must be 50 (ELMo's character ids)")
            char = CharCNNOptions(
                embedding_dim=int(cnn["embedding"]["dim"]),
                filters=tuple((int(w), int(n)) for w, n in cnn["filters"]),
                n_highway=int(cnn["n_highway"]),
                # bilm-tf trains with 261 and AllenNLP always uses 262 (+1 padding row); the HDF5
                # char_embed has 261 rows either way, so the runtime always uses 262
                n_characters=262,
                max_characters_per_token=int(cnn.get("max_characters_per_token", 50)),
                activation=act,
            )
            lo = tr = None
            if backbone == "lstm":
                lstm = d["lstm"]
                lo = LstmOptions(
                    dim=int(lstm["dim"]),
                    projection_dim=int(lstm["projection_dim"]),
                    n_layers=int(lstm["n_layers"]),
                    cell_clip=float(lstm["cell_clip"]) if lstm.get("cell_clip") else None,
                    proj_clip=float(lstm["proj_clip"]) if lstm.get("proj_clip") else None,
                    use_skip_connections=bool(lstm.get("use_skip_connections", True)),
                )
            else:
                tr = _transformer_options(d["transformer"], source)
            tv = _token_vector_options(d.get("token_vectors"), source)
        except KeyError as e:
            raise OptionsError(f"{source}: missing required key {e}") from None
        extra = {k: v for k, v in d.items() if k not in ("char_cnn", "lstm", "token_vectors", "backbone", "transformer")}
        return cls(char, lo, extra, tv, backbone, tr)

    @classmethod
    def from_file(cls, path: str | Path) -> "BiLMOptions":
        path = Path(path)
        d = read_config_file(path, OptionsError, kind="json")
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


def _token_vector_options(d: Any, source: str) -> TokenVectorOptions | None:
    """Parse and check the optional ``token_vectors`` block."""
    if d is None:
        return None
    valid = ("dim", "n_words", "lowercase", "source")
    if not isinstance(d, dict):
        raise OptionsError(f"{source}: token_vectors must be an object with keys {', '.join(valid)}")
    unknown = sorted(set(d) - set(valid))
    if unknown:
        raise OptionsError(f"{source}: token_vectors has unknown key(s) {unknown}; valid keys: {', '.join(valid)}")
    for k in ("dim", "n_words"):
        if not isinstance(d.get(k), int) or isinstance(d.get(k), bool) or d[k] <= 0:
            raise OptionsError(f"{source}: token_vectors.{k} must be a positive integer, got {d.get(k)!r}")
    if not isinstance(d.get("lowercase", True), bool):
        raise OptionsError(f"{source}: token_vectors.lowercase must be true or false, got {d['lowercase']!r}")
    return TokenVectorOptions(d["dim"], d["n_words"], d.get("lowercase", True), str(d.get("source", "")))


def _transformer_options(d: Any, source: str) -> TransformerOptions:
    """Parse and check the ``transformer`` block."""
    required = ("dim", "n_layers", "n_heads", "ff_dim")
    valid = [f for f in TransformerOptions.__dataclass_fields__]
    if not isinstance(d, dict):
        raise OptionsError(f"{source}: transformer must be an object with keys {', '.join(valid)}")
    unknown = sorted(set(d) - set(valid))
    if unknown:
        raise OptionsError(f"{source}: transformer has unknown key(s) {unknown}; valid keys: {', '.join(valid)}")
    for k in required:
        if k not in d:
            raise OptionsError(f"{source}: transformer block is missing required key '{k}'")
    for k in ("dim", "n_layers", "n_heads", "ff_dim", "max_positions", "chunk_overlap"):
        v = d.get(k, 1)
        if not isinstance(v, int) or isinstance(v, bool) or v < (0 if k == "chunk_overlap" else 1):
            kind = "non-negative" if k == "chunk_overlap" else "positive"
            raise OptionsError(f"{source}: transformer.{k} must be a {kind} integer, got {v!r}")
    o = TransformerOptions(**d)
    if o.dim % o.n_heads:
        raise OptionsError(f"{source}: transformer.dim ({o.dim}) must be a multiple of n_heads ({o.n_heads})")
    if o.max_positions < 3:
        raise OptionsError(f"{source}: transformer.max_positions must be >= 3 (<S>, a word, </S>), got {o.max_positions}")
    if not 0 <= o.chunk_overlap < o.max_positions:
        raise OptionsError(f"{source}: transformer.chunk_overlap must be in [0, max_positions={o.max_positions}), "
                           f"got {o.chunk_overlap}")
    if o.positions not in POSITIONS:
        raise OptionsError(f"{source}: unknown transformer.positions {o.positions!r}; valid: {', '.join(POSITIONS)}")
    return o

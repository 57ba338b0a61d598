"""elmo_features: an exact, fast ELMo biLM runtime for frozen contextual features."""
from elmo_features.model.char_ids import batch_to_ids
from elmo_features.util.errors import ConfigError, ElmoTasksError
from elmo_features.model.options import BiLMOptions
from elmo_features.model.bilm import BiLM, BiLMOutput
from elmo_features.formats.weights import load_bilm, save_bilm, WeightFileError
from elmo_features.embedding.token_cache import TokenCache
from elmo_features.embedding.embedder import Embedder
from elmo_features.model.scalar_mix import ScalarMix
from elmo_features.embedding.feature_cache import FeatureCache, LazyFeatures, bilm_fingerprint
from elmo_features.formats.presets import PRESETS, get_preset
from elmo_features.formats.download import fetch_preset
from elmo_features.formats.default_model import DEFAULT_MODEL_DIR, load_default_bilm, resolve_bilm
from elmo_features.util.provenance import package_version

__version__ = package_version()  # the installed package's metadata (pyproject.toml's version)

__all__ = ["batch_to_ids", "ElmoTasksError", "ConfigError", "BiLMOptions", "BiLM", "BiLMOutput", "load_bilm", "save_bilm",
           "WeightFileError", "TokenCache", "Embedder", "ScalarMix", "FeatureCache", "LazyFeatures",
           "bilm_fingerprint", "PRESETS", "get_preset", "fetch_preset", "DEFAULT_MODEL_DIR", "load_default_bilm",
           "resolve_bilm"]

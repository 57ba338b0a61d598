"""elmo_features: an exact, fast ELMo biLM runtime for frozen contextual features."""
from .char_ids import batch_to_ids
from .errors import ElmoTasksError
from .options import BiLMOptions, OptionsError
from .bilm import BiLM, BiLMOutput
from .weights import load_bilm, save_bilm, WeightFileError
from .token_cache import TokenCache
from .embedder import Embedder
from .scalar_mix import ScalarMix
from .feature_cache import FeatureCache, LazyFeatures, bilm_fingerprint
from .presets import PRESETS, get_preset
from .download import fetch_preset
from .default_model import DEFAULT_MODEL_DIR, load_default_bilm, resolve_bilm

__all__ = ["batch_to_ids", "ElmoTasksError", "BiLMOptions", "OptionsError", "BiLM", "BiLMOutput", "load_bilm", "save_bilm",
           "WeightFileError", "TokenCache", "Embedder", "ScalarMix", "FeatureCache", "LazyFeatures",
           "bilm_fingerprint", "PRESETS", "get_preset", "fetch_preset", "DEFAULT_MODEL_DIR", "load_default_bilm",
           "resolve_bilm"]

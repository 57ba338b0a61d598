"""elmo_features: an exact, fast ELMo biLM runtime for frozen contextual features."""
from .char_ids import batch_to_ids
from .options import BiLMOptions, OptionsError
from .bilm import BiLM, BiLMOutput
from .weights import load_bilm, save_bilm, WeightFileError

__all__ = ["batch_to_ids", "BiLMOptions", "OptionsError", "BiLM", "BiLMOutput", "load_bilm", "save_bilm",
           "WeightFileError"]

"""Feature sources (ELMo layers/mix, Transformer encoder layers, static vectors, concatenations) and layer fusions; each registers itself in
elmo_tasks.registry.FEATURES / FUSIONS where it is defined, and importing this package imports them all."""
from elmo_tasks.features.base import FeatureContext, FeatureSource, build_features
from elmo_tasks.features import concat, elmo, fusion, mix, static, transformer  # noqa: F401  (each registers its components)

__all__ = ["FeatureContext", "FeatureSource", "build_features"]

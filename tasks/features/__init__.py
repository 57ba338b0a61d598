"""Feature sources (ELMo layers/mix, static vectors, concatenations); registered in tasks.registry.FEATURES."""
from .base import FeatureContext, FeatureSource, build_features

__all__ = ["FeatureContext", "FeatureSource", "build_features"]

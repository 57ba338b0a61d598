"""Task heads; each is registered by name in tasks.registry.HEADS (see docs/adding_a_head.md)."""
from .base import BiLSTMEncoder, Head

__all__ = ["Head", "BiLSTMEncoder"]

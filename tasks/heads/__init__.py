"""Task heads; each registers itself in tasks.registry.HEADS where it is defined, and importing this package
imports them all (see docs/adding_a_head.md)."""
from tasks.heads.base import BiLSTMEncoder, Head
from tasks.heads import chars, crf_tagger, sentence_classifier, token_tagger, wsd_linear  # noqa: F401  (register)

__all__ = ["Head", "BiLSTMEncoder"]

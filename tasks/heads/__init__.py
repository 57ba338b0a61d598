"""Task heads; each registers itself in elmo_tasks.registry.HEADS where it is defined, and importing this package
imports them all (see docs/adding_a_head.md)."""
from elmo_tasks.heads.base import BiLSTMEncoder, Head
from elmo_tasks.heads import chars, crf_tagger, sentence_classifier, token_tagger  # noqa: F401  (register)
from elmo_tasks.wsd import head as _wsd_head  # noqa: F401,E402  (registers wsd_linear; it lives with the rest of WSD)

__all__ = ["Head", "BiLSTMEncoder"]

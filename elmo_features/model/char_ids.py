"""ELMo character ids: the exact mapping of AllenNLP's ``ELMoCharacterMapper`` / ``batch_to_ids``.

Every token becomes 50 ids: begin-of-word, the token's UTF-8 bytes (cut to 48), end-of-word,
then padding. All ids are shifted by +1 so that an all-zero row marks a padding *token*.
The literal tokens ``<S>`` and ``</S>`` map to the sentence-boundary characters.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import torch

from elmo_features.util.arguments import check_sentences

MAX_WORD_LENGTH = 50
BEGINNING_OF_SENTENCE_CHARACTER = 256  # <begin sentence>
END_OF_SENTENCE_CHARACTER = 257  # <end sentence>
BEGINNING_OF_WORD_CHARACTER = 258  # <begin word>
END_OF_WORD_CHARACTER = 259  # <end word>
PADDING_CHARACTER = 260  # <padding>
N_CHARACTERS = 262  # 261 ids after the +1 shift, plus the padding-token id 0

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def _boundary_ids(character: int) -> tuple[int, ...]:
    ids = [PADDING_CHARACTER] * MAX_WORD_LENGTH
    ids[0] = BEGINNING_OF_WORD_CHARACTER
    ids[1] = character
    ids[2] = END_OF_WORD_CHARACTER
    return tuple(c + 1 for c in ids)


BOS_CHAR_IDS = _boundary_ids(BEGINNING_OF_SENTENCE_CHARACTER)
EOS_CHAR_IDS = _boundary_ids(END_OF_SENTENCE_CHARACTER)


@lru_cache(maxsize=200_000)
def word_to_char_ids(word: str) -> tuple[int, ...]:
    """The 50 (+1-shifted) character ids of one token."""
    if word == BOS_TOKEN:
        return BOS_CHAR_IDS
    if word == EOS_TOKEN:
        return EOS_CHAR_IDS
    encoded = word.encode("utf-8", "ignore")[: MAX_WORD_LENGTH - 2]
    ids = [PADDING_CHARACTER] * MAX_WORD_LENGTH
    ids[0] = BEGINNING_OF_WORD_CHARACTER
    for k, byte in enumerate(encoded, start=1):
        ids[k] = byte
    ids[len(encoded) + 1] = END_OF_WORD_CHARACTER
    return tuple(c + 1 for c in ids)


def batch_to_ids(sentences: Sequence[Sequence[str]]) -> torch.Tensor:
    """Character ids for a batch of tokenized sentences (checked: lists of non-empty strings).

    Returns a LongTensor (B, T, 50) with T the longest sentence; padding tokens are all zeros.
    """
    return checked_batch_to_ids(check_sentences(sentences))


def checked_batch_to_ids(sentences: list[list[str]]) -> torch.Tensor:
    """``batch_to_ids`` of sentences already checked by ``check_sentences`` (callers that checked them once)."""
    max_len = max((len(s) for s in sentences), default=0)
    out = torch.zeros(len(sentences), max_len, MAX_WORD_LENGTH, dtype=torch.long)  # (B, T, 50)
    for i, sentence in enumerate(sentences):
        if sentence:
            out[i, : len(sentence)] = torch.tensor([word_to_char_ids(w) for w in sentence])
    return out

"""batch_to_ids must give exactly AllenNLP's ELMoCharacterMapper ids (expected ids written by hand).

Facts (AllenNLP ELMoCharacterMapper): a token is begin-of-word (258), its UTF-8 bytes cut to 48,
end-of-word (259), padding (260) up to 50; <S>/</S> are 256/257 between the word markers; every
id is shifted +1 so that a padding token is all zeros.
"""
import pytest
import torch

from elmo_features import batch_to_ids

BOW, EOW, PAD = 259, 260, 261  # +1-shifted


def ids(*inner: int) -> list[int]:
    """The 50 expected ids of a token whose (+1-shifted) byte ids are ``inner``."""
    row = [BOW, *inner, EOW]
    return row + [PAD] * (50 - len(row))


def shifted(b: bytes) -> list[int]:
    return [x + 1 for x in b]


def test_ascii_word():
    got = batch_to_ids([["a", "Hi"]])
    assert got.shape == (1, 2, 50) and got.dtype == torch.long
    assert got[0, 0].tolist() == ids(98)  # 'a' = 97
    assert got[0, 1].tolist() == ids(73, 106)  # 'H' = 72, 'i' = 105


def test_non_ascii_words_are_utf8_bytes():
    got = batch_to_ids([["é", "日本", "😀"]])
    assert got[0, 0].tolist() == ids(0xC3 + 1, 0xA9 + 1)
    assert got[0, 1].tolist() == ids(0xE6 + 1, 0x97 + 1, 0xA5 + 1, 0xE6 + 1, 0x9C + 1, 0xAC + 1)
    assert got[0, 2].tolist() == ids(0xF0 + 1, 0x9F + 1, 0x98 + 1, 0x80 + 1)


def test_sentence_boundary_tokens():
    got = batch_to_ids([["<S>", "</S>", "<s>"]])
    assert got[0, 0].tolist() == ids(257)  # beginning-of-sentence character 256
    assert got[0, 1].tolist() == ids(258)  # end-of-sentence character 257
    assert got[0, 2].tolist() == ids(*shifted(b"<s>"))  # only the exact strings are special


def test_long_word_is_cut_to_48_bytes_not_characters():
    word = "a" + "é" * 30  # 61 bytes; byte 48 is the first half of an 'é'
    row = batch_to_ids([[word]])[0, 0].tolist()
    assert len(row) == 50 and PAD not in row
    assert row == [BOW] + shifted(word.encode("utf-8")[:48]) + [EOW]
    assert row[48] == 0xC3 + 1
    assert batch_to_ids([["x" * 48]])[0, 0].tolist() == [BOW] + [121] * 48 + [EOW]


def test_padding_tokens_are_all_zero():
    got = batch_to_ids([["a"], ["a", "b", "c"], []])
    assert got.shape == (3, 3, 50)
    assert got[0, 1:].eq(0).all() and got[2].eq(0).all()
    assert got[0, 0].tolist() == got[1, 0].tolist() == ids(98)
    assert got[1, 2].tolist() == ids(100)


def test_rejects_untokenized_input():
    with pytest.raises(TypeError):
        batch_to_ids(["a sentence", "another"])

"""Static word vectors: the three file formats, lowercasing/OOV policy, and error messages."""
import gzip
import struct

import numpy as np
import pytest

from elmo_tasks.data import DataFormatError, StaticVectors, load_static_vectors

WORDS = ["the", "Paris", "paris", ".", "a b"]
VECS = np.arange(len(WORDS) * 3, dtype=np.float32).reshape(len(WORDS), 3) / 4  # (V, 3)


def text_lines(words=WORDS, vecs=VECS):
    return [w + " " + " ".join(repr(float(x)) for x in v) for w, v in zip(words, vecs)]


def test_glove_text_no_header(tmp_path):
    p = tmp_path / "glove.txt"
    p.write_text("\n".join(text_lines(WORDS[:4], VECS[:4])) + "\n", encoding="utf-8")
    sv = load_static_vectors(p)
    assert sv.words == WORDS[:4] and sv.dim == 3 and not sv.lowercase  # "Paris" -> case-sensitive
    np.testing.assert_array_equal(sv.vectors, VECS[:4])


def test_word2vec_text_header_trailing_space_and_spaced_word(tmp_path):
    p = tmp_path / "ft.vec"
    p.write_text(f"{len(WORDS)} 3\n" + "".join(l + " \n" for l in text_lines()), encoding="utf-8")
    sv = load_static_vectors(p)
    assert sv.words == WORDS
    np.testing.assert_array_equal(sv.lookup(["a b"])[0], VECS[4:5])
    assert load_static_vectors(p, max_vectors=2).words == WORDS[:2]


def test_gzip_text(tmp_path):
    p = tmp_path / "v.txt.gz"
    with gzip.open(p, "wt", encoding="utf-8") as f:
        f.write("\n".join(text_lines()) + "\n")
    assert load_static_vectors(p).words == WORDS


def test_word2vec_binary(tmp_path):
    p = tmp_path / "v.bin"
    words, vecs = WORDS[:4], VECS[:4]  # the binary format cannot hold words with spaces
    with open(p, "wb") as f:
        f.write(f"{len(words)} 3\n".encode())
        for w, v in zip(words, vecs):
            f.write(w.encode() + b" " + struct.pack("<3f", *v) + b"\n")
    sv = load_static_vectors(p)
    assert sv.words == words
    np.testing.assert_array_equal(sv.vectors, vecs)
    assert load_static_vectors(p, max_vectors=3).words == words[:3]
    data = p.read_bytes()
    p.write_bytes(data[:-10])
    with pytest.raises(DataFormatError, match="truncated at vector 3 of 4"):
        load_static_vectors(p)


def test_npy_and_words(tmp_path):
    sv = StaticVectors(WORDS, VECS, lowercase=False)
    np.save(tmp_path / "vectors.npy", sv.vectors)  # the .npy + words-file form
    (tmp_path / "words.txt").write_text("".join(w + "\n" for w in sv.words), encoding="utf-8")
    for path in (tmp_path, tmp_path / "vectors.npy"):
        back = load_static_vectors(path)
        assert back.words == WORDS
        np.testing.assert_array_equal(back.vectors, VECS)
    (tmp_path / "words.txt").write_text("the\nParis\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"shape \(5, 3\) but .*words.txt lists 2 words"):
        load_static_vectors(tmp_path)


def test_lookup_policy_and_oov():
    sv = StaticVectors(["the", "Paris", "cat"], np.eye(3, dtype=np.float32), lowercase=False)
    vecs, n_oov = sv.lookup(["The", "Paris", "PARIS", "dog"])
    # "The" -> lower-case fallback "the"; "PARIS" -> "paris" is not in the vocabulary -> OOV zero
    np.testing.assert_array_equal(vecs, np.array([[1, 0, 0], [0, 1, 0], [0, 0, 0], [0, 0, 0]], np.float32))
    assert n_oov == 2 and vecs.dtype == np.float32
    lower = StaticVectors(["the", "paris"], np.eye(2, dtype=np.float32), lowercase=True)
    assert lower.lookup(["PARIS", "Paris"])[1] == 0
    cov = sv.coverage([["the", "dog"], ["dog", "cat"]])
    assert cov["tokens"] == 4 and cov["oov_tokens"] == 2 and cov["oov_rate"] == 0.5 and cov["oov_types"] == 1
    assert sv.lookup([])[0].shape == (0, 3)


def test_auto_lowercase(tmp_path):
    p = tmp_path / "lower.txt"
    p.write_text("the 1 2\nparis 3 4\n", encoding="utf-8")
    sv = load_static_vectors(p)
    assert sv.lowercase and "PARIS" in sv
    assert not load_static_vectors(p, lowercase=False).lowercase


@pytest.mark.parametrize("content,message", [
    ("the 1 2\ncat 1 2 3\n", r"bad.txt:2: dimension mismatch: expected 2 values after the word, found 3"),
    ("the 1 2\ncat 1\n", r"bad.txt:2: dimension mismatch: expected 2 values after the word, found 1"),
    ("the 1 2\ncat 1 x\n", r"bad.txt:2: non-numeric value 'x'"),
    ("2 2\nthe 1 2\n", r"bad.txt:1: header says 2 vectors but the file has 1"),
    ("the 1 2\n\ncat 1 2\n", r"bad.txt:2: empty line"),
    ("the 1 nan\n", r"contain NaN/inf, first: 'the'"),
    ("", r"no vectors found"),
])
def test_text_errors(tmp_path, content, message):
    p = tmp_path / "bad.txt"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(DataFormatError, match=message):
        load_static_vectors(p)


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="valid: auto, text, word2vec_bin, npy"):
        load_static_vectors(tmp_path / "x.txt", format="glove")
    with pytest.raises(FileNotFoundError):
        load_static_vectors(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="shape"):
        StaticVectors(["a"], np.zeros((2, 3)), lowercase=False)

"""The project tokenizer follows the biLM corpus conventions."""
import pytest

from elmo_tasks.data.tokenizer import get_tokenizer, tokenize


@pytest.mark.parametrize("text,tokens", [
    ("I can't, won't do it.", ["I", "ca", "n't", ",", "wo", "n't", "do", "it", "."]),
    ("he's John's \u201cfriend\u201d\u2014really!!!", ["he", "'s", "John", "'s", '"', "friend", '"', "--", "really", "!!!"]),
    ("Mr. Smith paid $1,000 at 10:30 in the U.S.", ["Mr.", "Smith", "paid", "$", "1,000", "at", "10:30", "in", "the", "U.S.", "."]),
    ("an 'ironic' well-known and/or AT&T (3.5%)", ["an", "'", "ironic", "'", "well-known", "and/or", "AT&T", "(", "3.5", "%", ")"]),
    ("mail me@x.org or see http://a.b/c?d=1 ...", ["mail", "me@x.org", "or", "see", "http://a.b/c?d=1", "..."]),
    ("I'd answer'd the boys' call", ["I", "'d", "answer'd", "the", "boys", "'", "call"]),
    ("``quoted'' text", ['"', "quoted", '"', "text"]),
])
def test_tokenize(text, tokens):
    assert tokenize(text) == tokens


def test_no_empty_tokens_and_whitespace():
    assert tokenize("   \t ") == []
    assert all(t and " " not in t for t in tokenize("a  \u00a0b\u200b c\u2026 d -- e"))


def test_get_tokenizer_lists_valid():
    assert get_tokenizer("whitespace")("a  b") == ["a", "b"]
    with pytest.raises(ValueError, match="valid: ptb, whitespace"):
        get_tokenizer("spacy")


def test_corpus_tokenization_is_reproduced():
    """Re-tokenizing the biLM corpus' held-out lines (tokenized by the corpus rules) changes almost nothing."""
    import gzip

    from conftest import shared_path

    path = shared_path("corpus", "heldout.txt.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = [line.split() for line in f]
    same = sum(tokenize(" ".join(toks)) == toks for toks in lines)
    assert len(lines) > 1000 and same / len(lines) > 0.995

"""Tag scheme validity checks, detection and conversion."""
import pytest

from tasks.data.tag_schemes import (TagSchemeError, bio_to_bioes, check_scheme_name, convert_tags,
                                    detect_scheme, iob1_to_bio, spans_to_tags, tags_to_spans)

BIO = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "O", "B-ORG"]
IOB1 = ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "O", "I-ORG"]
BIOES = ["B-PER", "E-PER", "O", "S-LOC", "B-LOC", "E-LOC", "O", "S-ORG"]
SPANS = [("PER", 0, 2), ("LOC", 3, 4), ("LOC", 4, 6), ("ORG", 7, 8)]


def test_spans_of_each_scheme():
    assert tags_to_spans(BIO, "BIO") == SPANS
    assert tags_to_spans(IOB1, "IOB1") == SPANS
    assert tags_to_spans(BIOES, "BIOES") == SPANS


@pytest.mark.parametrize("scheme,tags", [("BIO", BIO), ("IOB1", IOB1), ("BIOES", BIOES)])
def test_encode_round_trip(scheme, tags):
    assert spans_to_tags(SPANS, len(tags), scheme) == tags


def test_named_conversions():
    assert iob1_to_bio(IOB1) == BIO
    assert bio_to_bioes(BIO) == BIOES
    assert convert_tags(BIOES, "BIOES", "IOB1") == IOB1
    assert convert_tags(["O", "O"], "BIO", "BIOES") == ["O", "O"]


@pytest.mark.parametrize("scheme,tags,bad", [
    ("BIO", ["O", "I-PER"], 1),                 # I- after O
    ("BIO", ["B-PER", "I-LOC"], 1),             # type change
    ("IOB1", ["O", "B-PER"], 1),                # IOB1 B- must follow the same type
    ("BIOES", ["B-PER", "O"], 1),               # unfinished chunk
    ("BIOES", ["B-PER"], 0),                    # ends inside a chunk
    ("BIOES", ["E-PER"], 0),
    ("BIO", ["S-PER"], 0),                      # prefix not in scheme
    ("BIO", ["O", "PER"], 1),                   # malformed tag
    ("BIO", ["O", "B-"], 1),
])
def test_invalid_sequences_report_position(scheme, tags, bad):
    with pytest.raises(TagSchemeError) as e:
        tags_to_spans(tags, scheme)
    assert e.value.index == bad


def test_detect_scheme():
    assert detect_scheme([BIO, ["O"]]) == "BIO"
    assert detect_scheme([["O"], IOB1]) == "IOB1"
    assert detect_scheme([BIOES]) == "BIOES"
    assert detect_scheme([["O", "O"]]) == "BIO"


def test_scheme_names():
    assert check_scheme_name("iob2") == "BIO"
    with pytest.raises(ValueError, match="valid: IOB1, BIO, BIOES"):
        check_scheme_name("BILOU")


def test_overlapping_spans_rejected():
    with pytest.raises(ValueError, match="overlapping"):
        spans_to_tags([("A", 0, 2), ("B", 1, 3)], 3, "BIO")

"""Tag scheme validity checks, detection and conversion."""
import itertools
import random

import pytest

from elmo_tasks.data.tag_schemes import (END, PREFIXES, START, TagSchemeError, check_scheme_name,
                                    convert_data, convert_tags, detect_scheme, is_transition_allowed,
                                    scheme_tag, spans_to_tags, tags_to_spans)

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
    assert convert_tags(IOB1, "IOB1", "BIO") == BIO
    assert convert_tags(BIO, "BIO", "BIOES") == BIOES
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


def test_convert_data_names_sentence_and_scheme():
    assert convert_data([IOB1, ["O"]], "auto", "BIO") == ([BIO, ["O"]], "IOB1")
    with pytest.raises(TagSchemeError) as e:
        convert_data([BIO, ["O", "I-PER"]], "BIO", "BIOES")
    assert (e.value.sentence, e.value.index, e.value.scheme) == (1, 1, "BIO")
    with pytest.raises(TagSchemeError) as e:
        convert_data([BIO, ["O", "PER"]], "auto", "BIO")  # malformed: found while detecting
    assert (e.value.sentence, e.value.index, e.value.scheme) == (1, 1, None)


@pytest.mark.parametrize("scheme,tags,spans", [
    ("BIO", ["B-PER", "I-LOC", "I-LOC"], [("PER", 0, 1)]),   # a chunk so far counts; stray I- do not
    ("BIO", ["I-PER", "I-PER", "O", "B-LOC"], [("LOC", 3, 4)]),
    ("BIOES", ["B-PER", "I-PER", "O", "S-LOC"], [("LOC", 3, 4)]),  # no E-: no chunk
    ("BIOES", ["B-PER", "S-LOC", "B-ORG", "E-ORG"], [("LOC", 1, 2), ("ORG", 2, 4)]),
    ("BIOES", ["B-PER", "E-LOC"], []),
    ("IOB1", ["O", "B-PER", "I-PER"], [("PER", 2, 3)]),
])
def test_lenient_spans_keep_only_well_formed_chunks(scheme, tags, spans):
    assert tags_to_spans(tags, scheme, strict=False) == spans


@pytest.mark.parametrize("scheme", ["BIO", "IOB1", "BIOES"])
def test_allowed_transitions_agree_with_span_validity(scheme):
    """A sequence is valid for tags_to_spans exactly when every transition in it is allowed (CRF constraints)."""
    labels = ["O"] + [f"{p}-{t}" for p in PREFIXES[scheme] for t in ("A", "B")]
    parts = {t: scheme_tag(t, scheme) for t in labels}
    for n in (1, 2, 3, 4):
        for seq in itertools.product(labels, repeat=n):
            path = [(START, None)] + [parts[t] for t in seq] + [(END, None)]
            allowed = all(is_transition_allowed(scheme, *a, *b) for a, b in zip(path, path[1:]))
            try:
                tags_to_spans(seq, scheme)
                valid = True
            except TagSchemeError:
                valid = False
            assert valid == allowed, seq
            if valid:  # then lenient decoding agrees with strict decoding
                assert tags_to_spans(seq, scheme, strict=False) == tags_to_spans(seq, scheme)


@pytest.mark.parametrize("scheme", ["BIO", "BIOES"])
def test_lenient_spans_match_seqeval_strict_mode(scheme):
    seqeval_scheme = pytest.importorskip("seqeval.scheme")
    rng = random.Random(0)
    labels = ["O"] + [f"{p}-{t}" for p in PREFIXES[scheme] for t in ("A", "B")]
    mode = seqeval_scheme.IOB2 if scheme == "BIO" else seqeval_scheme.IOBES
    for _ in range(2000):
        tags = [rng.choice(labels) for _ in range(rng.randint(1, 7))]
        theirs = seqeval_scheme.Entities([tags], mode, suffix=False).entities[0]
        assert sorted(tags_to_spans(tags, scheme, strict=False)) == sorted((e.tag, e.start, e.end) for e in theirs)

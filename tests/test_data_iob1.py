"""IOB1 input (chunks start with I-, B- only between two adjacent chunks of one type) through the hf reader
(.jsonl and .tsv), the CRF head's scheme and the span metric: decoded as IOB1, never as BIO."""
from __future__ import annotations

import json

import pytest

from elmo_tasks.data import DataFormatError, TaggedSentence, read_data
from elmo_tasks.data.tag_schemes import allowed_transitions, tags_to_spans
from elmo_tasks.heads.crf_tagger import CrfTagger, CrfTaggerConfig
from elmo_tasks.metrics import span_f1

TOKENS = "Peter Blackburn met Ann Smith John in Paris".split()
IOB1 = ["I-PER", "I-PER", "O", "I-PER", "I-PER", "B-PER", "O", "I-LOC"]  # I- starts; B-PER splits two PERs
SPANS = [("PER", 0, 2), ("PER", 3, 5), ("PER", 5, 6), ("LOC", 7, 8)]
BIO = ["B-PER", "I-PER", "O", "B-PER", "I-PER", "B-PER", "O", "B-LOC"]


def write_jsonl(tmp_path, tags=IOB1):
    p = tmp_path / "ner.jsonl"
    rows = [{"tokens": TOKENS, "ner_tags": tags}, {"tokens": ["nothing", "here"], "ner_tags": ["O", "O"]}]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return p


def test_iob1_spans():
    assert tags_to_spans(IOB1, "IOB1") == SPANS
    assert tags_to_spans(IOB1, "BIO", strict=False) != SPANS  # what reading it as BIO got wrong


def test_hf_reader_converts_iob1_jsonl_and_tsv(tmp_path):
    data = read_data("hf", write_jsonl(tmp_path))  # default output scheme: BIO
    assert data[0] == TaggedSentence(TOKENS, BIO) and data[1].tags == ["O", "O"]
    assert tags_to_spans(data[0].tags, "BIO") == SPANS
    assert read_data("hf", write_jsonl(tmp_path), scheme="IOB1")[0].tags == IOB1
    assert read_data("hf", write_jsonl(tmp_path), scheme="BIOES")[0].tags == [
        "B-PER", "E-PER", "O", "B-PER", "E-PER", "S-PER", "O", "S-LOC"]
    tsv = tmp_path / "ner.tsv"  # string cells, split on whitespace
    tsv.write_text("tokens\ttags\n" + " ".join(TOKENS) + "\t" + " ".join(IOB1) + "\n", encoding="utf-8")
    assert read_data("hf", tsv) == [TaggedSentence(TOKENS, BIO)]


def test_hf_reader_validates_a_declared_scheme_and_leaves_other_tags_alone(tmp_path):
    with pytest.raises(DataFormatError, match=r"ner_tags column: row 0, tag 1 \(BIO scheme\).*I-PER"):
        read_data("hf", write_jsonl(tmp_path), input_scheme="BIO")
    pos = ["NNP", "NNP", "VBD", "NNP", "NNP", "NNP", "IN", "NNP"]
    assert read_data("hf", write_jsonl(tmp_path, pos))[0].tags == pos  # not span tags: as read


def test_crf_head_decodes_and_scores_iob1(tmp_path):
    examples = read_data("hf", write_jsonl(tmp_path), scheme="IOB1")
    config = CrfTaggerConfig(hidden_dim=4)
    # declared by the reader option, or detected from the tag sequences (an I- starting a chunk): IOB1
    assert CrfTagger.build_vocab(config, examples, {"scheme": "IOB1"})["scheme"] == "IOB1"
    vocab = CrfTagger.build_vocab(config, examples, {})
    assert vocab["scheme"] == "IOB1"
    head = CrfTagger(config, 6, vocab)
    start = len(vocab["labels"])
    assert (start, vocab["labels"].index("I-PER")) in allowed_transitions("IOB1", vocab["labels"])
    assert (start, vocab["labels"].index("B-PER")) not in allowed_transitions("IOB1", vocab["labels"])
    assert head.evaluate(examples, [ex.tags for ex in examples])["f1"] == 1.0
    merged = IOB1[:5] + ["I-PER"] + IOB1[6:]  # the two adjacent PERs predicted as one
    scores = head.evaluate(examples, [merged, ["O", "O"]])
    assert scores["precision"] == pytest.approx(2 / 3) and scores["recall"] == pytest.approx(2 / 4)
    assert span_f1([IOB1], [merged], "IOB1") == pytest.approx(
        {"precision": 2 / 3, "recall": 1 / 2, "f1": 4 / 7})

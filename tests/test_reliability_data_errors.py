"""Bad data reaching the heads is a user error: the project's typed error, one line through the CLI, exit 2."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import yaml

from elmo_features.util.errors import ElmoTasksError
from elmo_tasks.cli import main
from elmo_tasks.components import component_config
from elmo_tasks.data.types import LabeledSentence, TaggedSentence
from elmo_tasks.heads.crf_tagger import check_tag_transitions
from elmo_tasks.registry import HEADS
from test_tasks_helpers import classification_config, make_env, tagging_config


def _run(tmp_path: Path, cfg: dict, capsys) -> tuple[int, str]:
    conf = tmp_path / "cfg.yaml"
    conf.write_text(yaml.safe_dump(cfg))
    capsys.readouterr()
    rc = main(["run", str(conf), "--out", str(tmp_path / "run"), "--cache-dir", "none", "--progress", "off"])
    return rc, capsys.readouterr().err.strip()


@pytest.fixture
def env(tmp_path):
    torch.set_num_threads(1)
    return make_env(tmp_path)


def test_tag_scheme_mismatch_is_refused_before_training(env, tmp_path, capsys):
    cfg = tagging_config(env, head={"name": "crf_tagger", "hidden_dim": 4, "scheme": "BIOES"})
    cfg["data"]["reader_options"] = {}  # the file's BIO tags as they are, declared BIOES
    rc, err = _run(tmp_path, cfg, capsys)
    assert rc == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err == ("error: training data: 4 of 5 sentences break the BIOES tag scheme (example 1: O after B-PER); "
                   "the data is in another scheme: set head.scheme or the reader's scheme option to the data's "
                   "scheme (BIO, IOB1 or BIOES)")
    assert not (tmp_path / "run" / "model.pt").exists()


def test_a_training_file_without_sentences(env, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("-DOCSTART- -X- -X- O\n\n", encoding="utf-8")
    cfg = tagging_config(env)
    cfg["data"]["train"] = str(empty)
    rc, err = _run(tmp_path, cfg, capsys)
    assert rc == 2 and len(err.splitlines()) == 1 and str(empty) in err, err


@pytest.mark.parametrize("reader, options, message", [
    ("tsv", {"tokenizer": "nope"}, "data.reader_options: tokenizer: unknown tokenizer 'nope'; valid: ptb, whitespace"),
    ("tsv", {"header": "maybe"}, "data.reader_options: header: must be true, false or 'auto', got 'maybe'"),
    ("conll2003", {"tag_column": "foo"}, "data.reader_options: tag_column: unknown column 'foo'; valid: pos, chunk, ner"),
    ("conll2003", {"scheme": "XYZ"}, "data.reader_options: unknown tag scheme 'XYZ'; valid: IOB1, BIO, BIOES"),
])
def test_bad_reader_option_values(env, tmp_path, capsys, reader, options, message):
    cfg = tagging_config(env) if reader == "conll2003" else classification_config(env)
    cfg["data"]["reader_options"] = options
    rc, err = _run(tmp_path, cfg, capsys)
    assert rc == 2 and len(err.splitlines()) == 1 and message in err, err


def test_labels_unseen_in_training_are_counted_at_predict_time(env, tmp_path, capsys):
    cfg = tagging_config(env, head={"name": "crf_tagger", "hidden_dim": 4}, max_epochs=1)
    rc, err = _run(tmp_path, cfg, capsys)
    assert rc == 0, err
    assert main(["predict", str(tmp_path / "run"), str(env["conll_test"]), "--reader", "--cache-dir", "none",
                 "--progress", "off"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(", unseen_labels 1")  # S-ORG ("Acme") is not in the training file


def _head(name: str, **kw):
    cls = HEADS.get(name)
    return cls, component_config(HEADS, {"name": name, **kw})


@pytest.mark.parametrize("name, example, message", [
    ("crf_tagger", TaggedSentence(["a", "b"], ["O", "O"]), None),
    ("token_tagger", TaggedSentence(["a", "b"], ["O", "O"]), None),
    ("sentence_classifier", LabeledSentence(["a"], ""), "the example has no label"),
])
def test_malformed_examples_are_typed_errors(name, example, message):
    cls, _ = _head(name)
    if message is None:  # a tagged sentence whose tags do not match its tokens (changed after it was built)
        example = copy.copy(example)
        example.tags = ["O"]
        message = "2 tokens but 1 tags"
    with pytest.raises(ElmoTasksError, match=message):
        cls.check_example(example, "train.txt: train example 3")


def test_training_data_without_labels_is_a_typed_error():
    cls, config = _head("wsd_linear")
    examples = cls.demo_examples()
    for ex in examples:
        for t in ex.targets:
            t.gold = []
    with pytest.raises(ElmoTasksError, match="no gold sense keys"):
        cls.build_vocab(config, examples, {})
    cls, config = _head("sentence_classifier")
    with pytest.raises(ElmoTasksError, match="no labels"):
        cls.build_vocab(config, [], {})


def test_scheme_check_tolerates_annotation_noise():
    good = [TaggedSentence(["a", "b"], ["B-PER", "I-PER"])] * 40
    check_tag_transitions(good + [TaggedSentence(["a"], ["I-PER"])], "BIO")  # 1 of 41 broken: noise
    with pytest.raises(ElmoTasksError, match="3 of 43 sentences break the BIO tag scheme .example 41: I-PER starts"):
        check_tag_transitions(good + [TaggedSentence(["a"], ["I-PER"])] * 3, "BIO")
    check_tag_transitions([TaggedSentence(["a", "b"], ["I-PER", "B-PER"])], "IOB1")

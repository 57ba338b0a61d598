"""Strong-baseline head options: the char encoder sees each token's exact characters (Unicode, truncation rule),
casing classes, word/variational dropout, the LR schedule, config checks, and train/save/reload/predict."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from test_tasks_helpers import make_glove
from elmo_features.util.errors import ConfigError
from elmo_tasks.components import component_config
from elmo_tasks.experiment.config import load_config, resolve
from elmo_tasks.experiment.run import load_run, predict_examples, run_experiment
from elmo_tasks.features.base import FeatureContext
from elmo_tasks.heads.chars import UNK, CharIndexer, build_char_vocab, truncate_token
from elmo_tasks.heads.token_input import CASING_CLASSES, TokenInput, casing_class
from elmo_tasks.heads.variational import LockedDropout, VariationalBiLSTMEncoder
from elmo_tasks.registry import HEADS
from elmo_tasks.experiment.training import epoch_lr, make_optimizer

STRONG = {"casing_dim": 4, "word_dropout": 0.1, "variational_dropout": True, "num_layers": 2, "hidden_dim": 8}


def head_config(name: str, **options):
    cfg = resolve({"name": "t", "data": {"reader": "tsv", "train": "unused"},
                   "features": {"name": "static", "path": "unused"}, "head": {"name": name, **options}})
    return component_config(HEADS, cfg.head)


def test_truncation_rule_keeps_prefix_and_suffix():
    assert truncate_token("abcdefghij", 6) == "abchij"  # first 6 - 3, last 3
    assert truncate_token("abcdefghij", 5) == "abcij"  # first 5 - 2, last 2
    assert truncate_token("abcdefghij", 1) == "a"
    assert truncate_token("abcdef", 6) == "abcdef" and truncate_token("", 4) == ""
    assert truncate_token("Zürich🙂東京-Straße", 7) == "Züri" + "aße"


class EchoChars(torch.nn.Module):
    """Stands in for the char encoder: returns the ids it was given, zero-padded to ``width`` (U, width)."""

    def __init__(self, width: int):
        super().__init__()
        self.width = width

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.pad(ids.float(), (0, self.width - ids.shape[1]))


def test_char_encoder_sees_the_exact_characters_of_each_token():
    from elmo_tasks.data.types import TaggedSentence

    decomposed = "Cafe\u0301"  # e + combining acute: two code points, kept apart (no normalisation)
    train = [TaggedSentence(["Zürich", "naïve", "東京", "🙂", decomposed, "x" * 20], ["O"] * 6)]
    config = head_config("crf_tagger", chars={"name": "cnn", "filters": 8, "max_length": 8})
    vocab = HEADS.get("crf_tagger").build_vocab(config, train, {"scheme": "BIO"})
    assert vocab["chars"] == sorted(set("Zürichnaïve東京🙂Cafe\u0301x"))
    inp = TokenInput(config, 3, vocab).eval()
    assert inp.output_dim == 3 + 8
    inp.chars = EchoChars(8)
    sentences = [["naïve", "Zürich", decomposed], ["🙂", "東京", "x" * 20, "Zürich"], ["Ω"]]  # Ω never seen
    T = 4
    mask = torch.tensor([[True] * 3 + [False], [True] * 4, [True] + [False] * 3])
    out = inp(torch.zeros(3, T, 3), mask, [TaggedSentence(s, ["O"] * len(s)) for s in sentences])  # (3, 4, 11)
    id_to_char = {i + 2: ch for i, ch in enumerate(vocab["chars"])} | {UNK: "\ufffd"}
    for b, sent in enumerate(sentences):
        for t in range(T):
            ids = [int(v) for v in out[b, t, 3:].tolist() if v != 0]
            if t >= len(sent):
                assert ids == []  # padding positions get the zero vector
                continue
            seen = "".join(id_to_char[i] for i in ids)
            want = truncate_token(sent[t], 8)
            assert seen == (want if sent[t] != "Ω" else "\ufffd"), (sent[t], seen)
    assert truncate_token("x" * 20, 8) == "x" * 8 and len(decomposed) == 5


def test_char_vocab_min_count_and_unknown_id():
    assert build_char_vocab(["aab", "b", "c"], min_count=2) == ["a", "b"]
    idx = CharIndexer(["a", "b"], max_length=4)
    assert idx("abca") == [2, 3, UNK, 2]
    assert idx.batch(["ab", "", "abxcb"]).tolist() == [[2, 3, 0, 0], [0, 0, 0, 0], [2, 3, UNK, 3]]  # "ab" + "cb"


@pytest.mark.parametrize("encoder", [{"name": "cnn", "filters": 5, "width": 3, "embedding_dim": 4},
                                     {"name": "lstm", "hidden_dim": 3, "embedding_dim": 4}])
def test_char_encoding_of_a_token_does_not_depend_on_its_batch(encoder):
    from elmo_tasks.data.types import LabeledSentence

    config = head_config("sentence_classifier", chars=encoder)
    vocab = {"labels": ["a"], "chars": list("abcdefghijklmnopqrstuvwxyz")}
    torch.manual_seed(0)
    inp = TokenInput(config, 2, vocab).eval()
    alone = inp.encode_chars([LabeledSentence(["cat"], "a")], torch.ones(1, 1, dtype=torch.bool))  # (1, 1, F)
    mixed = inp.encode_chars([LabeledSentence(["a", "cat"], "a"), LabeledSentence(["extraordinarily"], "a")],
                             torch.tensor([[True, True], [True, False]]))  # (2, 2, F)
    assert torch.allclose(alone[0, 0], mixed[0, 1], atol=1e-6)
    assert not torch.allclose(mixed[0, 0], mixed[0, 1]) and mixed[1, 1].abs().sum() == 0


def test_casing_classes():
    cases = {"1996": "numeric", "3.5": "mainly_numeric", "paris": "all_lower", "NATO": "all_upper",
             "U.S.": "all_upper", "Paris": "initial_upper", "Zürich": "initial_upper", "F16a": "initial_upper",
             "a1b2c": "all_lower", "x-1": "all_lower", "--1": "contains_digit", "iPhone": "other", ",": "other"}
    assert {t: CASING_CLASSES[casing_class(t)] for t in cases} == cases


def test_word_dropout_zeroes_whole_tokens_and_only_in_training():
    from elmo_tasks.data.types import LabeledSentence

    inp = TokenInput(head_config("sentence_classifier", word_dropout=0.5), 6, {"labels": ["a"]})
    x = torch.ones(4, 50, 6)
    mask = torch.ones(4, 50, dtype=torch.bool)
    exs = [LabeledSentence(["w"] * 50, "a")] * 4
    torch.manual_seed(0)
    out = inp.train()(x, mask, exs)
    row_sums = out.sum(-1)  # (4, 50): 0 (dropped) or 6 (kept): whole tokens, no rescaling
    assert set(row_sums.unique().tolist()) == {0.0, 6.0}
    assert 0.3 < float((row_sums == 0).float().mean()) < 0.7
    assert torch.equal(inp.eval()(x, mask, exs), x)


def test_locked_dropout_shares_the_mask_over_time_and_encoder_zeroes_padding():
    torch.manual_seed(0)
    drop = LockedDropout(0.5).train()
    y = drop(torch.ones(3, 7, 10))
    assert torch.equal(y, y[:, :1].expand_as(y)) and set(y.unique().tolist()) == {0.0, 2.0}
    enc = VariationalBiLSTMEncoder(4, 3, num_layers=2, dropout=0.3).eval()
    mask = torch.tensor([[True] * 5, [True] * 2 + [False] * 3])
    x = torch.randn(2, 5, 4)
    out = enc(x, mask)
    assert out.shape == (2, 5, 6) and out[1, 2:].abs().sum() == 0
    assert torch.allclose(enc(x[1:, :2], mask[1:, :2])[0], out[1, :2], atol=1e-6)  # padding does not leak


def test_default_heads_build_exactly_the_plain_modules():
    vocab = {"labels": ["B-PER", "I-PER", "O"], "scheme": "BIO"}
    head = HEADS.get("crf_tagger")(head_config("crf_tagger", hidden_dim=4), 5, vocab)
    assert head.inputs is None and type(head.encoder).__name__ == "BiLSTMEncoder"
    assert sorted(head.state_dict()) == sorted(
        ["encoder.lstm.weight_ih_l0", "encoder.lstm.weight_hh_l0", "encoder.lstm.bias_ih_l0", "encoder.lstm.bias_hh_l0",
         "encoder.lstm.weight_ih_l0_reverse", "encoder.lstm.weight_hh_l0_reverse", "encoder.lstm.bias_ih_l0_reverse",
         "encoder.lstm.bias_hh_l0_reverse", "emit.weight", "emit.bias", "crf.transitions", "crf.start", "crf.end"])
    cls = HEADS.get("sentence_classifier")
    assert cls.build_vocab(head_config("sentence_classifier"), cls.demo_examples(), {}) == {"labels": ["neg", "pos"]}


@pytest.mark.parametrize("mutate,message", [
    (lambda h: h.update(chars={"name": "gru"}), "unknown char encoder 'gru'; valid char encoder names: cnn, lstm"),
    (lambda h: h.update(chars={"name": "cnn", "width": 4}), "width: must be odd, got 4"),
    (lambda h: h.update(chars={"name": "lstm", "filters": 4}), "unknown key 'filters'"),
    (lambda h: h.update(word_dropout=1.0), "word_dropout: must be in [0, 1)"),
    (lambda h: h.update(casing_dim=-1), "casing_dim: must be >= 0"),
])
def test_bad_strong_options_are_config_errors(mutate, message):
    head = {"name": "crf_tagger"}
    mutate(head)
    with pytest.raises(ConfigError) as e:
        resolve({"name": "t", "data": {"reader": "tsv", "train": "x"}, "features": {"name": "static", "path": "x"},
                 "head": head})
    assert message in str(e.value)


def test_optimizer_and_learning_rate_schedule():
    base = {"name": "t", "data": {"reader": "tsv", "train": "x"}, "features": {"name": "static", "path": "x"},
            "head": {"name": "crf_tagger"}}
    cfg = resolve({**base, "training": {"optimizer": "sgd", "momentum": 0.9, "lr": 0.015, "lr_decay": 0.05}}).training
    opt = make_optimizer([torch.nn.Parameter(torch.zeros(2))], cfg)
    assert isinstance(opt, torch.optim.SGD) and opt.param_groups[0]["momentum"] == 0.9
    assert epoch_lr(cfg, 1) == pytest.approx(0.015) and epoch_lr(cfg, 11) == pytest.approx(0.015 / 1.5)
    assert epoch_lr(cfg, 11, scale=0.5) == pytest.approx(0.005)
    with pytest.raises(ConfigError, match="momentum: applies to optimizer: sgd only"):
        resolve({**base, "training": {"momentum": 0.9}})
    with pytest.raises(ConfigError, match="lr_reduce_patience: must be >= 1"):
        resolve({**base, "training": {"lr_reduce_patience": 0}})
    with pytest.raises(ConfigError, match=r"lr_reduce_factor: must be in \(0, 1\], got 0.0"):
        resolve({**base, "training": {"lr_reduce_factor": 0.0}})
    with pytest.raises(ConfigError, match="must be one of 'adam', 'sgd'"):
        resolve({**base, "training": {"optimizer": "adagrad"}})


@pytest.mark.parametrize("head_name,chars", [
    ("crf_tagger", {"name": "cnn", "filters": 8, "embedding_dim": 6}),
    ("crf_tagger", {"name": "lstm", "hidden_dim": 4, "embedding_dim": 6}),
    ("sentence_classifier", {"name": "cnn", "filters": 8, "embedding_dim": 6})])
def test_strong_head_trains_saves_reloads_and_predicts_the_same(head_name, chars, tmp_path):
    torch.set_num_threads(1)
    examples = HEADS.get(head_name).demo_examples()
    head = {"name": head_name, **STRONG, "chars": chars}
    cfg = resolve({"name": "strong", "data": {"reader": "tsv", "train": "unused"},
                   "features": {"name": "static", "path": str(make_glove(tmp_path / "glove.txt"))}, "head": head,
                   "training": {"max_epochs": 3, "batch_size": 3, "lr": 0.02, "optimizer": "sgd", "momentum": 0.9,
                                "lr_decay": 0.5, "lr_reduce_factor": 0.5}})
    ctx = FeatureContext(cache_dir=tmp_path / "cache", progress=False)
    metrics = run_experiment(cfg, tmp_path / "run", ctx, progress=False,
                             examples={"train": examples, "dev": examples, "test": examples})
    assert 0.0 <= metrics["test"][HEADS.get(head_name).primary_metric] <= 1.0
    history = metrics["history"]
    assert "lr" not in history[0] and history[1]["lr"] < 0.02 / 1.5 + 1e-9
    assert all(h["train_cpu_seconds"] >= 0 and "dev_seconds" in h for h in history)
    assert metrics["seconds"]["train_cpu"] > 0
    vocab = json.loads((tmp_path / "run" / "vocab.json").read_text(encoding="utf-8"))
    assert set("".join(t for ex in examples for t in ex.tokens)) == set(vocab["chars"])
    state = torch.load(tmp_path / "run" / "model.pt", weights_only=True)["state_dict"]
    assert any(k.startswith("head.inputs.chars.") for k in state) and "head.inputs.casing.weight" in state
    assert any(k.startswith("head.encoder.layers.1.") for k in state)  # the second variational BiLSTM layer
    saved = json.loads((tmp_path / "run" / "predictions.json").read_text())["test"]
    cfg2, model = load_run(tmp_path / "run", ctx)
    assert cfg2.to_dict() == cfg.to_dict()
    assert predict_examples(cfg2, model, examples, progress=False) == saved
    # a sentence gets the same prediction whatever else is in its batch
    single = [predict_examples(cfg2, model, [ex], progress=False)[0] for ex in examples]
    assert single == saved


@pytest.mark.parametrize("task", ["ner_conll2003", "sentiment_polarity"])
def test_strong_configs_mirror_the_main_configs_except_head_and_training(task):
    repo = Path(__file__).resolve().parents[1]
    main, strong = load_config(repo / f"configs/{task}.yaml"), load_config(repo / f"configs/{task}_strong.yaml")
    assert strong.name == f"{task}_strong"
    assert strong.data == main.data and strong.features == main.features
    assert strong.compare.sources == main.compare.sources and strong.compare.seeds == main.compare.seeds
    assert strong.head["name"] == main.head["name"] and strong.head["num_layers"] == 2
    assert strong.head["variational_dropout"] and strong.head["hidden_dim"] > main.head["hidden_dim"]
    assert strong.training.max_epochs > main.training.max_epochs

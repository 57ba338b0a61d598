"""GPU correctness by construction, checked without a GPU, and the ``--device`` option.

Every tensor the biLM, the token cache, the feature mixes and the heads create follows the device of their
input or parameters. Check: run them on CPU tensors with torch's default device set to "meta"; a tensor
made without ``device=`` lands on "meta", and mixing it with the CPU tensors fails (or its result, read
back, is not the CPU result).
"""
from __future__ import annotations

import copy

import pytest
import torch
import yaml

from elmo_features import BiLM, BiLMOptions, TokenCache, batch_to_ids
from elmo_features.util.devices import module_device, move_to, parse_device
from elmo_features.util.errors import UsageError
from elmo_tasks.cli import main
from elmo_tasks.components import component_config
from elmo_tasks.experiment.config import resolve
from elmo_tasks.experiment.run import build_model, make_split
from elmo_tasks.features.base import FeatureContext
from elmo_tasks.registry import FUSIONS, HEADS
from elmo_tasks.experiment.training import predict
from test_tasks_helpers import TINY_OPTIONS, elmo_section, make_bilm, make_env, make_glove, tagging_config

SENTENCES = [["John", "visited", "Berlin", "."], ["Hi"], "a dog ran quickly under the big red log at noon".split()]
NO_CUDA = not torch.cuda.is_available()


def _no_default_device(fn):
    """``fn()`` with tensors made without ``device=`` going to the "meta" device."""
    with torch.device("meta"):
        return fn()


def _bilms():
    transformer = {"char_cnn": TINY_OPTIONS["char_cnn"], "backbone": "transformer",  # windows of 8: chunking runs
                   "transformer": {"dim": 8, "n_layers": 2, "n_heads": 2, "ff_dim": 16, "max_positions": 8,
                                   "chunk_overlap": 3}}
    return {"lstm": TINY_OPTIONS, "transformer": transformer}


@pytest.mark.parametrize("kind", ["lstm", "transformer"])
@pytest.mark.parametrize("grad", [True, False], ids=["autograd", "inference"])
def test_bilm_makes_every_tensor_on_the_input_device(kind, grad):
    torch.manual_seed(0)
    bilm = BiLM(BiLMOptions.from_dict(copy.deepcopy(_bilms()[kind]))).eval()
    ids = batch_to_ids(SENTENCES)  # (B, T, 50)
    cache = TokenCache(bilm)
    with torch.set_grad_enabled(grad), torch.inference_mode(not grad):
        ref = bilm(ids, token_embeddings=cache.lookup(SENTENCES)).layers  # (L, B, T, D)
        cache.clear()
        out = _no_default_device(lambda: bilm(ids, token_embeddings=cache.lookup(SENTENCES)).layers)
    assert out.device.type == "cpu" and torch.allclose(out, ref, atol=1e-6)


@pytest.fixture(scope="module")
def feature_env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("devices")
    opts, weights = make_bilm(tmp / "bilm")
    return {"options": opts, "weights": weights, "glove": make_glove(tmp / "glove.txt")}


HEAD_VARIANTS = {
    "crf_tagger": {"name": "crf_tagger", "hidden_dim": 8, "casing_dim": 3, "word_dropout": 0.2,
                   "variational_dropout": True, "chars": {"name": "cnn", "filters": 4, "max_length": 6},
                   "output_mix": {"name": "scalar"}},
    "crf_tagger-lstm-chars": {"name": "crf_tagger", "hidden_dim": 8, "chars": {"name": "lstm", "hidden_dim": 4}},
    "sentence_classifier": {"name": "sentence_classifier", "hidden_dim": 8, "casing_dim": 2,
                            "chars": {"name": "cnn", "filters": 4}, "output_mix": {"name": "scalar"}},
    "token_tagger": {"name": "token_tagger", "hidden_dim": 8},
    "wsd_linear": {"name": "wsd_linear", "dropout": 0.1},
}


def test_every_head_is_covered():
    assert {v["name"] for v in HEAD_VARIANTS.values()} == set(HEADS.names())


FUSION_OF = {"crf_tagger": "scalar", "crf_tagger-lstm-chars": "layer_attention", "sentence_classifier": "gated",
             "token_tagger": "concat_project", "wsd_linear": "average"}  # every head, every fusion, once


def test_every_fusion_is_covered():
    assert set(FUSION_OF.values()) == set(FUSIONS.names())


@pytest.mark.parametrize("variant", list(HEAD_VARIANTS))
def test_head_and_mix_make_every_tensor_on_the_input_device(feature_env, variant, tmp_path):
    fusion = FUSION_OF[variant]
    mix = {"name": fusion, "layer_norm": "batch"} if fusion == "average" else {"name": fusion, "l2_coef": 0.01}
    torch.set_num_threads(1)
    head = HEAD_VARIANTS[variant]
    head_cls = HEADS.get(head["name"])
    examples = head_cls.demo_examples()
    features = {"name": "concat", "sources": [{"name": "static", "path": str(feature_env["glove"])},
                                              elmo_section(feature_env, mix=mix)]}
    cfg = resolve({"name": "dev", "data": {"reader": "tsv", "train": "unused"}, "features": features, "head": head,
                   "training": {"max_epochs": 1, "batch_size": 3, "lr": 0.01}})
    vocab = head_cls.build_vocab(resolve_head(cfg), examples, {})
    model = build_model(cfg, vocab, FeatureContext(progress=False))
    split = make_split(model, "train", examples)
    idx = list(range(len(examples)))

    def loss_and_grads():
        torch.manual_seed(1)
        model.zero_grad()
        loss = model.loss(split, idx)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    model.train()
    ref_loss, ref_grads = loss_and_grads()
    loss, grads = _no_default_device(loss_and_grads)
    assert loss.device.type == "cpu" and torch.allclose(loss, ref_loss)
    assert len(grads) == len(ref_grads) and all(torch.allclose(a, b) for a, b in zip(grads, ref_grads))
    ref_pred = predict(model, split, 2, progress=False)
    assert _no_default_device(lambda: predict(model, split, 2, progress=False)) == ref_pred


def resolve_head(cfg):
    return component_config(HEADS, cfg.head)


def test_model_and_batches_follow_context_device(feature_env, monkeypatch):
    """``build_model`` puts the model on ``context.device``; ``TaskModel.inputs`` moves the batch there."""
    head_cls = HEADS.get("crf_tagger")
    examples = head_cls.demo_examples()
    cfg = resolve({"name": "dev", "data": {"reader": "tsv", "train": "unused"},
                   "features": elmo_section(feature_env), "head": {"name": "crf_tagger", "hidden_dim": 4},
                   "training": {}})
    vocab = head_cls.build_vocab(resolve_head(cfg), examples, {})
    moved = []
    original = torch.nn.Module.to

    def spy(self, *args, **kw):
        moved.append(args[0] if args else kw.get("device"))
        return original(self, *args, **kw)

    monkeypatch.setattr(torch.nn.Module, "to", spy)
    model = build_model(cfg, vocab, FeatureContext(progress=False, device="cpu"))
    assert moved[-1] == "cpu" and module_device(model).type == "cpu"
    split = make_split(model, "train", examples)
    x, mask, _, _ = model.inputs(split, [0, 1])
    assert x.device == mask.device == module_device(model)


def test_move_to_and_module_device():
    batch = (torch.zeros(2), [torch.ones(1), {"a": torch.zeros(1)}], "text")
    moved = move_to(batch, torch.device("meta"))
    assert moved[0].device.type == "meta" and moved[1][1]["a"].device.type == "meta" and moved[2] == "text"
    assert module_device(torch.nn.Identity()).type == "cpu"
    assert module_device(torch.nn.Linear(2, 2, device="meta")).type == "meta"


def test_parse_device():
    assert parse_device("cpu") == torch.device("cpu") and parse_device(" CPU ") == torch.device("cpu")
    with pytest.raises(UsageError, match="unknown device 'tpu'; valid: cpu, cuda, cuda:N, mps"):
        parse_device("tpu")
    if NO_CUDA:
        with pytest.raises(UsageError, match="CUDA is not available"):
            parse_device("cuda:0")
    else:
        with pytest.raises(UsageError, match="CUDA device"):
            parse_device(f"cuda:{torch.cuda.device_count()}")
    mps = getattr(torch.backends, "mps", None)
    if mps is None or not mps.is_available():
        with pytest.raises(UsageError, match="MPS is not available"):
            parse_device("mps")


@pytest.mark.skipif(not NO_CUDA, reason="CUDA is available here: --device cuda is valid")
def test_unavailable_device_is_one_line_exit_2_in_every_command(tmp_path, capsys):
    env = make_env(tmp_path)
    text = tmp_path / "in.txt"
    text.write_text("John visited Berlin\n", encoding="utf-8")
    conf = tmp_path / "run.yaml"
    cfg = tagging_config(env)
    cfg["compare"] = {"sources": {"mix": elmo_section(env)}, "seeds": [1]}
    conf.write_text(yaml.safe_dump(cfg))
    commands = {
        "embed": ["embed", str(text), str(tmp_path / "out.hdf5"), "--options", str(env["options"]),
                  "--weights", str(env["weights"])],
        "run": ["run", str(conf), "--out", str(tmp_path / "run"), "--cache-dir", "none"],
        "compare": ["compare", str(conf), "--results-dir", str(tmp_path / "res"), "--runs-dir", str(tmp_path / "runs"),
                    "--cache-dir", "none"],
        "wsd": ["wsd", "--train", str(tmp_path), "--test", str(tmp_path), "--features", "none",
                "--wordnet", str(text), "--out", str(tmp_path / "wsd")],
    }
    for name, argv in commands.items():
        assert main([*argv, "--device", "cuda:1"]) == 2, name
        err = capsys.readouterr().err.strip()
        assert err == "error: --device cuda:1: CUDA is not available here (no GPU, or torch was built without " \
                      "CUDA); use --device cpu", (name, err)
    assert not (tmp_path / "run").exists() and not (tmp_path / "out.hdf5").exists()

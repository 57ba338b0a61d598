"""Layer fusions (elmo_tasks.features.fusion, docs/fusion.md): maths, parameter counts, l2-to-uniform, errors,
and every fusion end to end (train, save, reload with weights_only=True, identical predictions) with the
NER, sentiment and WSD heads, at the input and as a head's ``output_mix`` (ELMo sec. 3.3)."""
from __future__ import annotations

import json

import pytest
import torch

from test_tasks_helpers import elmo_section, make_bilm, make_glove
from elmo_features.util.errors import ConfigError
from elmo_tasks.components import component_config, resolve_component
from elmo_tasks.experiment.config import resolve
from elmo_tasks.experiment.run import build_model, load_run, predict_examples, run_experiment
from elmo_tasks.features.base import FeatureContext, build_features
from elmo_tasks.features.fusion import build_fusion
from elmo_tasks.registry import FEATURES, FUSIONS, HEADS
from elmo_tasks.experiment.training import Split

L, B, T, D = 3, 2, 5, 16
LEARNED = ["scalar", "layer_attention", "gated", "concat_project"]
DOCUMENTED = {  # docs/fusion.md and the elmo_tasks.features.fusion docstring
    "scalar": L + 1, "average": 0, "layer_attention": D + L + 1, "gated": L * D + 1,
    "concat_project": L * D * D + D,
}


def count_parameters(module) -> int:
    """Trainable scalars of a module (the check of each fusion's declared ``parameter_count``)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("fusion")
    opts, weights = make_bilm(tmp / "bilm")  # L = 3 layers of D = 16
    return {"options": opts, "weights": weights, "glove": make_glove(tmp / "glove.txt"), "tmp": tmp}


def fusion(name: str, **kw):
    return build_fusion(resolve_component(FUSIONS, {"name": name, **kw}, "mix"), L, D)


def inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    layers = torch.randn(L, B, T, D, generator=g) * torch.tensor([1.0, 3.0, 0.5]).view(L, 1, 1, 1) + 1.0
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)  # (B, T)
    return layers, mask


def perturb(module: torch.nn.Module, seed: int = 1) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g))


# ---------------------------------------------------------------- the fusions themselves

def test_registry_holds_every_fusion():
    assert FUSIONS.names() == sorted(DOCUMENTED) and FUSIONS.kind == "fusion"


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_parameter_count_is_the_documented_one(name):
    f = fusion(name)
    config = component_config(FUSIONS, resolve_component(FUSIONS, {"name": name}, "mix"))
    assert count_parameters(f) == DOCUMENTED[name] == FUSIONS.get(name).parameter_count(config, L, D)
    assert f.output_dim == D
    narrow = fusion("concat_project", output_dim=5)
    assert count_parameters(narrow) == L * D * 5 + 5 and narrow.output_dim == 5


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_every_fusion_starts_as_the_plain_average(name):
    layers, mask = inputs()
    out = fusion(name).eval()(layers, mask)
    assert out.shape == (B, T, D)
    assert torch.allclose(out, layers.mean(0), atol=1e-5)


def test_fusions_compute_what_the_docs_say():
    layers, mask = inputs()
    att = fusion("layer_attention")
    perturb(att)
    a = torch.softmax(torch.einsum("lbtd,d->btl", layers, att.query) / D**0.5 + att.bias, dim=-1)  # (B, T, L)
    want = att.gamma * (a.permute(2, 0, 1).unsqueeze(-1) * layers).sum(0)
    assert torch.allclose(att(layers, mask), want, atol=1e-5)
    assert not torch.allclose(a[0, 0], a[0, 1])  # each token has its own layer weights
    gated = fusion("gated")
    perturb(gated)
    want = gated.gamma * (2 / L) * (torch.sigmoid(gated.gates)[:, None, None, :] * layers).sum(0)
    assert torch.allclose(gated(layers, mask), want, atol=1e-5)
    cp = fusion("concat_project", output_dim=5)
    concat = torch.cat(list(layers), dim=-1)  # (B, T, L * D)
    assert torch.allclose(cp(layers, mask), cp.proj(concat), atol=1e-5)


@pytest.mark.parametrize("name", LEARNED)
def test_a_token_gets_the_same_vector_whatever_batch_it_is_in(name):
    layers, mask = inputs()
    f = fusion(name, layer_norm="token")
    perturb(f)
    f.eval()
    full = f(layers, mask)  # (B, T, D)
    alone = f(layers[:, 1:, :3], mask[1:, :3])  # sentence 2 (3 tokens) on its own
    assert torch.allclose(full[1, :3], alone[0], atol=1e-6)


@pytest.mark.parametrize("name", LEARNED)
def test_l2_pulls_toward_the_uniform_average(name):
    layers, mask = inputs()
    f = fusion(name, l2_coef=0.1)
    assert float(f.regularization().detach()) == 0.0  # at the average: no penalty
    perturb(f)
    assert float(f.regularization().detach()) > 0
    assert float(fusion(name).regularization().detach()) == 0.0  # l2_coef 0: never a penalty
    before = (f(layers, mask) - layers.mean(0)).abs().mean()
    opt = torch.optim.SGD(f.parameters(), lr=0.5)
    for _ in range(200):  # minimising the penalty alone brings the fusion back to the average
        opt.zero_grad()
        f.regularization().backward()
        opt.step()
    gamma = f.gamma.detach() if hasattr(f, "gamma") else 1.0  # gamma (a scale) is not penalised
    after = (f(layers, mask) - gamma * layers.mean(0)).abs().mean()
    assert float(after.detach()) < 0.05 * float(before.detach())


def test_l2_values_are_the_documented_ones():
    att = fusion("layer_attention", l2_coef=0.1)
    perturb(att)
    assert torch.isclose(att.regularization(), 0.1 * ((att.query**2).sum() + (att.bias**2).sum()))
    gated = fusion("gated", l2_coef=0.1)
    perturb(gated)
    assert torch.isclose(gated.regularization(), 0.1 * (gated.gates**2).sum())
    cp = fusion("concat_project", l2_coef=0.1)
    avg = torch.eye(D).repeat(1, L) / L  # (D, L * D)
    perturb(cp)
    want = 0.1 * (((cp.proj.weight - avg) ** 2).sum() + (cp.proj.bias**2).sum())
    assert torch.isclose(cp.regularization(), want)
    with pytest.raises(ConfigError, match="needs output_dim = the layer size 16"):
        fusion("concat_project", output_dim=5, l2_coef=0.1)


def test_layer_attention_reports_mean_attention_of_evaluated_tokens():
    layers, mask = inputs()
    att = fusion("layer_attention")
    perturb(att)
    att.train()
    att(layers, mask)
    assert "layer_weights" not in att.report()  # nothing evaluated yet
    att.eval()
    with torch.no_grad():
        att(layers, mask)
    r = att.report()
    a = att.attention(layers)[mask]  # (8, L)
    assert r["tokens"] == 8 and r["layer_weights"] == pytest.approx(a.mean(0).tolist(), abs=1e-5)
    assert sum(r["mean_attention"]) == pytest.approx(1.0, abs=1e-5)
    assert 0 < r["mean_entropy"] < r["uniform_entropy"]
    att.load_state_dict(att.state_dict())  # new weights: old statistics are dropped
    assert att.report()["tokens"] == 0
    assert not any("_att" in k or "_tokens" in k for k in att.state_dict())  # statistics are never saved


def test_reports_give_each_layers_share():
    for name in LEARNED:
        f = fusion(name)
        perturb(f)
        if name == "layer_attention":
            f.eval()
            f(*inputs())
        w = f.report()["layer_weights"]
        assert len(w) == L and sum(w) == pytest.approx(1.0, abs=1e-5) and min(w) >= 0


# ---------------------------------------------------------------- config errors

def tiny_config(env, features=None, head=None):
    return {"name": "fusion_demo", "data": {"reader": "tsv", "train": "unused"},
            "features": features or elmo_section(env), "head": head or {"name": "crf_tagger"},
            "training": {"max_epochs": 2, "batch_size": 3, "lr": 0.01}}


def test_unknown_fusion_names_list_the_valid_ones(env):
    valid = "valid fusion names: average, concat_project, gated, layer_attention, scalar"
    with pytest.raises(ConfigError, match=f"features.mix.name: unknown fusion 'attention' \\(did you mean layer_attention\\?\\); {valid}"):
        resolve(tiny_config(env, features=elmo_section(env, mix={"name": "attention"})))
    with pytest.raises(ConfigError, match=f"head.output_mix.name: unknown fusion 'gate' \\(did you mean gated\\?\\); {valid}"):
        resolve(tiny_config(env, head={"name": "crf_tagger", "output_mix": {"name": "gate"}}))
    with pytest.raises(ConfigError, match="unknown key 'outdim'; valid keys: name, layer_norm, output_dim, l2_coef"):
        resolve(tiny_config(env, features=elmo_section(env, mix={"name": "concat_project", "outdim": 4})))
    with pytest.raises(ConfigError, match="unknown key 'output_mix'"):  # only heads with a task RNN have it
        resolve(tiny_config(env, head={"name": "wsd_linear", "output_mix": {"name": "scalar"}}))


def test_output_mix_needs_a_source_with_layers(env, tmp_path):
    cfg = resolve(tiny_config(env, features={"name": "static", "path": str(env["glove"])},
                              head={"name": "crf_tagger", "output_mix": {"name": "scalar"}}))
    examples = HEADS.get("crf_tagger").demo_examples()
    with pytest.raises(ConfigError, match="head.output_mix: feature source StaticFeatures has no layers to fuse"):
        run_experiment(cfg, tmp_path / "run", FeatureContext(progress=False), progress=False,
                       examples={"train": examples})
    two = {"name": "concat", "sources": [elmo_section(env), elmo_section(env, mix={"name": "gated"})]}
    cfg = resolve(tiny_config(env, features=two, head={"name": "crf_tagger", "output_mix": {"name": "scalar"}}))
    with pytest.raises(ConfigError, match=r"members \[0, 1\] \(elmo, elmo\) all have layers"):
        run_experiment(cfg, tmp_path / "run2", FeatureContext(progress=False), progress=False,
                       examples={"train": examples})


# ---------------------------------------------------------------- end to end with the heads

def train_reload(env, tmp_path, head_name: str, features: dict, head_extra: dict | None = None):
    """Train 2 epochs on the head's demo examples, reload from disk, return (metrics, model, cfg, same?)."""
    examples = HEADS.get(head_name).demo_examples()
    cfg = resolve(tiny_config(env, features=features, head={"name": head_name, **(head_extra or {})}))
    ctx = FeatureContext(progress=False)
    metrics = run_experiment(cfg, tmp_path / "run", ctx, progress=False,
                             examples={"train": examples, "dev": examples, "test": examples})
    saved = json.loads((tmp_path / "run" / "predictions.json").read_text())["test"]
    cfg2, model = load_run(tmp_path / "run", ctx)  # torch.load(..., weights_only=True)
    assert cfg2.to_dict() == cfg.to_dict()
    again = predict_examples(cfg2, model, examples, progress=False)
    return metrics, model, again == saved


@pytest.mark.parametrize("head_name", ["crf_tagger", "sentence_classifier", "wsd_linear"])
@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_every_fusion_trains_saves_reloads_and_predicts_the_same(env, tmp_path, name, head_name):
    mix = {"name": name, **({"l2_coef": 0.01} if name in LEARNED else {})}
    metrics, model, same = train_reload(env, tmp_path, head_name, elmo_section(env, mix=mix))
    assert same
    feats = metrics["features"]
    assert feats["mix"] == name and feats["mix_parameters"] == DOCUMENTED[name]
    assert len(feats["layer_weights"]) == L and sum(feats["layer_weights"]) == pytest.approx(1.0, abs=1e-5)
    state = torch.load(tmp_path / "run" / "model.pt", weights_only=True)["state_dict"]
    fusion_keys = [k for k in state if k.startswith("features.mix.")]
    assert sum(state[k].numel() for k in fusion_keys) >= DOCUMENTED[name]  # (average: 4 frozen scalars)
    if name in LEARNED:  # the fusion was trained: it moved away from its initial state
        init = build_fusion(resolve_component(FUSIONS, mix, "mix"), L, D).state_dict()
        assert any(not torch.equal(state[f"features.mix.{k}"], v) for k, v in init.items())


@pytest.mark.parametrize("head_name", ["crf_tagger", "sentence_classifier"])
@pytest.mark.parametrize("out_mix", ["scalar", "gated"])
def test_output_mix_trains_saves_reloads_and_predicts_the_same(env, tmp_path, head_name, out_mix):
    features = {"name": "concat", "sources": [{"name": "static", "path": str(env["glove"])},
                                              elmo_section(env, mix={"name": "scalar"})]}
    out = {"name": out_mix, "l2_coef": 0.01}
    metrics, model, same = train_reload(env, tmp_path, head_name, features, {"output_mix": out})
    assert same
    K = len(model.head.labels)
    added = DOCUMENTED[out_mix] + D * K  # the separate fusion + its output weights (D -> K, no bias)
    assert count_parameters(model.head.output_mix) == added
    base_cfg = resolve(tiny_config(env, features=features, head={"name": head_name}))
    base = build_model(base_cfg, model.head.vocab, FeatureContext(progress=False))
    assert metrics["trainable_parameters"] - count_parameters(base) == added
    r = model.head.report()["output_mix"]
    assert r["name"] == out_mix and r["parameters"] == added and len(r["layer_weights"]) == L
    # a separate fusion with its own trained weights, next to the input mix
    state = torch.load(tmp_path / "run" / "model.pt", weights_only=True)["state_dict"]
    init = build_fusion(resolve_component(FUSIONS, out, "mix"), L, D).state_dict()
    assert any(not torch.equal(state[f"head.output_mix.fusion.{k}"], v) for k, v in init.items())
    assert "features.sources.1.mix.weights" in state
    if out_mix == "scalar":
        assert not torch.equal(state["features.sources.1.mix.weights"], state["head.output_mix.fusion.weights"])


def test_a_narrower_concat_project_feeds_the_head_its_own_output_dim(env, tmp_path):
    mix = {"name": "concat_project", "output_dim": 5}
    metrics, model, same = train_reload(env, tmp_path, "sentence_classifier", elmo_section(env, mix=mix))
    assert same and model.head.input_dim == 5 and metrics["features"]["mix_parameters"] == L * D * 5 + 5


def test_output_mix_is_the_output_layer_on_the_concatenation(env):
    """emit([h; m]) written as emit(h) + out(m); the head's l2 penalty is added to the training loss."""
    cfg = resolve(tiny_config(env, features=elmo_section(env, mix={"name": "scalar"}),
                              head={"name": "crf_tagger", "hidden_dim": 4, "dropout": 0.0,
                                    "output_mix": {"name": "scalar", "l2_coef": 0.5}}))
    examples = HEADS.get("crf_tagger").demo_examples()
    head_cls = HEADS.get("crf_tagger")
    vocab = head_cls.build_vocab(head_cls.Config(), examples, {})
    model = build_model(cfg, vocab, FeatureContext(progress=False))
    model.eval()
    split = Split("x", examples, model.features.precompute([ex.tokens for ex in examples], "x"))
    x, mask, _, extra = model.inputs(split, [0, 1])
    assert extra["layers"].shape[:2] == (L, 2)
    head = model.head
    perturb(head.output_mix.fusion)
    h = head.encoder(x, mask)
    m = head.output_mix.fusion(extra["layers"], mask)
    W = torch.cat([head.emit.weight, head.output_mix.out.weight], dim=1)  # (K, H + D)
    want = torch.cat([h, m], dim=-1) @ W.T + head.emit.bias
    assert torch.allclose(head.emissions(x, mask, extra["layers"]), want, atol=1e-5)
    with pytest.raises(ValueError, match="call it with layers="):
        head.emissions(x, mask)
    reg = head.regularization()
    assert float(reg.detach()) > 0
    assert torch.isclose(model.loss(split, [0, 1]), head.loss(x, mask, examples[:2], **extra) + reg)


def test_output_mix_on_a_fixed_layer_source_fuses_that_one_layer(env):
    section = resolve_component(FEATURES, elmo_section(env, layer=2), "features")
    src = build_features(section, FeatureContext(progress=False))
    assert src.fusion_layers() == (1, D)
    batch = src.collate(src.precompute([["a", "b"]], "x"), 2)
    assert src.layers(batch).shape == (1, 1, 2, D)

"""precision="bf16": refusal without AVX512-BF16/AMX, error vs fp32 (emulated here), batch invariance, cache keys."""
import numpy as np
import pytest
import torch

from elmo_features import (BiLM, BiLMOptions, Embedder, FeatureCache, TokenCache, batch_to_ids, bilm_fingerprint,
                           load_bilm)
from elmo_features.model import precision as P
from elmo_features.util.errors import ElmoTasksError, UsageError

TINY = {
    "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8], [3, 16]], "n_highway": 1},
    "lstm": {"dim": 16, "projection_dim": 8, "n_layers": 2, "cell_clip": 3, "proj_clip": 3},
}
TINY_TRANSFORMER = {
    "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8], [3, 16]], "n_highway": 1},
    "backbone": "transformer",
    "transformer": {"dim": 8, "n_layers": 2, "n_heads": 2, "ff_dim": 16, "max_positions": 8, "chunk_overlap": 3},
}
SENTS = [["The", "cat", "sat", "on", "the", "mat", "."], ["a"], ["Ünïcode", "wörds", "here"],
         ["x"] * 13, ["hello", "world", "!"], ["one", "two", "three", "four", "five"]]
# Documented in docs/precision.md: per layer, max |bf16 - fp32| <= REL_BOUND * max |fp32|.
REL_BOUND = 0.02


@pytest.fixture(autouse=True)
def _setup(monkeypatch):
    torch.set_num_threads(1)
    monkeypatch.delenv(P.EMULATE_ENV, raising=False)


def tiny_bilm(options=TINY, seed=0):
    torch.manual_seed(seed)
    model = BiLM(BiLMOptions.from_dict(options)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def no_bf16_cpu(monkeypatch):
    monkeypatch.setattr(P, "bf16_cpu_support", lambda: (False, "Test CPU: no avx512_bf16, no amx_bf16"))


def layer_errors(ref, out):
    """Per layer: (max abs error, max abs error / max |ref|) over all sentences."""
    errs = []
    for k in range(ref[0].shape[0]):
        a = np.concatenate([r[k].ravel() for r in ref])
        b = np.concatenate([o[k].ravel() for o in out])
        d = float(np.abs(a - b).max())
        errs.append((d, d / float(np.abs(a).max())))
    return errs


def test_unknown_precision_is_a_usage_error():
    with pytest.raises(UsageError, match="valid: fp32, bf16"):
        P.check_precision("fp16")
    with pytest.raises(UsageError, match="valid: fp32, bf16"):
        Embedder(tiny_bilm(), precision="float16")


def test_bf16_refused_on_a_cpu_without_bf16(monkeypatch):
    no_bf16_cpu(monkeypatch)
    bilm = tiny_bilm()
    for call in (lambda: P.set_precision(bilm, "bf16"), lambda: Embedder(bilm, precision="bf16")):
        with pytest.raises(P.PrecisionError) as e:
            call()
        msg = str(e.value)
        assert isinstance(e.value, ElmoTasksError) and "\n" not in msg
        assert "AVX512-BF16 or AMX" in msg and "Test CPU" in msg and "fp32" in msg
    assert P.precision_of(bilm) == "fp32"  # nothing was changed
    assert P.check_precision("fp32") == "fp32"
    assert P.check_precision("bf16", "cuda") == "cuda"  # CUDA devices are allowed
    monkeypatch.setenv(P.EMULATE_ENV, "1")  # the test-only escape hatch
    assert P.check_precision("bf16") == "emulated"


def test_bf16_allowed_on_a_cpu_with_bf16(monkeypatch):
    """With the flags present the native path is chosen; here it runs torch's (slow, unaccelerated) bf16
    matmul, which must agree with the emulation up to summation order (one bf16 rounding step)."""
    monkeypatch.setattr(P, "bf16_cpu_support", lambda: (True, "Test CPU: has avx512_bf16, has amx_bf16"))
    assert P.check_precision("bf16") == "cpu"
    bilm = tiny_bilm()
    P.set_precision(bilm, "bf16")
    assert P.precision_of(bilm) == "bf16" and P.precision_of(bilm.lstm.forward_layers[0]) == "bf16"
    native = Embedder(bilm, progress=False).embed_sentences(SENTS)
    assert bilm.char_cnn.highway._packed()[0].mode == "cpu"
    P.set_precision(bilm, "bf16", force_emulated=True)
    emulated = Embedder(bilm, progress=False).embed_sentences(SENTS)
    for d, rel in layer_errors(emulated, native):
        assert rel < 0.01, (d, rel)


def test_cpu_flags_are_read_from_proc_cpuinfo(monkeypatch):
    monkeypatch.setattr(P, "cpu_info", lambda: ("Fake Xeon", frozenset({"avx2", "avx512f", "amx_bf16"})))
    ok, what = P.bf16_cpu_support()
    assert ok and what == "Fake Xeon: no avx512_bf16, has amx_bf16"
    monkeypatch.setattr(P, "cpu_info", lambda: ("Fake EPYC", frozenset({"avx2", "fma"})))
    assert P.bf16_cpu_support() == (False, "Fake EPYC: no avx512_bf16, no amx_bf16")


def test_bf16_linear_is_bf16_gemm_with_fp32_accumulation():
    """Emulated Bf16Linear == bf16-rounded operands, exact products, fp32 sums, result rounded to bf16."""
    g = torch.Generator().manual_seed(0)
    w, b, x = torch.randn(24, 40, generator=g), torch.randn(24, generator=g), torch.randn(7, 40, generator=g)
    lin = P.Bf16Linear(w, b, "emulated")
    exact = x.bfloat16().double() @ w.bfloat16().double().t()  # (7, 24) float64: no rounding of sums
    expect = exact.float().bfloat16().float() + b
    y = lin(x)
    assert y.dtype == torch.float32
    assert torch.allclose(y, expect, rtol=2 ** -7, atol=1e-6)  # at most a 1-ulp bf16 difference
    assert not torch.allclose(y, x @ w.t() + b, rtol=1e-5, atol=1e-5)  # it really is reduced precision
    other = torch.randn(7, 24, generator=g)
    assert torch.equal(lin.add_to(x, other), lin(x) - b + other) or torch.allclose(
        lin.add_to(x, other), lin(x) - b + other, atol=1e-6)


@pytest.mark.parametrize("options", [TINY, TINY_TRANSFORMER], ids=["lstm", "transformer"])
def test_bf16_error_vs_fp32_on_a_tiny_random_model(options):
    bilm = tiny_bilm(options)
    ref = Embedder(bilm, progress=False).embed_sentences(SENTS)
    fp_fp32 = bilm_fingerprint(bilm)
    P.set_precision(bilm, "bf16", force_emulated=True)
    out = Embedder(bilm, progress=False).embed_sentences(SENTS)
    assert all(o.dtype == np.float32 and o.shape == r.shape for o, r in zip(out, ref))
    errs = layer_errors(ref, out)
    assert all(rel < REL_BOUND for _, rel in errs), errs
    assert max(d for d, _ in errs) > 1e-5  # bf16 really ran (fp32 paths agree to ~1e-7)
    assert bilm_fingerprint(bilm) != fp_fp32
    P.set_precision(bilm, "fp32")
    assert bilm_fingerprint(bilm) == fp_fp32
    again = Embedder(bilm, progress=False).embed_sentences(SENTS)
    assert max(float(np.abs(a - r).max()) for a, r in zip(again, ref)) < 1e-6  # back to fp32 exactly


def test_bf16_batch_invariance():
    """A sentence gets the same bf16 vectors alone, in a batch, with or without the token cache."""
    bilm = tiny_bilm()
    P.set_precision(bilm, "bf16", force_emulated=True)
    batched = Embedder(bilm, progress=False).embed_sentences(SENTS)
    alone = Embedder(bilm, batch_size=1, token_cache=False, progress=False).embed_sentences(SENTS)
    reversed_ = Embedder(bilm, batch_size=4, progress=False, sort=False).embed_sentences(SENTS[::-1])[::-1]
    for a, b, c in zip(batched, alone, reversed_):
        assert np.array_equal(a, b) and np.array_equal(a, c), (np.abs(a - b).max(), np.abs(a - c).max())


def test_bf16_features_are_cached_apart_from_fp32(tmp_path):
    bilm = tiny_bilm()
    cache = FeatureCache(tmp_path)
    fp32 = cache.embed(Embedder(bilm, progress=False), SENTS)
    e16 = Embedder(bilm, progress=False)
    P.set_precision(bilm, "bf16", force_emulated=True)
    bf16 = cache.embed(e16, SENTS)
    assert cache.computed == 2  # the fp32 entry was not served
    assert max(float(np.abs(a - b).max()) for a, b in zip(fp32, bf16)) > 1e-5
    P.set_precision(bilm, "fp32")
    assert cache.embed(Embedder(bilm, progress=False), SENTS)[0].tobytes() == fp32[0].tobytes()
    assert cache.computed == 2  # the fp32 entry is still there and used


def test_token_cache_follows_the_precision():
    bilm = tiny_bilm()
    tc = TokenCache(bilm)
    a = tc.lookup(SENTS[:1]).clone()
    P.set_precision(bilm, "bf16", force_emulated=True)
    b = tc.lookup(SENTS[:1])
    assert not torch.equal(a, b)
    with torch.inference_mode():
        direct = bilm.char_cnn(batch_to_ids(SENTS[:1])[0])  # (n, P) in bf16
    assert torch.equal(b[0], direct)


def test_load_bilm_precision(tmp_path, monkeypatch):
    from elmo_features import save_bilm

    o, w = tmp_path / "options.json", tmp_path / "weights.hdf5"
    save_bilm(tiny_bilm(), o, w)
    no_bf16_cpu(monkeypatch)
    with pytest.raises(P.PrecisionError):
        load_bilm(o, w, precision="bf16")
    with pytest.raises(UsageError):
        load_bilm(o, w, precision="half")
    monkeypatch.setenv(P.EMULATE_ENV, "1")
    assert P.precision_of(load_bilm(o, w, precision="bf16")) == "bf16"
    assert P.precision_of(load_bilm(o, w)) == "fp32"


def test_bf16_error_vs_fp32_on_the_tf_fixture(fixture_dir):
    """Trained weights (AllenNLP's tiny ELMo): measured rel 2e-3 .. 6e-3 per layer (docs/precision.md)."""
    import json

    s = json.loads((fixture_dir / "sentences.json").read_text(encoding="utf-8"))
    sents = [line.split() for group in s for line in group]
    bilm = load_bilm(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5")
    ref = Embedder(bilm, progress=False).embed_sentences(sents)
    P.set_precision(bilm, "bf16", force_emulated=True)
    out = Embedder(bilm, progress=False).embed_sentences(sents)
    errs = layer_errors(ref, out)
    assert all(rel < REL_BOUND / 2 for _, rel in errs), errs
    assert np.abs(np.concatenate([(o - r).ravel() for o, r in zip(out, ref)])).mean() < 5e-3


def test_embed_cli_precision(tmp_path, monkeypatch, capsys):
    from elmo_features import save_bilm
    from elmo_tasks.cli import main

    o, w = tmp_path / "options.json", tmp_path / "weights.hdf5"
    save_bilm(tiny_bilm(), o, w)
    inp = tmp_path / "in.txt"
    inp.write_text("\n".join(" ".join(s) for s in SENTS) + "\n", encoding="utf-8")
    base = ["embed", str(inp), "--options", str(o), "--weights", str(w)]
    no_bf16_cpu(monkeypatch)
    assert main([*base[:2], str(tmp_path / "a.hdf5"), *base[2:], "--precision", "bf16"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: precision bf16 needs a CPU with AVX512-BF16 or AMX") and "\n" not in err
    assert not (tmp_path / "a.hdf5").exists()
    monkeypatch.setenv(P.EMULATE_ENV, "1")
    assert main([*base[:2], str(tmp_path / "bf16.hdf5"), *base[2:], "--precision", "bf16"]) == 0
    assert main([*base[:2], str(tmp_path / "fp32.hdf5"), *base[2:]]) == 0
    import h5py

    with h5py.File(tmp_path / "bf16.hdf5", "r") as f16, h5py.File(tmp_path / "fp32.hdf5", "r") as f32:
        for i in range(len(SENTS)):
            a, b = f16[str(i)][...], f32[str(i)][...]
            assert a.dtype == np.float32 and a.shape == b.shape
            assert 0 < np.abs(a - b).max() < REL_BOUND * np.abs(b).max()


native_bf16 = pytest.mark.skipif(not P.bf16_cpu_support()[0] and not torch.cuda.is_available(),
                                 reason="needs a CPU with AVX512-BF16/AMX or a CUDA device (native bf16 kernels)")


@native_bf16
def test_native_bf16_matches_the_emulation_and_is_batch_invariant():
    """On bf16 hardware: the native kernels agree with the emulation (up to summation order) and a sentence
    gets the same vectors whatever batch it is in."""
    device = "cpu" if P.bf16_cpu_support()[0] else "cuda"
    bilm = tiny_bilm().to(device)
    P.set_precision(bilm, "bf16")
    batched = Embedder(bilm, progress=False).embed_sentences(SENTS)
    alone = Embedder(bilm, batch_size=1, token_cache=False, progress=False).embed_sentences(SENTS)
    for a, b in zip(batched, alone):
        assert np.allclose(a, b, rtol=0, atol=1e-6), float(np.abs(a - b).max())
    P.set_precision(bilm.cpu(), "bf16", force_emulated=True)
    emulated = Embedder(bilm, progress=False).embed_sentences(SENTS)
    assert all(rel < 0.01 for _, rel in layer_errors(emulated, batched))

"""``precision: fp32 | bf16 | auto`` of Transformer sources: ``auto`` follows the CPU's bf16 flags (mocked here), fp32
stays the default and gives the plain forward pass's vectors bit for bit, bf16 vectors are close to fp32 ones, and
the resolved precision keys the feature cache, the fingerprint and the run's report. Tiny random BERTs built
in-process (tests/encoder_helpers.py); the MiniLM check runs when ``minilm-l6`` was fetched."""
from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch

from encoder_helpers import make_bert
from elmo_features import FeatureCache
from elmo_features.encoders import TransformerEmbedder, load_encoder
from elmo_features.encoders.packaged import encoders_cache_dir, get_packaged, installed_folder
from elmo_features.encoders.pieces import pool_pieces
from elmo_features.encoders.precision import resolve_encoder_precision
from elmo_features.model import precision as P
from elmo_features.util.errors import ConfigError, UsageError
from elmo_tasks.cli import main
from elmo_tasks.components import resolve_component
from elmo_tasks.features.base import FeatureContext, build_features
from elmo_tasks.registry import FEATURES

SENTS = [["John", "lives", "in", "Paris"], ["the", "comfortable", "bank", "of", "the", "river", "is", "big", "."],
         ["Acme", "rocks"], ["money", "went", "to", "new", "york", "unbelievably"]]
NATIVE = (True, "Test CPU: has avx512_bf16, no amx_bf16")
NO_BF16 = (False, "Test CPU: no avx512_bf16, no amx_bf16")


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    torch.set_num_threads(1)
    return make_bert(tmp_path_factory.mktemp("bf16") / "bert", hidden=32)


@pytest.fixture(scope="module")
def encoder(bert):
    return load_encoder(str(bert))


def cpu(monkeypatch, support) -> None:
    """This test's CPU: native bf16 or not (the one function that reads /proc/cpuinfo's flags, mocked)."""
    monkeypatch.setattr(P, "bf16_cpu_support", lambda: support)
    monkeypatch.delenv(P.EMULATE_ENV, raising=False)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of each pair of vectors of a and b, (L, n, D) -> (L, n)."""
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def test_auto_takes_bf16_only_where_the_cpu_has_it(monkeypatch, encoder):
    cpu(monkeypatch, NO_BF16)
    assert resolve_encoder_precision("auto") == "fp32"
    plain = TransformerEmbedder(encoder)
    auto = TransformerEmbedder(encoder, precision="auto")
    assert auto.precision == "fp32" and auto.fingerprint == plain.fingerprint
    cpu(monkeypatch, NATIVE)
    assert resolve_encoder_precision("auto") == "bf16"
    auto = TransformerEmbedder(encoder, precision="auto")
    assert auto.precision == "bf16" and auto.bf16_hardware == "has avx512_bf16, no amx_bf16"
    assert auto.fingerprint != plain.fingerprint
    assert auto.fingerprint == TransformerEmbedder(encoder, precision="bf16").fingerprint
    cpu(monkeypatch, (True, "Test CPU: no avx512_bf16, has amx_bf16"))  # other kernels: another cache entry
    assert TransformerEmbedder(encoder, precision="bf16").fingerprint != auto.fingerprint
    cpu(monkeypatch, NO_BF16)
    assert TransformerEmbedder(encoder, precision="fp32").fingerprint == plain.fingerprint  # fp32 whatever the CPU


def test_bf16_without_native_support_is_refused_unless_emulated(monkeypatch, encoder):
    cpu(monkeypatch, NO_BF16)
    with pytest.raises(P.PrecisionError, match="AVX512-BF16 or AMX.*fp32"):
        TransformerEmbedder(encoder, precision="bf16")
    monkeypatch.setenv(P.EMULATE_ENV, "1")
    emb = TransformerEmbedder(encoder, precision="bf16")
    assert emb.precision == "bf16" and emb.bf16_hardware.endswith("(emulated)")
    with pytest.raises(UsageError, match="'fp16'.*valid: fp32, bf16, auto"):
        TransformerEmbedder(encoder, precision="fp16")


def test_fp32_default_is_the_plain_forward_pass_bit_for_bit(encoder):
    """Default and explicit fp32 give exactly the vectors of the model's own forward pass, pooled (no autocast)."""
    arrays = TransformerEmbedder(encoder, batch_size=1).embed_sentences(SENTS)
    again = TransformerEmbedder(encoder, batch_size=1, precision="fp32").embed_sentences(SENTS)
    tok, model = encoder.tokenizer, encoder.model
    for s, a, b in zip(SENTS, arrays, again):
        enc = tok([s], is_split_into_words=True, return_tensors="pt")
        slot = torch.tensor([-1 if w is None else w for w in enc.word_ids(0)])  # (P,)
        with torch.inference_mode():
            hidden = model(**enc, output_hidden_states=True).hidden_states  # L x (1, P, D)
        ref = torch.cat([pool_pieces(h, slot, len(s), "mean")[0] for h in hidden]).numpy()  # (L, n, D)
        assert a.dtype == np.float32 and np.array_equal(a, ref) and np.array_equal(b, ref)


def test_bf16_vectors_are_close_to_fp32_and_stay_float32(monkeypatch, encoder):
    cpu(monkeypatch, NATIVE)  # (on a CPU without bf16 torch emulates it: the same roundings, slowly)
    ref = TransformerEmbedder(encoder).embed_sentences(SENTS)
    low = TransformerEmbedder(encoder, precision="bf16").embed_sentences(SENTS)
    for r, a in zip(ref, low):
        assert a.dtype == np.float32 and a.shape == r.shape
        assert not np.array_equal(a[1:], r[1:])  # bf16 really ran (the layers after the embedding output move)
        assert cosines(r, a).min() > 0.999


def test_bf16_casts_the_linear_weights_once_with_autocasts_numbers(monkeypatch, encoder):
    """bf16 gives the vectors of the model's own forward pass under autocast, bit for bit, although its linear
    weights are cast once rather than at each call; an edit of a weight after the first batch is followed."""
    cpu(monkeypatch, NATIVE)
    tok, model = encoder.tokenizer, encoder.model
    emb = TransformerEmbedder(encoder, batch_size=1, precision="bf16")

    def autocast_ref(s):
        enc = tok([s], is_split_into_words=True, return_tensors="pt")
        slot = torch.tensor([-1 if w is None else w for w in enc.word_ids(0)])  # (P,)
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            hidden = model(**enc, output_hidden_states=True).hidden_states  # L x (1, P, D)
        return torch.cat([pool_pieces(h.float(), slot, len(s), "mean")[0] for h in hidden]).numpy()  # (L, n, D)

    first = emb.embed_sentences(SENTS)
    for s, a in zip(SENTS, first):
        assert np.array_equal(a, autocast_ref(s))
    linear = next(m for m in model.modules() if isinstance(m, torch.nn.Linear))
    saved = linear.weight.detach().clone()
    try:
        with torch.no_grad():
            linear.weight.mul_(3.0)
        again = emb.embed_sentences(SENTS[:1])[0]
        assert np.array_equal(again, autocast_ref(SENTS[0])) and not np.array_equal(again, first[0])
    finally:
        with torch.no_grad():
            linear.weight.copy_(saved)


def _minilm_folder():
    found = installed_folder(get_packaged("minilm-l6"))
    cached = encoders_cache_dir() / "minilm-l6"
    return found or (cached if (cached / "SOURCE.md").is_file() else None)


def test_minilm_bf16_cosine_to_fp32(monkeypatch):
    folder = _minilm_folder()
    if folder is None:
        pytest.skip("minilm-l6 is not fetched (elmo-tasks models get minilm-l6)")
    cpu(monkeypatch, NATIVE)
    enc = load_encoder(str(folder))
    ref = TransformerEmbedder(enc).embed_sentences(SENTS)
    low = TransformerEmbedder(enc, precision="bf16").embed_sentences(SENTS)
    worst = min(float(cosines(r, a).min()) for r, a in zip(ref, low))
    assert worst > 0.999, f"min cosine bf16 vs fp32 {worst}"


def _source(bert, **kw):
    return resolve_component(FEATURES, {"name": "transformer", "model": str(bert), "layer": 2, **kw}, "features")


def test_config_precision_is_checked_and_keys_the_cache_and_report(monkeypatch, bert, tmp_path):
    with pytest.raises(ConfigError, match="precision.*fp32.*bf16.*auto"):
        _source(bert, precision="fp16")
    cpu(monkeypatch, NATIVE)
    sources = {p: build_features(_source(bert, precision=p), FeatureContext(cache_dir=tmp_path, progress=False))
               for p in ("fp32", "bf16", "auto")}
    items = {p: s.precompute(SENTS, "test") for p, s in sources.items()}
    assert len(list(tmp_path.glob("*.hdf5"))) == 2  # fp32 and bf16 never share an entry; auto here is bf16
    assert sources["auto"].fingerprint == sources["bf16"].fingerprint != sources["fp32"].fingerprint
    for a, b in zip(items["auto"], items["bf16"]):
        assert np.array_equal(a, b)
    rep = sources["auto"].report()
    assert (rep["precision"], rep["precision_setting"], rep["bf16_hardware"]) == ("bf16", "auto",
                                                                                 "has avx512_bf16, no amx_bf16")
    assert sources["fp32"].report()["precision"] == "fp32" and sources["fp32"].report()["bf16_hardware"] is None
    cpu(monkeypatch, NO_BF16)
    auto = build_features(_source(bert, precision="auto"), FeatureContext(cache_dir=tmp_path, progress=False))
    assert auto.fingerprint == sources["fp32"].fingerprint  # auto without native bf16: the fp32 cache entry


def test_embed_cli_precision(monkeypatch, bert, encoder, tmp_path, capsys):
    inp = tmp_path / "in.txt"
    inp.write_text("\n".join(" ".join(s) for s in SENTS) + "\n", encoding="utf-8")
    ref = TransformerEmbedder(encoder).embed_sentences(SENTS)
    cpu(monkeypatch, NO_BF16)
    assert main(["embed", str(inp), str(tmp_path / "auto.hdf5"), "--transformer", str(bert), "--precision",
                 "auto"]) == 0
    assert "precision auto: fp32" in capsys.readouterr().err
    with h5py.File(tmp_path / "auto.hdf5", "r") as f:
        assert all(np.array_equal(f[str(i)][...], r) for i, r in enumerate(ref))
    assert main(["embed", str(inp), str(tmp_path / "b.hdf5"), "--transformer", str(bert), "--precision", "bf16"]) == 2
    assert "AVX512-BF16 or AMX" in capsys.readouterr().err
    cpu(monkeypatch, NATIVE)
    assert main(["embed", str(inp), str(tmp_path / "auto16.hdf5"), "--transformer", str(bert), "--precision",
                 "auto"]) == 0
    assert "precision auto: bf16 (has avx512_bf16, no amx_bf16)" in capsys.readouterr().err
    with h5py.File(tmp_path / "auto16.hdf5", "r") as f:
        assert min(float(cosines(f[str(i)][...], r).min()) for i, r in enumerate(ref)) > 0.999
    assert main(["embed", str(inp), str(tmp_path / "r.hdf5"), "--transformer", str(bert), "--precision",
                 "reference"]) == 2
    err = capsys.readouterr().err
    assert "--precision reference applies to a biLM" in err and "Traceback" not in err
    assert main(["embed", str(inp), str(tmp_path / "m.hdf5"), "--precision", "auto"]) == 2
    assert "--precision auto applies to --transformer" in capsys.readouterr().err

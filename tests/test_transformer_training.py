"""Training a Transformer biLM with ``train-bilm``: it learns, the training path is the runtime path, export
loads back exactly, resume is exact, and config mistakes are one-line errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml

from elmo_features import batch_to_ids, load_bilm
from elmo_features.training.config import TRANSFORMER_KEYS, TrainConfig
from elmo_features.training.data import make_batch, type_char_ids
from elmo_features.training.trainer import Trainer
from test_training import _cfg

# W = 8 < the 10 tokens (with <S>, </S>) of the corpus sentences: training also runs the long-sentence windows
TRANSFORMER = dict(backbone="transformer", transformer_heads=2, transformer_ff_dim=16, transformer_max_positions=8,
                   transformer_chunk_overlap=3)


def test_transformer_learns_and_training_path_equals_runtime(tmp_path):
    tr = Trainer(_cfg(tmp_path, **TRANSFORMER), progress=False)
    before = tr.evaluate()["mean"]
    tr.run()
    after = tr.state["history"][-1]["mean"]
    assert after < 0.5 * before, (before, after)
    exp = tmp_path / "run" / "export"
    bilm = load_bilm(exp / "options.json", exp / "weights.hdf5")
    assert bilm.options.backbone == "transformer" and bilm.options.transformer.max_positions == 8
    sents = [["the", "red", "cat", "sat"], ["a", "dog", "ran", "quickly", "under", "the", "log", "on", "the", "mat"],
             ["unseen"]]
    model = tr.model.eval()
    with torch.no_grad():
        want = model.bilm(batch_to_ids(sents)).layers  # (L, B, T, D) at training time
        got = bilm(batch_to_ids(sents)).layers  # after export -> load
        assert torch.allclose(want, got, atol=1e-6, rtol=0)
        index = {"<S>": 0, "</S>": 1}
        ids = [np.array([index.setdefault(w, len(index)) for w in s], dtype=np.int32) for s in sents]
        type_ids, lengths = make_batch(ids, np.arange(len(ids)))
        top = model.hidden_states(type_ids, lengths, torch.from_numpy(type_char_ids(list(index))))  # (B, T+2, D)
        for i, s in enumerate(sents):
            assert torch.allclose(top[i, 1 : len(s) + 1], got[-1, i, : len(s)], atol=1e-6, rtol=0)


def test_transformer_resume_is_bit_for_bit(tmp_path, monkeypatch):
    kw = dict(TRANSFORMER, max_train_tokens=1500, eval_every_tokens=700)
    ref = Trainer(_cfg(tmp_path / "a", **kw), progress=False)
    ref.run()
    cfg = _cfg(tmp_path / "b", **kw)
    original = Trainer.train_step

    def stop_after_3(self, idx):
        out = original(self, idx)
        if self.state["step"] == 2:  # counted after this call returns: stops after 3 steps
            self._stop = True
        return out

    monkeypatch.setattr(Trainer, "train_step", stop_after_3)
    assert not Trainer(cfg, progress=False).run()["finished"]
    monkeypatch.setattr(Trainer, "train_step", original)
    with pytest.raises(ValueError, match="was trained with backbone 'transformer', but the config says 'lstm'"):
        Trainer(_cfg(tmp_path / "b"), resume=True, progress=False)
    resumed = Trainer(cfg, resume=True, progress=False)
    assert resumed.run()["finished"]
    a, b = ref.model.state_dict(), resumed.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("override, message", [
    ("backbone=gru", "backbone: must be one of 'lstm', 'transformer', got 'gru'"),
    ("transformer_heads=3", "projection_dim (8) must be a multiple of transformer_heads (3)"),
    ("transformer_chunk_overlap=8", "transformer_chunk_overlap must be in [0, transformer_max_positions=8)"),
    ("transformer_max_positions=2", "transformer_max_positions: must be >= 3, got 2"),
])
def test_bad_backbone_config_is_one_line_exit_2(tmp_path, capsys, override, message):
    from elmo_tasks.cli import main

    cfg = _cfg(tmp_path, **TRANSFORMER)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg.to_dict()))
    assert main(["train-bilm", "--config", str(path), "--set", override, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err and str(path) in err
    assert not (tmp_path / "run").exists()


def test_config_defaults_build_a_valid_transformer():
    o = TrainConfig.from_dict({"backbone": "transformer"}).elmo_options()
    assert "lstm" not in o and o["transformer"]["dim"] == 128 and o["transformer"]["n_heads"] == 4


def test_the_transformer_block_comes_from_the_keys_its_errors_name():
    """``TRANSFORMER_KEYS`` names train-bilm's key for each key of the options' transformer block in its errors:
    it must be the key the block's value comes from."""
    cfg = TrainConfig.from_dict({"backbone": "transformer", "projection_dim": 12, "n_layers": 3, "transformer_heads": 2,
                                 "transformer_ff_dim": 20, "transformer_max_positions": 40,
                                 "transformer_chunk_overlap": 7})
    block = cfg.elmo_options()["transformer"]
    assert {k: block[k] for k in TRANSFORMER_KEYS} == {k: getattr(cfg, name) for k, name in TRANSFORMER_KEYS.items()}


def test_transformer_with_token_vectors_exports_and_loads(tmp_path):
    from test_token_vectors import _vectors

    tr = Trainer(_cfg(tmp_path, max_train_tokens=400, token_vectors=str(_vectors(tmp_path / "vec")), **TRANSFORMER),
                 progress=False)
    tr.run()
    exp = tmp_path / "run" / "export"
    bilm = load_bilm(exp / "options.json", exp / "weights.hdf5")
    assert bilm.options.token_vectors.dim == 6 and bilm.char_cnn.vector_dim == 6
    ids = batch_to_ids([["The", "red", "cat", "sat"], ["a", "dog"]])
    with torch.no_grad():
        assert torch.allclose(tr.model.eval().bilm(ids).layers, bilm(ids).layers, atol=1e-6, rtol=0)

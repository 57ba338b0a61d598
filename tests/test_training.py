"""biLM trainer: it learns, resumes bit for bit, and its export loads back exactly."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from elmo_features import batch_to_ids, load_bilm
from elmo_features.training.config import TrainConfig
from elmo_features.training.data import make_batch
from elmo_features.training.trainer import Trainer

WORDS = "the a cat dog sat ran on under mat log big small red quickly slowly and".split()


def _corpus(path, n=300, seed=0):
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        # a tiny grammar, so that there is something to learn
        lines.append(" ".join(["the", rng.choice(["big", "small", "red"]), rng.choice(["cat", "dog"]),
                               rng.choice(["sat", "ran"]), rng.choice(["on", "under"]), "the",
                               rng.choice(["mat", "log"]), "."]))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _cfg(tmp_path, **kw) -> TrainConfig:
    tmp_path.mkdir(parents=True, exist_ok=True)
    train = _corpus(tmp_path / "train.txt")
    held = _corpus(tmp_path / "held.txt", n=20, seed=1)
    d = dict(train_files=[str(train)], heldout_file=str(held), out_dir=str(tmp_path / "run"),
             char_embedding_dim=4, filters=[[1, 4], [2, 8]], n_highway=1, lstm_dim=16, projection_dim=8,
             vocab_size=30, n_negative_samples=8, batch_tokens=200, max_train_tokens=8000,
             eval_every_tokens=2500, eval_sentences=20, warmup_steps=3, lr=0.03, threads=1, dropout=0.1)
    d.update(kw)
    return TrainConfig.from_dict(d)


def test_unknown_config_key_lists_valid_keys():
    with pytest.raises(ValueError, match="valid keys: .*lstm_dim"):
        TrainConfig.from_dict({"lstm_dimm": 3})


def test_training_lowers_heldout_perplexity(tmp_path):
    tr = Trainer(_cfg(tmp_path), progress=False)
    before = tr.evaluate()["mean"]
    tr.run()
    after = tr.state["history"][-1]["mean"]
    assert after < 0.5 * before, (before, after)
    curve = json.loads((tmp_path / "run" / "curve.json").read_text())
    assert [p["tokens"] for p in curve] == sorted(p["tokens"] for p in curve) and len(curve) >= 3


def test_resume_is_bit_for_bit(tmp_path, monkeypatch):
    ref = Trainer(_cfg(tmp_path / "a"), progress=False)
    ref.run()

    cfg = _cfg(tmp_path / "b")
    tr = Trainer(cfg, progress=False)
    calls = {"n": 0}
    original = Trainer.train_step

    def stop_after_5(self, idx):
        out = original(self, idx)
        calls["n"] += 1
        if calls["n"] == 5:
            self._stop = True  # what Ctrl-C / SIGTERM does
        return out

    monkeypatch.setattr(Trainer, "train_step", stop_after_5)
    res = tr.run()
    assert not res["finished"] and res["step"] == 5
    monkeypatch.setattr(Trainer, "train_step", original)
    with pytest.raises(FileExistsError):
        Trainer(cfg, progress=False)  # refuses to overwrite a run without --resume
    resumed = Trainer(cfg, resume=True, progress=False)
    assert resumed.run()["finished"]
    a, b = ref.model.state_dict(), resumed.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert ref.state["step"] == resumed.state["step"]
    assert [p["mean"] for p in ref.state["history"]] == [p["mean"] for p in resumed.state["history"]]


def test_export_loads_back_with_identical_layers(tmp_path):
    tr = Trainer(_cfg(tmp_path, max_train_tokens=600), progress=False)
    tr.run()
    exp = tmp_path / "run" / "export"
    bilm = load_bilm(exp / "options.json", exp / "weights.hdf5")
    sents = [["the", "red", "cat", "sat"], ["a", "dog", "ran", "quickly", "under", "the", "log"], ["unseen"]]
    model = tr.model.eval()
    with torch.no_grad():
        want = model.bilm(batch_to_ids(sents)).layers  # (L, B, T, D) at training time
        got = bilm(batch_to_ids(sents)).layers
        assert torch.allclose(want, got, atol=1e-6, rtol=0)
        # the training path (type ids, CNN once per type) gives the same top layer as the runtime
        index = {"<S>": 0, "</S>": 1}
        ids = [np.array([index.setdefault(w, len(index)) for w in s], dtype=np.int32) for s in sents]
        from elmo_features.training.data import type_char_ids
        type_ids, lengths = make_batch(ids, np.arange(len(ids)))
        top = model.hidden_states(type_ids, lengths, torch.from_numpy(type_char_ids(list(index))))
        for i, s in enumerate(sents):
            assert torch.allclose(top[i, 1 : len(s) + 1], got[-1, i, : len(s)], atol=1e-6)


def test_warm_start_continues_a_model_and_freezes_it_first(tmp_path):
    first = Trainer(_cfg(tmp_path / "a", max_train_tokens=1500), progress=False)
    first.run()
    exp = tmp_path / "a" / "run" / "export"
    import h5py
    with h5py.File(exp / "weights.hdf5", "a") as f:  # as shipped: no softmax
        del f["softmax/W"], f["softmax/b"]
    cfg = _cfg(tmp_path / "b", max_train_tokens=1500, init_from=str(exp), init_freeze_steps=2, skip_batches=3)
    tr = Trainer(cfg, progress=False)
    start = {k: v.clone() for k, v in tr.model.bilm.state_dict().items()}
    ref = first.model.bilm.state_dict()
    assert all(torch.allclose(start[k], ref[k]) for k in ref)  # the biLM starts where the first run ended
    assert tr.state["batch_in_epoch"] == 3
    # the fresh softmax's bias starts at the log unigram distribution of the output words (add-one)
    counts = np.zeros(len(tr.vocab))
    for sent in tr.corpus.sentences:
        for t in sent:
            counts[tr.targets[t]] += 1
    counts[:2] = len(tr.corpus.sentences)
    expected = np.log((counts + 1) / (counts + 1).sum())
    assert np.allclose(tr.model.softmax_b.detach().numpy(), expected, atol=1e-5)
    softmax0 = tr.model.softmax_w.detach().clone()
    tr.train_step(np.arange(4))
    tr.state["step"] += 1
    assert all(torch.equal(start[k], v) for k, v in tr.model.bilm.state_dict().items())  # frozen
    assert not torch.equal(softmax0, tr.model.softmax_w)  # the softmax learns
    tr.train_step(np.arange(4))
    tr.state["step"] += 1
    tr.train_step(np.arange(4))
    assert not all(torch.equal(start[k], v) for k, v in tr.model.bilm.state_dict().items())  # unfrozen
    bad = _cfg(tmp_path / "c", lstm_dim=12, init_from=str(exp))
    with pytest.raises(ValueError, match="another model than this config"):
        Trainer(bad, progress=False)


def test_vocab_file_continues_the_softmax_on_other_text(tmp_path):
    """vocab_file keeps the init_from export's output vocabulary (and softmax) when train_files change; without
    it the vocabulary rebuilt from the new text no longer matches the softmax, which is refused."""
    first = Trainer(_cfg(tmp_path / "a", max_train_tokens=1500), progress=False)
    first.run()
    exp = tmp_path / "a" / "run" / "export"
    other = tmp_path / "other.txt"
    other.write_text("\n".join(["a quickly red log ran slowly and the dog sat ."] * 40) + "\n", encoding="utf-8")
    kw = dict(max_train_tokens=600, init_from=str(exp))
    with pytest.raises(ValueError, match="vocab.txt differs"):
        Trainer(_cfg(tmp_path / "b", train_files=[str(other)], **kw), progress=False)
    n_words = len((exp / "vocab.txt").read_text(encoding="utf-8").split()) - 3
    with pytest.raises(ValueError, match=f"holds {n_words} words"):
        Trainer(_cfg(tmp_path / "c", train_files=[str(other)], vocab_file=str(exp / "vocab.txt"),
                     vocab_size=n_words + 1, **kw), progress=False)
    cfg = _cfg(tmp_path / "d", train_files=[str(first.cfg.train_files[0]), str(other)],
               vocab_file=str(exp / "vocab.txt"), vocab_size=n_words, **kw)
    tr = Trainer(cfg, progress=False)
    assert tr.vocab == first.vocab
    assert torch.equal(tr.model.softmax_w, first.model.softmax_w)  # the softmax came along
    tr.run()
    assert (tmp_path / "d" / "run" / "vocab.txt").read_text(encoding="utf-8") == \
        (exp / "vocab.txt").read_text(encoding="utf-8")


def test_trainer_bad_input_policy(tmp_path):
    """A hostile corpus: blank lines are skipped, a 10,000-token line is cut into max_sentence_length
    pieces, invalid UTF-8 is an error naming file and line and leaves no cache behind."""
    from elmo_features.util.errors import ElmoTasksError

    train = tmp_path / "train.txt"
    long_line = " ".join(["the", "cat", "sat"] * 3334)[: len(" ".join(["w"] * 10000))]
    train.write_text("the cat sat .\n\n   \n" + long_line + "\nthe dog ran .\n", encoding="utf-8")
    cfg = _cfg(tmp_path / "a", train_files=[str(train)], heldout_file=None, max_sentence_length=50,
               max_train_tokens=50)
    tr = Trainer(cfg, progress=False)
    lengths = sorted(len(s) for s in tr.corpus.sentences)
    n_long = len(long_line.split())
    assert max(lengths) == 50 and sum(lengths) == 4 + n_long + 4  # nothing lost, nothing from blank lines
    tr.close()
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"the cat sat .\nthe \xff dog .\n")
    cfg = _cfg(tmp_path / "b", train_files=[str(bad)], heldout_file=None)
    with pytest.raises(ElmoTasksError, match=r"bad\.txt:2: not valid UTF-8"):
        Trainer(cfg, progress=False)
    assert not (tmp_path / "b" / "run" / "prep.npz").exists()


def test_bf16_training_learns_and_keeps_fp32_master_weights(tmp_path, monkeypatch):
    """precision bf16: autocast matmuls, fp32 parameters and optimizer state; it learns like fp32
    (emulated by torch where the CPU has no bf16 instructions: the check is told to allow it)."""
    import elmo_features.model.precision as P
    monkeypatch.setenv(P.EMULATE_ENV, "1")
    tr = Trainer(_cfg(tmp_path, precision="bf16"), progress=False)
    seen = []
    hook = tr.model.softmax_w.register_hook(lambda g: seen.append(g.dtype))
    before = tr.evaluate()["mean"]
    tr.run()
    hook.remove()
    after = tr.state["history"][-1]["mean"]
    assert after < 0.5 * before, (before, after)
    assert seen and set(seen) == {torch.float32}  # fp32 gradients for the fp32 master weights
    assert all(p.dtype == torch.float32 for p in tr.model.parameters())
    with tr.autocast():  # the matmuls really run in bf16
        assert (torch.ones(2, 3) @ torch.ones(3, 2)).dtype == torch.bfloat16


def test_bf16_training_refused_on_a_cpu_without_bf16(tmp_path, monkeypatch):
    import elmo_features.model.precision as P
    from elmo_features.model.precision import PrecisionError
    monkeypatch.delenv(P.EMULATE_ENV, raising=False)
    monkeypatch.setattr(P, "bf16_cpu_support", lambda: (False, "Test CPU: no avx512_bf16, no amx_bf16"))
    with pytest.raises(PrecisionError, match="AVX512-BF16 or AMX"):
        Trainer(_cfg(tmp_path, precision="bf16"), progress=False)
    with pytest.raises(ValueError, match="precision.*'fp32', 'bf16'"):
        _cfg(tmp_path / "b", precision="fp16")

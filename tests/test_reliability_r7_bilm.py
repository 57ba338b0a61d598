"""Hostile cases of round 7 in train-bilm and the biLM API: a resume with edited hyperparameters, a keyless corpus
cache beside an edited training file, a truncated prep.npz, a held-out file that is mostly <UNK>, truthy strings as
boolean flags, and integer tensors in ScalarMix."""
from __future__ import annotations

import os

import pytest
import torch
import yaml

from elmo_features import BiLM, BiLMOptions, Embedder, ScalarMix, load_bilm
from elmo_features.hub import ElmoHub
from elmo_features.util.errors import UsageError
from elmo_tasks.cli import main
from test_reliability_r4_bilm import _config, corpus  # noqa: F401  (a pytest fixture)
from test_tasks_helpers import TINY_OPTIONS, make_bilm, one_line_error


def _run(tmp_path, corpus, *extra: str, **kw) -> int:  # noqa: F811
    return main(["train-bilm", "--config", str(_config(tmp_path, corpus, **kw)), "--progress", "off", *extra])


# -- C12: --resume after lr and dropout were edited in the config ---------------------------------------------------

def test_resume_with_changed_hyperparameters_is_refused(tmp_path, corpus, capsys):  # noqa: F811
    assert _run(tmp_path, corpus) == 0
    capsys.readouterr()
    assert _run(tmp_path, corpus, "--resume", "--set", "max_train_tokens=800", lr=0.5, dropout=0.3) == 2
    one_line_error(capsys, "checkpoint.pt: the config changed since this run started", "lr 0.002 -> 0.5",
                   "dropout 0.05 -> 0.3", "start a new out_dir")
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert (saved["lr"], saved["dropout"]) == (0.002, 0.05)  # the run's record is kept
    (tmp_path / "run" / "config.yaml").unlink()  # the checkpoint's own config still tells
    assert _run(tmp_path, corpus, "--resume", "--set", "max_train_tokens=800", warmup_steps=3) == 2
    one_line_error(capsys, "warmup_steps 2 -> 3")
    # how long, how often and how fast may change
    assert _run(tmp_path, corpus, "--resume", "--set", "max_train_tokens=800", "--set", "eval_every_tokens=5000",
                "--set", "checkpoint_minutes=1") == 0
    assert '"finished": true' in capsys.readouterr().out


# -- K06 / K07: the corpus cache without its key, or truncated -------------------------------------------------------

def test_keyless_cache_older_than_an_edited_training_file_is_refused(tmp_path, corpus, capsys):  # noqa: F811
    assert _run(tmp_path, corpus, max_train_tokens=200) == 0  # stops early: a checkpoint to resume
    out = tmp_path / "run"
    (out / "prep.json").unlink()
    corpus.write_text(corpus.read_text().replace("cat", "cow"))
    st = (out / "prep.npz").stat()
    os.utime(corpus, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    capsys.readouterr()
    assert _run(tmp_path, corpus, "--resume", "--set", "max_train_tokens=800") == 2
    one_line_error(capsys, "prep.npz has no key (prep.json)", "a.txt was modified after it was written",
                   "delete prep.npz, prep.json")
    assert not (out / "prep.json").exists()  # nothing vouches for the old cache


def test_truncated_corpus_cache_is_one_error_line(tmp_path, corpus, capsys):  # noqa: F811
    assert _run(tmp_path, corpus) == 0
    prep = tmp_path / "run" / "prep.npz"
    prep.write_bytes(prep.read_bytes()[:300])
    capsys.readouterr()
    assert _run(tmp_path, corpus, "--resume", "--set", "max_train_tokens=800") == 2
    one_line_error(capsys, "prep.npz: does not match the sha256 its key (prep.json) recorded", "to rebuild it")
    prep.unlink()  # as the message says: rebuilt from the same file, the run continues
    assert _run(tmp_path, corpus, "--resume", "--set", "max_train_tokens=800") == 0


# -- E08: a held-out file that is mostly <UNK> --------------------------------------------------------------------

def test_heldout_unk_rate_is_printed_and_warned_about(tmp_path, corpus, capsys):  # noqa: F811
    held = tmp_path / "oov.txt"
    held.write_text("zebra quantum xylophone mango orbit\n" * 5)
    assert _run(tmp_path, corpus, heldout_file=str(held), eval_every_tokens=200) == 0
    captured = capsys.readouterr()
    assert "mean" in captured.out and "(83% of predictions are <UNK>)" in captured.out
    warnings = [line for line in captured.err.splitlines() if "mostly measures predicting <UNK>" in line]
    assert len(warnings) == 1 and "oov.txt: 83% of its predictions are <UNK>" in warnings[0]


def test_heldout_of_the_training_text_is_not_warned_about(tmp_path, corpus, capsys):  # noqa: F811
    assert _run(tmp_path, corpus, heldout_file=str(corpus)) == 0
    captured = capsys.readouterr()
    assert "(0% of predictions are <UNK>)" in captured.out and "<UNK>" not in captured.err


# -- F20 / F10 / F21: the Python API's flags and ScalarMix's dtype --------------------------------------------------

def test_load_bilm_flags_must_be_bools_and_paths_not_empty(tmp_path):
    opts, weights = make_bilm(tmp_path / "b")
    with pytest.raises(TypeError, match="stateful must be True or False, got str: 'no'"):
        load_bilm(opts, weights, stateful="no")
    with pytest.raises(TypeError, match="keep_sentence_boundaries must be True or False, got int: 1"):
        load_bilm(opts, weights, keep_sentence_boundaries=1)
    with pytest.raises(TypeError, match="stateful must be True or False"):
        BiLM(BiLMOptions.from_dict(TINY_OPTIONS), stateful="no")
    with pytest.raises(UsageError, match="options_file '' is empty \\(an unset variable\\?\\)"):
        load_bilm("", weights)
    with pytest.raises(UsageError, match="weight_file ' ' is empty"):
        load_bilm(opts, " ")
    assert load_bilm(opts, weights, stateful=True).stateful is True


def test_embedder_flags_must_be_bools(tmp_path):
    bilm = load_bilm(*make_bilm(tmp_path / "b"))
    with pytest.raises(TypeError, match="token_cache must be a bool or a TokenCache, got str: 'yes'"):
        Embedder(bilm, token_cache="yes")
    with pytest.raises(TypeError, match="progress must be True, False or None, got str: 'no'"):
        Embedder(bilm, progress="no")
    with pytest.raises(TypeError, match="sort must be True, False or None, got int: 0"):
        Embedder(bilm, sort=0)
    assert Embedder(bilm, token_cache=False, progress=None, sort=False).token_cache is None
    hub = ElmoHub(bilm)
    with pytest.raises(TypeError, match="as_dict must be True or False, got str: 'no'"):
        hub(["a b"], as_dict="no")
    assert set(hub(["a b"], as_dict=True)) >= {"elmo", "default"}


def test_scalar_mix_refuses_integer_tensors():
    mix = ScalarMix(2)
    with pytest.raises(TypeError, match="floating-point tensors, got torch.int64"):
        mix([torch.full((1, 2, 3), 3), torch.full((1, 2, 3), 5)])
    assert torch.allclose(mix([torch.full((1, 2, 3), 3.0), torch.full((1, 2, 3), 5.0)]), torch.full((1, 2, 3), 4.0))

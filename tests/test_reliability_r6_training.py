"""Round 6 of the hostile tests, train-bilm: SIGHUP (H08), a fresh start over an earlier run's results (H09), one
training file named twice (D09), an init_from export of another shape (B08), a held-out copy of a training file
(E11)."""
from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from elmo_features.training.config import TrainConfig
from elmo_features.training.trainer import Trainer
from elmo_features.util import stop
from elmo_features.util.errors import ConfigError
from elmo_tasks import cli
from elmo_tasks.cli import main
from signal_helpers import default_stop_signals
from test_reliability_training import SMALL, _text
from test_reliability_r4_bilm import _config, corpus  # noqa: F401 (corpus: a pytest fixture)
from test_tasks_helpers import one_line_error

REPO = Path(__file__).resolve().parents[1]


def _train(config: Path, *sets: str) -> int:
    args = ["train-bilm", "--config", str(config), "--progress", "off"]
    for s in sets:
        args += ["--set", s]
    return main(args)


# -- H08: SIGHUP (a closed terminal) stops like SIGTERM ----------------------------------------------------------

def test_sighup_during_train_bilm_saves_a_checkpoint_and_exits_129(tmp_path, corpus):
    config = _config(tmp_path, corpus, max_train_tokens=10 ** 9)
    script = textwrap.dedent(f"""
        import os, signal, sys
        import elmo_features.training.trainer as t
        from elmo_tasks.cli import main
        step = t.Trainer.train_step
        def stopping(self, idx):
            if self.state["step"] == 2:
                os.kill(os.getpid(), signal.SIGHUP)
            return step(self, idx)
        t.Trainer.train_step = stopping
        sys.argv = ["elmo-tasks", "train-bilm", "--config", {str(config)!r}, "--progress", "off"]
        sys.exit(main())
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env,
                          preexec_fn=default_stop_signals)
    assert proc.returncode == 129 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr)
    assert proc.stdout.strip().splitlines()[-1].startswith("stopped; continue with: elmo-tasks train-bilm")
    assert (tmp_path / "run" / "checkpoint.pt").is_file()


def test_sighup_raises_the_stop_and_an_ignored_sighup_stays_ignored(monkeypatch):
    monkeypatch.setattr(stop, "_REQUESTED", [])
    monkeypatch.setattr(stop, "_FIRST_AT", [])
    with pytest.raises(KeyboardInterrupt):
        cli._on_stop_signal(signal.SIGHUP, None)
    assert cli.interrupt_exit_code() == 129
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        cli.install_stop_signals()
        assert signal.getsignal(signal.SIGHUP) is cli._on_stop_signal
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup
        cli.install_stop_signals()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
        stop.clear()


# -- H09: a fresh start over the export/ and curve.json of a run that left no checkpoint --------------------------

def test_a_fresh_start_does_not_replace_an_earlier_runs_export_and_curve(tmp_path, corpus, capsys):
    heldout = _text(tmp_path / "h.txt", "a mat sat on the cat".split(), n=5)
    config = _config(tmp_path, corpus, heldout_file=str(heldout), eval_every_tokens=150)
    assert _train(config) == 0
    run = tmp_path / "run"
    (run / "checkpoint.pt").unlink()  # a run killed (SIGKILL, OOM) before its first checkpoint
    weights = hashlib.md5((run / "export" / "weights.hdf5").read_bytes()).hexdigest()
    curve = (run / "curve.json").read_text()
    capsys.readouterr()
    assert _train(config) == 2
    one_line_error(capsys, "export/ and curve.json of an earlier run", "tokens", "no checkpoint",
                   "move them away or choose another out_dir")
    assert hashlib.md5((run / "export" / "weights.hdf5").read_bytes()).hexdigest() == weights
    assert (run / "curve.json").read_text() == curve and not (run / "checkpoint.pt").exists()


# -- D09: one training file named twice -------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["same", "symlink"])
def test_a_training_file_named_twice_is_refused(tmp_path, corpus, capsys, how):
    other = corpus
    if how == "symlink":
        other = tmp_path / "alias.txt"
        other.symlink_to(corpus)
    config = _config(tmp_path, corpus)
    assert _train(config, f"train_files=[{corpus}, {other}]") == 2
    one_line_error(capsys, f"train_files[1]: {other} is train_files[0] ({corpus}) again; list each file once")
    assert not (tmp_path / "run").exists()
    TrainConfig.from_dict({**SMALL, "train_files": [str(corpus), str(_text(tmp_path / "b.txt", ["x", "y"]))]})


# -- B08: init_from an export of another shape ------------------------------------------------------------------

def test_init_from_another_shape_is_one_line_before_the_corpus_is_prepared(tmp_path, corpus, capsys):
    config = _config(tmp_path, corpus)
    assert _train(config) == 0
    capsys.readouterr()
    run2 = tmp_path / "run2"
    assert _train(config, f"out_dir={run2}", f"init_from={tmp_path / 'run' / 'export'}", "lstm_dim=16") == 2
    err = one_line_error(capsys, "init_from", "lstm.dim 8 in the file, lstm_dim 16 in the config")
    assert "BiLMOptions" not in err and "char_cnn" not in err and len(err) < 400, err
    assert not (run2 / "prep.npz").exists()


def test_warm_start_of_another_shape_names_only_the_differing_keys(tmp_path, corpus, capsys):
    config = _config(tmp_path, corpus)
    assert _train(config) == 0
    cfg = TrainConfig.from_dict({**SMALL, "train_files": [str(corpus)], "out_dir": str(tmp_path / "run2"),
                                 "init_from": str(tmp_path / "run" / "export"), "projection_dim": 6})
    with pytest.raises(ConfigError) as e:  # the Python API (no CLI input checks): warm_start itself
        Trainer(cfg, progress=False)
    msg = str(e.value)
    assert "lstm.projection_dim 4 in the file, projection_dim 6 in the config" in msg and "lstm.dim" not in msg, msg


# -- E11: a held-out file that is a byte copy of a training file ------------------------------------------------

def test_a_heldout_copy_of_a_training_file_is_warned_about(tmp_path, corpus, capsys):
    copy = tmp_path / "copy.txt"
    copy.write_bytes(corpus.read_bytes())
    other = _text(tmp_path / "other.txt", "a mat sat on the cat".split())  # same size, other bytes: no warning
    assert other.stat().st_size == corpus.stat().st_size
    assert _train(_config(tmp_path, corpus, heldout_file=str(copy))) == 0
    err = capsys.readouterr().err
    assert f"warning: heldout_file {copy} has the same content as train_files[0] ({corpus})" in err, err
    assert _train(_config(tmp_path, corpus, heldout_file=str(other), out_dir=str(tmp_path / "run2"))) == 0
    assert "warning: heldout_file" not in capsys.readouterr().err

"""Hostile cases of round 4 in train-bilm, eval-bilm, embed and the shared flags: a warm-up longer than the run, a
diverged run without held-out text, an infinite eval-bilm perplexity, damaged .gz corpora, a double Ctrl-C, a device
or endless pipe as embed input, and more threads than the machine can run."""
from __future__ import annotations

import gzip
import io
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import pytest
import torch
import yaml

import elmo_features.embedding.embed_input as embed_input
import elmo_features.embedding.hdf5_output as hdf5_output
import elmo_features.training.run_checks as run_checks
from elmo_features.training.config import TrainConfig
from elmo_features.util import stop, threads
from elmo_features.util.errors import ConfigError, TextInputError, UsageError
from elmo_features.util.text_input import read_sentences
from elmo_tasks import cli
from elmo_tasks.cli import main
from signal_helpers import default_stop_signals
from test_reliability_training import SMALL, _text
from test_tasks_helpers import make_bilm, one_line_error

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def corpus(tmp_path):
    torch.set_num_threads(1)
    return _text(tmp_path / "a.txt", "the cat sat on a mat".split())


def _config(tmp_path, corpus, **kw) -> Path:
    path = tmp_path / "bilm.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "train_files": [str(corpus)], "out_dir": str(tmp_path / "run"), **kw}))
    return path


def _train(tmp_path, corpus, *sets: str) -> int:
    args = ["train-bilm", "--config", str(_config(tmp_path, corpus)), "--progress", "off"]
    for s in sets:
        args += ["--set", s]
    return main(args)


# -- D06: a warm-up longer than the whole run -------------------------------------------------------------------

def test_warmup_longer_than_the_run_is_refused_before_training(tmp_path, corpus, capsys):
    assert _train(tmp_path, corpus, "warmup_steps=1000000") == 2
    one_line_error(capsys, "warmup_steps 1000000 is longer than the whole run (about 4 steps",
                   "the learning rate would never exceed", "lower warmup_steps")
    assert not (tmp_path / "run" / "checkpoint.pt").exists() and not (tmp_path / "run" / "export").exists()
    assert _train(tmp_path, corpus, "warmup_steps=6", "out_dir=" + str(tmp_path / "r2")) == 0  # peaks at 4/6 of lr
    err = capsys.readouterr().err
    assert "warning: warmup_steps 6 is longer than the whole run" in err and "peaks at 67% of lr" in err


# -- D10: a diverged run without heldout_file --------------------------------------------------------------------

def test_a_run_without_heldout_file_exports_no_diverged_model(tmp_path, corpus, capsys, monkeypatch):
    """The sampled loss stays finite while the full softmax gives a token probability 0 (lr 10): the finished
    model's perplexity on training sentences is checked before it is exported."""
    real = run_checks.perplexity

    def diverged(model, sentences, vocab, **kw):
        return {**real(model, sentences, vocab, **kw), "forward": math.inf}

    monkeypatch.setattr(run_checks, "perplexity", diverged)
    assert _train(tmp_path, corpus) == 2
    one_line_error(capsys, "training diverged at step", "the forward perplexity is inf on 40 training sentences",
                   "nothing was saved: lower lr and start again")
    assert not (tmp_path / "run" / "export").exists() and not (tmp_path / "run" / "checkpoint.pt").exists()


# -- D11: eval-bilm with an infinite perplexity ------------------------------------------------------------------

def test_eval_bilm_refuses_an_infinite_perplexity(tmp_path, corpus, capsys):
    assert _train(tmp_path, corpus) == 0
    export = tmp_path / "run" / "export"
    with h5py.File(export / "weights.hdf5", "a") as f:
        f["softmax/b"][3:] = -3e38  # every word but the specials gets probability 0 (finite weights)
    capsys.readouterr()
    rc = main(["eval-bilm", str(corpus), "--options", str(export / "options.json"), "--weights",
               str(export / "weights.hdf5"), "--vocab", str(export / "vocab.txt")])
    assert rc == 2
    one_line_error(capsys, "a.txt: the forward perplexity is inf", "holds a diverged model")


# -- G10, G15: .gz corpora that are truncated, not gzip, or damaged ----------------------------------------------

def test_damaged_gz_corpora_are_one_line_naming_the_file(tmp_path, corpus, capsys):
    data = gzip.compress(corpus.read_bytes())
    (tmp_path / "trunc.txt.gz").write_bytes(data[:20])
    (tmp_path / "fake.txt.gz").write_bytes(b"not gzip really")
    damaged = bytearray(data)
    damaged[-6] ^= 0xFF  # the CRC
    (tmp_path / "crc.txt.gz").write_bytes(bytes(damaged))
    assert _train(tmp_path, corpus, f"train_files=[{tmp_path / 'trunc.txt.gz'}]") == 2
    one_line_error(capsys, "trunc.txt.gz: the gzip file is truncated", "fetch or compress it again")
    assert _train(tmp_path, corpus, f"train_files=[{corpus}, {tmp_path / 'fake.txt.gz'}]") == 2
    one_line_error(capsys, "fake.txt.gz: not a gzip file (it starts with b'not gzip')", "rename it")
    with pytest.raises(TextInputError, match="crc.txt.gz: damaged gzip data"):
        list(read_sentences(tmp_path / "crc.txt.gz"))
    opts, weights = make_bilm(tmp_path / "bilm")
    assert main(["embed", str(tmp_path / "fake.txt.gz"), str(tmp_path / "o.hdf5"), "--options", str(opts),
                 "--weights", str(weights), "--progress", "off"]) == 2
    one_line_error(capsys, "fake.txt.gz: not a gzip file")


# -- H03: a second Ctrl-C while the first is handled -------------------------------------------------------------

def test_a_second_stop_signal_is_only_recorded(monkeypatch):
    monkeypatch.setattr(stop, "_REQUESTED", [])
    monkeypatch.setattr(stop, "_FIRST_AT", [])
    with pytest.raises(KeyboardInterrupt):
        cli._on_stop_signal(signal.SIGINT, None)
    try:  # the impatient second Ctrl-C, and a SIGTERM: no KeyboardInterrupt in the cleanup
        cli._on_stop_signal(signal.SIGINT, None)
        cli._on_stop_signal(signal.SIGTERM, None)
    except KeyboardInterrupt:
        pytest.fail("a second stop signal raised KeyboardInterrupt while the first was handled")
    assert cli.interrupt_exit_code() == 130 and stop.first() is not None
    # a signal GRACE seconds after the first (which may have been swallowed, or the cleanup hangs) stops again
    monkeypatch.setattr(stop, "_FIRST_AT", [stop._FIRST_AT[0] - stop.GRACE])
    with pytest.raises(KeyboardInterrupt):
        cli._on_stop_signal(signal.SIGINT, None)


def test_double_ctrl_c_during_train_bilm_keeps_the_resume_line_and_exit_code(tmp_path, corpus):
    """SIGINT stops the training; a second one lands after the command returned, while the process exits (where
    it was a KeyboardInterrupt traceback in an atexit callback, or a death by SIGINT)."""
    config = _config(tmp_path, corpus, max_train_tokens=10 ** 9)
    script = textwrap.dedent(f"""
        import os, signal, sys
        import elmo_features.training.trainer as t
        from elmo_tasks.cli import main
        step = t.Trainer.train_step
        def stopping(self, idx):
            if self.state["step"] == 2:
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGINT)
            return step(self, idx)
        t.Trainer.train_step = stopping
        sys.argv = ["elmo-tasks", "train-bilm", "--config", {str(config)!r}, "--progress", "off"]
        rc = main()
        os.kill(os.getpid(), signal.SIGINT)  # while the process exits
        sys.exit(rc)
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env,
                          preexec_fn=default_stop_signals)
    assert proc.returncode == 130 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr)
    assert proc.stdout.strip().splitlines()[-1].startswith("stopped; continue with: elmo-tasks train-bilm")
    assert (tmp_path / "run" / "checkpoint.pt").is_file()


# -- J09: embed of a device or an endless pipe -------------------------------------------------------------------

class _Endless(io.RawIOBase):
    """Standard input that never ends: ``block`` forever (the test fails past 64 MB instead of filling the disk);
    ``interrupt_after`` blocks: a Ctrl-C."""

    def __init__(self, block: bytes, interrupt_after: int | None = None):
        self.block, self.interrupt_after, self.reads = block, interrupt_after, 0

    def read(self, n=-1):
        self.reads += 1
        if self.interrupt_after is not None and self.reads > self.interrupt_after:
            raise KeyboardInterrupt
        assert self.reads * len(self.block) < 64 << 20, "the copy of the input did not stop"
        return self.block


def _embed_stdin(tmp_path, monkeypatch, source) -> int:
    monkeypatch.setattr(sys, "stdin", type("Stdin", (), {"buffer": source})())
    opts, weights = make_bilm(tmp_path / "bilm")
    return main(["embed", "-", str(tmp_path / "o" / "out.hdf5"), "--options", str(opts), "--weights", str(weights),
                 "--progress", "off"])


def _spool_error(capsys, *needles: str) -> None:
    """stderr: the line that says the input is copied, then one error line holding every needle."""
    said, error = capsys.readouterr().err.strip().split("\n")
    assert said.startswith("embed: reading stdin once into ") and error.startswith("error: "), (said, error)
    assert all(n in error for n in needles), error


def test_embed_of_binary_endless_input_stops_at_once_and_keeps_no_copy(tmp_path, monkeypatch, capsys):
    assert _embed_stdin(tmp_path, monkeypatch, _Endless(b"\0" * (1 << 16))) == 2
    _spool_error(capsys, "stdin:1: NUL byte at byte column 1")
    (tmp_path / "o").mkdir(exist_ok=True)
    assert list((tmp_path / "o").iterdir()) == []
    assert _embed_stdin(tmp_path, monkeypatch, _Endless(b"ok line\n" + b"caf\xe9\n" * 4096)) == 2
    _spool_error(capsys, "stdin:2: not valid UTF-8 (byte 0xe9 at byte column 4)")
    assert list((tmp_path / "o").iterdir()) == []
    for blocks, where in (([b"ab\ncd", b"e\xc3", b"\xa9f\xff"], "in:2: not valid UTF-8 (byte 0xff at byte column 7)"),
                          ([b"abc", b"de\x00"], "in:1: NUL byte at byte column 6")):  # lines and characters cut
        check = embed_input._SpoolCheck("in", tmp_path)
        with pytest.raises(TextInputError, match=re.escape(where)):
            for block in blocks:
                check(block)


def test_embed_of_an_endless_text_pipe_stops_before_the_disk_is_full(tmp_path, monkeypatch, capsys):
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(embed_input.shutil, "disk_usage", lambda _: usage._replace(free=16 << 20))  # 16 MB free
    assert _embed_stdin(tmp_path, monkeypatch, _Endless(b"the cat sat\n" * 1000)) == 2
    _spool_error(capsys, "stdin: stopped reading it after 8 MB", "would leave too little free space")
    assert list((tmp_path / "o").iterdir()) == []


def test_interrupted_embed_removes_its_copy_and_says_what_was_kept(tmp_path, monkeypatch, capsys):
    assert _embed_stdin(tmp_path, monkeypatch, _Endless(b"the cat sat\n" * 100, interrupt_after=3)) == 130
    err = capsys.readouterr().err
    assert "interrupted; nothing was embedded (stopped while reading stdin" in err and "was removed" in err
    assert list((tmp_path / "o").iterdir()) == []
    text = tmp_path / "in.txt"
    text.write_text("the cat sat\n" * 30)
    opts, weights = make_bilm(tmp_path / "bilm")
    write, calls = hdf5_output.write_chunk, []

    def interrupted(*a, **kw):
        calls.append(1)
        if len(calls) == 1 and stop_first[0]:
            raise KeyboardInterrupt
        write(*a, **kw)
        if len(calls) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(hdf5_output, "write_chunk", interrupted)
    args = ["embed", str(text), str(tmp_path / "b.hdf5"), "--options", str(opts), "--weights", str(weights),
            "--progress", "off", "--chunk-size", "10"]
    stop_first = [True]
    assert main(args) == 130
    assert "interrupted; nothing was embedded yet (no chunk was flushed)" in capsys.readouterr().err
    calls.clear()
    stop_first[0] = False
    assert main(args) == 130
    assert f"30 sentences are kept in {tmp_path / 'b.hdf5.partial'}" in capsys.readouterr().err


# -- K01: more threads than the machine can run ------------------------------------------------------------------

@pytest.mark.parametrize("command", [["embed", "in.txt", "out.hdf5"], ["run", "c.yaml", "--out", "r"],
                                     ["eval-bilm", "in.txt", "--options", "o", "--weights", "w", "--vocab", "v"]])
def test_threads_beyond_the_machine_are_refused(command, capsys):
    too_many = threads.max_threads() + 1
    with pytest.raises(SystemExit) as e:  # (parsed only: starting them crashed with a segmentation fault)
        cli.build_parser().parse_args([*command, "--threads", str(too_many)])
    assert e.value.code == 2
    assert f"argument --threads: {too_many} threads are more than this machine can run" in capsys.readouterr().err
    cli.build_parser().parse_args([*command, "--threads", str(threads.max_threads())])


def test_threads_key_and_api_beyond_the_machine_are_refused(tmp_path, corpus):
    with pytest.raises(ConfigError, match=r"c.yaml: threads: 100000 threads are more than this machine can run"):
        TrainConfig.from_dict({**SMALL, "train_files": [str(corpus)], "threads": 100000}, source="c.yaml")
    with pytest.raises(UsageError, match="threads: 100000 threads"):
        threads.set_threads(100000)

"""Hostile cases of round 5 in the biLM runtime and trainer, the feature cache, static vectors, embed and the
stop signals: SIGTERM's exit code, empty or changed held-out files, settings that cannot take effect, joined text
files (a byte-order mark in the middle, a NUL byte) and a full disk while embedding."""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from elmo_features.util import stop
from elmo_tasks import cli
from elmo_tasks.cli import main
from signal_helpers import default_stop_signals
from test_reliability_training import SMALL, _text
from test_tasks_helpers import make_bilm, make_env, one_line_error, tagging_config

REPO = Path(__file__).resolve().parents[1]
TARGET = REPO / "tests" / "interrupt_target.py"  # the CLI; a head with a seed other than 1 trains forever


@pytest.fixture
def corpus(tmp_path):
    torch.set_num_threads(1)
    return _text(tmp_path / "a.txt", "the cat sat on a mat".split())


def _bilm_config(tmp_path, corpus, **kw) -> Path:
    path = tmp_path / "bilm.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "train_files": [str(corpus)], "out_dir": str(tmp_path / "run"), **kw}))
    return path


def _train(tmp_path, corpus, *sets: str, resume: bool = False) -> int:
    args = ["train-bilm", "--config", str(_bilm_config(tmp_path, corpus)), "--progress", "off"]
    for s in sets:
        args += ["--set", s]
    return main(args + (["--resume"] if resume else []))


# -- H03/H09: SIGTERM always exits 143 -----------------------------------------------------------------------------

def _term_run(tmp_path: Path, cfg: Path, i: int, delay: float) -> tuple[int, str]:
    out = tmp_path / f"r{i}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, str(TARGET), "run", str(cfg), "--out", str(out), "--cache-dir", "none",
                             "--progress", "off", "--set", "training.seed=2"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=default_stop_signals)
    t0 = time.monotonic()
    while not out.exists() and proc.poll() is None and time.monotonic() - t0 < 300:  # the handlers are installed
        time.sleep(0.05)
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("not stopped by SIGTERM")
    return proc.returncode, err


def test_sigterm_exits_143_whenever_it_arrives(tmp_path):
    env = make_env(tmp_path)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(tagging_config(env)))
    for i, delay in enumerate((0.0, 0.3, 1.0)):
        rc, err = _term_run(tmp_path, cfg, i, delay)
        assert rc == 143, (delay, rc, err[-1500:])


def test_sigterm_recorded_before_a_stray_keyboard_interrupt_still_exits_143(monkeypatch, tmp_path, capsys):
    """A KeyboardInterrupt that reaches main other than from the handler (raised again by stop.check() after a
    swallowed one) exits with the recorded signal's code, not Ctrl-C's."""
    def stopped(_args):
        stop.request(signal.SIGTERM)
        stop.check()
    monkeypatch.setattr(cli, "build_parser", lambda: _Parser(stopped))
    assert main(["x"]) == 143
    assert capsys.readouterr().err.startswith("interrupted")


class _Parser:
    def __init__(self, func):
        self.func = func

    def parse_args(self, _argv):
        return argparse.Namespace(func=self.func)


# -- I07, D05, D06: train-bilm settings that switch something off or cannot take effect ----------------------------

def test_empty_heldout_file_is_refused(tmp_path, corpus, capsys):
    assert _train(tmp_path, corpus, "heldout_file=''") == 2
    one_line_error(capsys, "heldout_file: empty path ''", "unset variable")
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


def test_skip_batches_without_init_from_is_refused(tmp_path, corpus, capsys):
    assert _train(tmp_path, corpus, "skip_batches=100000") == 2
    one_line_error(capsys, "skip_batches", "init_from")


def test_init_freeze_longer_than_the_run_is_refused(tmp_path, corpus, capsys):
    assert _train(tmp_path, corpus, "init_freeze_steps=1000000") == 2
    one_line_error(capsys, "init_freeze_steps 1000000 is longer than the whole run", "frozen")


# -- C03, B04: resume after the held-out file or vocab.txt changed ------------------------------------------------

def _stopped_run(tmp_path, corpus, held):
    assert _train(tmp_path, corpus, f"heldout_file={held}", "max_train_tokens=200") == 0
    assert (tmp_path / "run" / "checkpoint.pt").is_file()


def test_resume_after_the_heldout_file_changed_is_refused(tmp_path, corpus, capsys):
    held = _text(tmp_path / "held.txt", "the cat sat on a mat".split(), n=5)
    _stopped_run(tmp_path, corpus, held)
    _text(held, "a mat on the cat sat".split(), n=7)
    capsys.readouterr()
    assert _train(tmp_path, corpus, f"heldout_file={held}", "max_train_tokens=400", resume=True) == 2
    one_line_error(capsys, f"heldout_file {held} changed", "another out_dir")


def test_resume_after_vocab_txt_was_edited_is_refused(tmp_path, corpus, capsys):
    held = _text(tmp_path / "held.txt", "the cat sat on a mat".split(), n=5)
    _stopped_run(tmp_path, corpus, held)
    vocab = tmp_path / "run" / "vocab.txt"
    lines = vocab.read_text().splitlines()
    lines[3], lines[4] = lines[4], lines[3]
    vocab.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert _train(tmp_path, corpus, f"heldout_file={held}", "max_train_tokens=400", resume=True) == 2
    one_line_error(capsys, "vocab.txt changed since")


# -- F01: FeatureCache given an empty path or a file ------------------------------------------------------------

def test_feature_cache_refuses_an_empty_path_and_a_file(tmp_path):
    from elmo_features.embedding.feature_cache import FeatureCache
    from elmo_features.util.errors import PathError
    with pytest.raises(PathError, match="is empty"):
        FeatureCache("")
    afile = tmp_path / "afile.txt"
    afile.write_text("x")
    with pytest.raises(PathError, match="afile.txt is a file, not a folder"):
        FeatureCache(afile)


# -- G03/G04/G13: a NUL byte or a byte-order mark in the middle of a text file -------------------------------------

@pytest.mark.parametrize("bad,needle", [(b"cat\x00 0.5 0.5\n", "NUL byte"),
                                        (b"\xef\xbb\xbfcat 0.5 0.5\r\n", "a byte-order mark")], ids=["nul", "mid-bom"])
def test_token_vectors_text_with_nul_or_mid_file_bom_is_refused(tmp_path, bad, needle):
    from elmo_features.training.vectors import read_vector_table
    from elmo_features.util.errors import TextInputError
    path = tmp_path / "g.txt"
    path.write_bytes(b"\xef\xbb\xbfthe 0.1 0.2\r\nmat 0.3 0.4\r\n" + bad)
    with pytest.raises(TextInputError, match=f"g.txt:3: {needle}"):
        read_vector_table(path)
    path.write_bytes(b"\xef\xbb\xbfthe 0.1 0.2\r\nmat 0.3 0.4\r\n")  # a BOM at the start is fine
    assert read_vector_table(path)[0] == ["the", "mat"]


def _embed(tmp_path, text: Path, out: Path) -> int:
    opts, weights = make_bilm(tmp_path / "bilm")
    return main(["embed", str(text), str(out), "--options", str(opts), "--weights", str(weights), "--progress", "off"])


def test_embed_refuses_a_byte_order_mark_in_the_middle(tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_bytes(b"\xef\xbb\xbfthe cat\n\xef\xbb\xbfthe dog\n")  # cat a.txt b.txt, both saved with a BOM
    assert _embed(tmp_path, text, tmp_path / "e.h5") == 2
    one_line_error(capsys, "in.txt:2: a byte-order mark", "remove it")
    assert not (tmp_path / "e.h5").exists()


# -- J07: a full disk while embed writes --------------------------------------------------------------------------

def test_embed_on_a_full_disk_is_one_line_and_leaves_no_partial(tmp_path, capsys, monkeypatch):
    import errno
    import elmo_features.embedding.hdf5_output as hdf5_output

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(hdf5_output, "write_chunk", full)
    text = tmp_path / "in.txt"
    text.write_text("the cat\nthe dog\n")
    out = tmp_path / "e.h5"
    assert _embed(tmp_path, text, out) == 2
    one_line_error(capsys, "e.h5.partial: no space left on device", "run the same command again")
    assert not out.exists() and not Path(str(out) + ".partial").exists()


@pytest.mark.parametrize("bad", ["a\x00b", "\ufeffjoined"])
def test_static_vectors_with_a_nul_or_a_joined_files_byte_order_mark_are_refused(tmp_path, bad):
    from elmo_features.util.errors import TextInputError
    from elmo_tasks.data.static_vectors import _read_text

    path = tmp_path / "vec.txt"
    path.write_text(f"the 0.1 0.2\n{bad} 0.3 0.4\n", encoding="utf-8")
    with pytest.raises(TextInputError, match=r"vec.txt:2: "):
        _read_text(path, None, False)


def test_a_fetched_encoder_whose_source_md_is_not_utf8_is_damaged(tmp_path):
    from elmo_features.encoders.packaged import folder_problem

    (tmp_path / "SOURCE.md").write_bytes("| `config.json` | 2 | caf\xe9 |\n".encode("latin-1"))
    assert folder_problem(tmp_path).startswith("SOURCE.md is not UTF-8 text")


def test_outputs_through_a_symlink_loop_are_named(tmp_path):
    import os

    from elmo_features.util.errors import PathError
    from elmo_features.util.paths import check_output_dir, check_output_file

    os.symlink(tmp_path / "loopb", tmp_path / "loopa")
    os.symlink(tmp_path / "loopa", tmp_path / "loopb")
    with pytest.raises(PathError, match="loopa is a symlink loop"):
        check_output_file(tmp_path / "loopa", "OUTPUT")
    with pytest.raises(PathError, match="loopa is a symlink loop"):
        check_output_dir(tmp_path / "loopa" / "R", "--out")
    assert (tmp_path / "loopa").is_symlink()  # left as it was

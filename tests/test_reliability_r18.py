"""The fresh hostile list of round four (docs/reliability.md, "Round four: the fresh list"): each case replayed as
the tester ran it, on tiny fixtures (the sense file of test_wsd_tag_text, a biLM of a few weights)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import h5py
import pytest
import torch

import elmo_tasks.data  # noqa: F401 (first: elmo_tasks.wsd.data.reader cannot be imported first)
from elmo_tasks.cli import main

from signal_helpers import default_stop_signals
from test_tasks_helpers import one_line_error
from test_wsd_tag_text import senses  # noqa: F401 (the module's sense file fixture)

REPO = Path(__file__).resolve().parents[1]


def _tag(senses, *extra: str) -> int:  # noqa: F811
    return main(["wsd", "tag", str(senses / "in.txt"), "--senses", str(senses / "senses.h5"), *extra])


@pytest.fixture
def text(senses):  # noqa: F811
    (senses / "in.txt").write_text("we sat on the bank\n")
    return senses


# ---------------------------------------------------------------- L01: wsd tag --out over the user's own file

@pytest.mark.parametrize("name, content", [("notes.txt", "my notes, a week of work\n"),
                                           ("mine.jsonl", '{"my": "corpus"}\n'), ("mine.tsv", "a\tb\n")])
def test_l01_wsd_tag_does_not_replace_an_existing_file_without_force(text, tmp_path, capsys, name, content):
    out = tmp_path / name
    out.write_text(content)
    capsys.readouterr()
    assert _tag(text, "--out", str(out)) == 2
    one_line_error(capsys, f"--out {out} exists", "--force to replace it")
    assert out.read_text() == content
    assert _tag(text, "--out", str(out), "--force") == 0
    assert "bank" in out.read_text() and out.read_text() != content


def test_l01_a_new_output_and_standard_output_need_no_force(text, tmp_path, capsys):
    assert _tag(text, "--out", str(tmp_path / "o.jsonl")) == 0
    assert json.loads((tmp_path / "o.jsonl").read_text().splitlines()[0])[-1]["token"] == "bank"
    assert _tag(text, "--out", "/dev/null") == 0  # (a device: written in place, never "exists")


# ---------------------------------------------------------------- B22: an extension that sets no format

@pytest.mark.parametrize("name", ["tags.csv", "o.xyz", "tags"])
def test_b22_an_output_extension_without_a_format_is_refused(text, tmp_path, capsys, name):
    capsys.readouterr()
    assert _tag(text, "--out", str(tmp_path / name)) == 2
    one_line_error(capsys, "its extension does not set the format", ".jsonl", ".tsv", ".txt", "--format")
    assert not (tmp_path / name).exists()
    assert _tag(text, "--out", str(tmp_path / name), "--format", "tsv") == 0
    assert (tmp_path / name).read_text().startswith("line\tstart\tend\ttoken")


# ---------------------------------------------------------------- E24: an empty path option

@pytest.mark.parametrize("argv, flag", [
    (["data", "list", "--data-dir", ""], "--data-dir"),
    (["data", "get", "conll2003", "--data-dir", ""], "--data-dir"),
    (["data", "get", "conll2003", "--from", ""], "--from"),
    (["models", "list", "--download-cache", ""], "--download-cache"),
    (["models", "get", "minilm-l6", "--download-cache", ""], "--download-cache"),
    (["train-bilm", "--config", ""], "--config"),
    (["eval-bilm", "x.txt", "--options", "o", "--weights", "w", "--vocab", "v", "--softmax", ""], "--softmax"),
])
def test_e24_an_empty_path_option_is_refused_never_taken_as_not_given(tmp_path, capsys, monkeypatch, argv, flag):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    capsys.readouterr()
    assert main(argv) == 2
    one_line_error(capsys, f"{flag}: empty path")
    assert list(tmp_path.iterdir()) == []  # nothing written into ./data (nor anywhere here)


# ---------------------------------------------------------------- F08 / F12: a mask with a gap

def test_f08_the_crf_refuses_a_mask_with_a_gap_and_keeps_left_aligned_masks():
    from elmo_tasks.heads.crf import ConditionalRandomField

    torch.manual_seed(0)
    crf = ConditionalRandomField(3)
    em, tags = torch.randn(2, 3, 3), torch.tensor([[0, 1, 2], [2, 1, 0]])
    with pytest.raises(ValueError, match=r"CRF mask must be left-aligned .* row 1 has a real token at position 2"):
        crf.neg_log_likelihood(em, tags, torch.tensor([[1, 1, 1], [1, 0, 1]]))
    with pytest.raises(ValueError, match="CRF mask must be left-aligned"):
        crf.viterbi(em, torch.tensor([[True, False, True], [True, True, True]]))
    padded = torch.tensor([[1, 1, 1], [1, 1, 0]])
    assert torch.allclose(crf.neg_log_likelihood(em, tags, padded), crf.neg_log_likelihood(em, tags, padded.bool()))
    alone = crf.neg_log_likelihood(em[1:, :2], tags[1:, :2], torch.ones(1, 2, dtype=torch.bool))
    first = crf.neg_log_likelihood(em[:1], tags[:1], torch.ones(1, 3, dtype=torch.bool))
    assert torch.allclose(crf.neg_log_likelihood(em, tags, padded), first + alone)


@pytest.mark.parametrize("variational", [False, True])
def test_f12_the_bilstm_encoders_refuse_a_mask_with_a_gap(variational):
    from elmo_tasks.heads.variational import make_encoder

    torch.manual_seed(0)
    enc = make_encoder(4, 3, 1, 0.0, variational).eval()
    x = torch.randn(1, 3, 4)
    name = "VariationalBiLSTMEncoder" if variational else "BiLSTMEncoder"
    with pytest.raises(ValueError, match=f"{name} mask must be left-aligned"):
        enc(x, torch.tensor([[1, 0, 1]]))
    out = enc(x, torch.tensor([[1, 1, 0]]))  # (1, 3, 6)
    assert out[0, 2].abs().sum() == 0 and torch.allclose(out[:, :2], enc(x[:, :2], torch.ones(1, 2)))


def test_f12_apis_that_weigh_each_position_still_take_any_binary_mask():
    from elmo_features.model.scalar_mix import ScalarMix

    mix = ScalarMix(3, layer_norm="batch")
    layers = torch.randn(3, 1, 3, 4)
    gap = torch.tensor([[1, 0, 1]])
    assert torch.allclose(mix(layers, gap), mix(layers, gap.bool()))


# ---------------------------------------------------------------- C17: a finished command that cannot exit

def test_c17_a_stop_signal_ends_a_finished_command_kept_alive_by_a_plugins_thread(tmp_path):
    (tmp_path / "r18_thread.py").write_text(
        "import threading, time\n"
        "def wait():\n"
        "    threading.main_thread().join()  # (the command returned: the interpreter waits for this thread)\n"
        "    open('exiting', 'w').close()\n"
        "    time.sleep(60)\n"
        "threading.Thread(target=wait).start()\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "elmo_tasks.cli", "components", "--include", "r18_thread"],
                            cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=default_stop_signals)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "exiting").exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert (tmp_path / "exiting").exists(), proc.communicate(timeout=5)
        proc.terminate()  # SIGTERM
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and "Traceback" not in err, (proc.returncode, err)  # (the command's own code)
    assert "heads:" in out


# ---------------------------------------------------------------- C19: a plugin that replaces builtins

def test_c19_a_plugin_replacing_print_is_one_line_and_print_is_put_back(tmp_path):
    (tmp_path / "r18_bprint.py").write_text("import builtins\nbuiltins.print = None\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "elmo_tasks.cli", "components", "--include", "r18_bprint"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith("error: --include r18_bprint: it replaced or deleted Python's builtin(s) print")


def test_c19_an_installed_plugin_replacing_a_builtin_is_skipped_with_the_builtin_back(tmp_path, capsys,
                                                                                     monkeypatch):
    import builtins

    from elmo_tasks import plugins

    site = tmp_path / "site"
    info = site / "r18dist-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: r18dist\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[elmo_tasks.plugins]\nr18_bopen = r18_bopen\n")
    (site / "r18_bopen.py").write_text("import builtins\nbuiltins.open = None\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(plugins, "_ENTRY_POINTS_LOADED", [False])
    real_open = builtins.open
    try:
        assert main(["components"]) == 0
    finally:
        sys.modules.pop("r18_bopen", None)
        builtins.open = real_open
    err = capsys.readouterr().err
    assert "plugin r18_bopen (entry point of distribution r18dist" in err and "builtin(s) open" in err, err


# ---------------------------------------------------------------- H05: a sense file of an older version

def test_h05_a_sense_file_of_the_older_format_says_so_with_the_command_that_makes_it(senses, tmp_path,  # noqa: F811
                                                                                      capsys):
    from elmo_tasks.wsd.pos_head import _digest

    old = tmp_path / "old senses.h5"
    shutil.copy(senses / "senses.h5", old)
    with h5py.File(old, "r+") as f:  # the head as the version before it read a mix of layers wrote it
        g = f["pos_head"]
        config = json.loads(g.attrs["config"])
        del config["layers"]
        g.attrs["config"] = json.dumps(config)
        g.attrs["sha256"] = _digest({name: g[name][()] for name in g}, config)
        meta = json.loads(f.attrs["meta"])
    (senses / "in.txt").write_text("we sat on the bank\n")
    capsys.readouterr()
    assert main(["wsd", "tag", str(senses / "in.txt"), "--senses", str(old)]) == 2
    err = one_line_error(capsys, f"{old}: written by an older version of elmo-tasks (version {meta['version']}",
                         "make it again: ")
    assert "mixes layers" not in err
    command = err.split("make it again: ", 1)[1]
    assert "elmo-tasks wsd senses" in command and f"--out '{old}'" in command


# ---------------------------------------------------------------- B29: a word with two marks

def test_b29_a_word_with_two_marks_is_said_to_carry_two(text, capsys):
    (text / "in.txt").write_text("bank/NOUN/VERB on bank/NUON\n")
    capsys.readouterr()
    assert _tag(text, "--format", "jsonl") == 0
    err = capsys.readouterr().err
    assert "1 token(s) carry two part-of-speech marks (bank/NOUN/VERB)" in err, err
    assert "not a part of speech (bank/NUON)" in err, err  # (not: "... (bank/NOUN, bank/NUON)")

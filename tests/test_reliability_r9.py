"""The short hostile pass's remaining cases: other commands' output folders under `configs show --out --force`
(S07), a closed standard error (S02), a reader that closes the pipe early (S04), a plugin's helper module and a moved
plugin (G01, G03), train-bilm resumes that add init_from (R07), shorten the run (R04) or switch token vectors (R05),
a copied training file (P06) and a moved project folder (R09)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import h5py
import pytest

from elmo_tasks.cli import main

from test_tasks_helpers import one_line_error

REPO = Path(__file__).resolve().parents[1]


def _cli(args: list[str], **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "elmo_tasks.cli", *args], env=env, timeout=300, **kw)


# ---------------------------------------------------------------- S07: the files of other commands' output folders

@pytest.mark.parametrize("folder, target, beside", [
    ("bilm", "config.yaml", ("checkpoint.pt", "prep.json")),  # a train-bilm out_dir
    ("bilm/export", "options.json", ("weights.hdf5", "vocab.txt")),  # its export
    ("results", "summary.json", ("summary.md", "summary.csv")),  # a compare --results-dir
    ("wsd", "scores.json", ("table5.md",)),  # a wsd --out folder
])
def test_s07_configs_show_never_replaces_a_file_of_another_commands_folder(tmp_path, capsys, folder, target, beside):
    where = tmp_path / folder
    where.mkdir(parents=True)
    for name in (target, *beside):
        (where / name).write_text(f"{name} of the folder\n")
    assert main(["configs", "show", "ner_conll2003", "--out", str(where / target), "--force"]) == 2
    one_line_error(capsys, f"is a file of the", str(where), "would destroy")
    assert (where / target).read_text() == f"{target} of the folder\n"
    (where / "notes.yaml").write_text("old\n")  # another file in such a folder is the user's: --force replaces it
    assert main(["configs", "show", "ner_conll2003", "--out", str(where / "notes.yaml"), "--force"]) == 0
    assert "old" not in (where / "notes.yaml").read_text()


def test_s07_configs_show_never_replaces_a_binary_output_with_yaml(tmp_path, capsys):
    h5 = tmp_path / "e.h5"
    with h5py.File(h5, "w") as f:  # e.g. an embed output
        f["0"] = [[1.0]]
    before = h5.read_bytes()
    assert main(["configs", "show", "ner_conll2003", "--out", str(h5), "--force"]) == 2
    one_line_error(capsys, "exists and is not a text file")
    assert h5.read_bytes() == before


# ---------------------------------------------------------------- S02: standard error closed, or open read-only

@pytest.mark.parametrize("how", ["2>&-", "2</dev/null"])
def test_s02_a_closed_stderr_does_not_change_the_exit_code_or_the_work(tmp_path, how):
    out = tmp_path / "c.yaml"
    quoted = " ".join(f"'{a}'" for a in (sys.executable, "-m", "elmo_tasks.cli"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    error = subprocess.run(f"{quoted} run {tmp_path / 'nosuch.yaml'} {how}", shell=True, env=env, timeout=300,
                           stdout=subprocess.PIPE, text=True)
    assert error.returncode == 2  # the user error's code, not 1 from the failed error line
    assert error.stdout == ""  # and the error line is not sent to standard output instead
    # a command that warns on standard error: configs show into a folder not yet there is refused; into tmp works
    done = subprocess.run(f"{quoted} configs show ner_conll2003 --out {out} {how}", shell=True, env=env,
                          stdout=subprocess.PIPE, timeout=300)
    assert done.returncode == 0 and out.read_text().startswith("#")


# ---------------------------------------------------------------- S04: the reader of standard output went away

def test_s04_a_closed_pipe_on_stdout_exits_quietly_like_other_unix_tools():
    read, write = os.pipe()
    os.close(read)  # `elmo-tasks configs list | head -1` after head has exited
    try:
        r = _cli(["configs", "list"], stdout=write, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write)
    assert r.returncode == 141, r.stderr
    assert r.stderr == ""  # no "error: [Errno 32] Broken pipe", no "Exception ignored" at exit


# ---------------------------------------------------------------- G01 / G03: a plugin's helper module, a moved plugin

PLUGIN_G = ("import myhelper_g\nfrom elmo_tasks.registry import FEATURES\nfrom elmo_tasks.features.static import StaticFeatures\n"
            "@FEATURES.register('static_g')\nclass StaticG(StaticFeatures):\n"
            "    def forward(self, *a, **k):\n        return super().forward(*a, **k) * myhelper_g.SCALE\n")


@pytest.fixture
def plugin_g(tmp_path, monkeypatch):
    """myfeat_g.py in tmp_path (the current folder), registering static_g and importing its helper myhelper_g."""
    from elmo_tasks import plugins
    from elmo_tasks.registry import FEATURES

    (tmp_path / "myfeat_g.py").write_text(PLUGIN_G)
    (tmp_path / "myhelper_g.py").write_text("SCALE = 1.0\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_INCLUDED", list(plugins._INCLUDED))
    yield tmp_path
    FEATURES._entries.pop("static_g", None)
    for name in ("myfeat_g", "myhelper_g", "moved_g", "moved_g.myfeat_g"):
        sys.modules.pop(name, None)


def _run_with_plugin_g(tmp_path) -> None:
    from test_tasks_helpers import static_config_file

    env, cfg = static_config_file(tmp_path)
    features = f"features={{name: static_g, path: {env['glove']}}}"
    assert main(["run", cfg, "--include", "myfeat_g", "--set", features, "--out", "R", "--cache-dir", "none",
                 "--progress", "off"]) == 0
    (tmp_path / "in.txt").write_text("John lives in Paris\n")


def test_g01_predict_refuses_a_run_whose_plugin_helper_module_changed(plugin_g, capsys):
    import json

    _run_with_plugin_g(plugin_g)
    recorded = json.loads((plugin_g / "R" / "metrics.json").read_text())["plugin_modules"]
    assert set(recorded) == {"myfeat_g", "myhelper_g"}  # the helper beside the plugin is part of its code
    (plugin_g / "myhelper_g.py").write_text("SCALE = 1000.0\n")
    capsys.readouterr()
    assert main(["predict", "R", "in.txt", "--include", "myfeat_g", "--out", "p.txt"]) == 2
    one_line_error(capsys, "another version of plugin module myhelper_g (sha256 ", "rerun the run")
    assert not (plugin_g / "p.txt").exists()


def test_g03_predict_refuses_a_run_whose_plugin_module_moved(plugin_g, capsys):
    _run_with_plugin_g(plugin_g)
    (plugin_g / "moved_g").mkdir()
    (plugin_g / "myfeat_g.py").rename(plugin_g / "moved_g" / "myfeat_g.py")  # moved into a package (and edited)
    from elmo_tasks.registry import FEATURES

    FEATURES._entries.pop("static_g", None)  # (this process imported the old module; a new command would not)
    sys.modules.pop("myfeat_g", None)
    capsys.readouterr()
    assert main(["predict", "R", "in.txt", "--include", "moved_g.myfeat_g", "--out", "p.txt"]) == 2
    one_line_error(capsys, "plugin module myfeat_g (sha256 ", "cannot be found now (moved or renamed")
    assert not (plugin_g / "p.txt").exists()


# ---------------------------------------------------------------- train-bilm: resume edge cases, copied files, moves

def _bilm_config(tmp_path, train_files, **kw) -> str:
    import yaml

    from test_reliability_training import SMALL

    path = tmp_path / "bilm.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "train_files": [str(f) for f in train_files],
                                    "out_dir": str(tmp_path / "run"), **kw}))
    return str(path)


@pytest.fixture
def bilm_corpus(tmp_path):
    import torch

    from test_reliability_training import _text

    torch.set_num_threads(1)
    return _text(tmp_path / "a.txt", "the cat sat on a mat".split())


def _train(config: str, *sets: str, resume: bool = False) -> int:
    args = ["train-bilm", "--config", config, "--progress", "off", *(["--resume"] if resume else [])]
    for s in sets:
        args += ["--set", s]
    return main(args)


def _recorded(tmp_path) -> dict:
    import yaml

    return yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())


def test_r07_init_from_added_on_resume_is_ignored_with_a_warning_and_not_recorded(tmp_path, bilm_corpus, capsys):
    config = _bilm_config(tmp_path, [bilm_corpus])
    assert _train(config) == 0
    capsys.readouterr()
    assert _train(config, "max_train_tokens=600", f"init_from={tmp_path / 'elsewhere'}", resume=True) == 0
    err = capsys.readouterr().err
    assert "warning: init_from is read at a fresh start only; this run started from None" in err
    assert _recorded(tmp_path)["init_from"] is None  # the record says what the run did


def test_r04_resume_shorter_than_the_tokens_trained_is_refused(tmp_path, bilm_corpus, capsys):
    config = _bilm_config(tmp_path, [bilm_corpus])
    assert _train(config) == 0
    capsys.readouterr()
    assert _train(config, "max_train_tokens=100", resume=True) == 2
    one_line_error(capsys, "this run has trained", "tokens already, more than max_train_tokens 100",
                   "its config.yaml says 400")
    assert _recorded(tmp_path)["max_train_tokens"] == 400


def test_r05_token_vectors_switched_on_at_resume_is_named_before_any_work(tmp_path, bilm_corpus, capsys):
    from test_tasks_helpers import make_glove

    glove = make_glove(tmp_path / "glove.txt")
    config = _bilm_config(tmp_path, [bilm_corpus])
    assert _train(config) == 0
    capsys.readouterr()
    assert _train(config, "max_train_tokens=600", f"token_vectors={glove}", resume=True) == 2
    one_line_error(capsys, "the config changed since this run started (token_vectors None -> ")


@pytest.mark.parametrize("copy", ["bytes", "gzip"])
def test_p06_a_copy_of_a_training_file_is_warned_about(tmp_path, bilm_corpus, capsys, copy):
    import gzip

    other = tmp_path / ("copy.txt" if copy == "bytes" else "a.txt.gz")
    if copy == "bytes":
        other.write_bytes(bilm_corpus.read_bytes())
    else:
        other.write_bytes(gzip.compress(bilm_corpus.read_bytes()))
    distinct = tmp_path / "b.txt"
    distinct.write_text(bilm_corpus.read_text().replace("cat", "dog"))  # same size, other text: no warning
    assert _train(_bilm_config(tmp_path, [bilm_corpus, distinct, other])) == 0
    err = capsys.readouterr().err
    assert f"warning: train_files[2] ({other}) holds the same text as train_files[0] ({bilm_corpus})" in err
    assert "train_files[1]" not in err


def test_r09_a_project_folder_moved_as_a_whole_resumes(tmp_path, monkeypatch, capsys):
    from test_reliability_training import _text

    project = tmp_path / "project"
    project.mkdir()
    _text(project / "train.txt", "the cat sat on a mat".split())
    config = _bilm_config(project, ["train.txt"], out_dir="base")
    monkeypatch.chdir(project)
    assert _train(config) == 0
    moved = project.rename(tmp_path / "moved")
    monkeypatch.chdir(moved)
    capsys.readouterr()
    assert _train(str(moved / "bilm.yaml"), "max_train_tokens=600", resume=True) == 0
    assert '"finished": true' in capsys.readouterr().out

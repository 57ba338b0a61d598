"""The tasks Python API checks what the CLI checks (hostile cases 50, 62, 66-70, 73, 79)."""
from __future__ import annotations

import math

import pytest

from elmo_features.util.errors import ConfigError, OutputExistsError, PathError
from elmo_tasks.experiment.config import resolve

from test_tasks_helpers import make_env, tagging_config


@pytest.fixture
def compare_cfg(tmp_path):
    env = make_env(tmp_path)
    raw = tagging_config(env, max_epochs=1)
    raw["compare"] = {"seeds": [1], "sources": {"glove": {"name": "static", "path": str(env["glove"])}}}
    return resolve(raw)


def test_run_experiment_never_deletes_a_users_files(tmp_path):
    from elmo_tasks.experiment.run import clear_unfinished_run

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.yaml").write_text("my precious config\n")
    (mine / "notes.txt").write_text("notes\n")
    with pytest.raises(PathError, match="the folder is not empty"):
        clear_unfinished_run(mine)
    assert (mine / "config.yaml").read_text() == "my precious config\n"


def test_run_comparison_claims_its_results_folder(compare_cfg, tmp_path):
    from elmo_tasks.experiment.compare import run_comparison

    other = tmp_path / "other"
    other.mkdir()
    (other / "summary.md").write_text("my own summary\n")
    with pytest.raises(OutputExistsError, match="not empty"):
        run_comparison(compare_cfg, other, tmp_path / "runs")
    assert (other / "summary.md").read_text() == "my own summary\n" and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("kw, match", [({"sources": ["nope"]}, "unknown variant.*nope; valid: glove"),
                                       ({"seeds": [1, 1]}, "seed 1 is given twice"),
                                       ({"folds": 2}, "folds: give 3 or more")])
def test_run_comparison_checks_its_arguments_before_any_work(compare_cfg, tmp_path, kw, match):
    from elmo_tasks.experiment.compare import run_comparison

    with pytest.raises(ConfigError, match=match):
        run_comparison(compare_cfg, tmp_path / "results", tmp_path / "runs", **kw)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "results").exists()


def test_predict_examples_takes_token_lists_and_names_strings():
    from elmo_tasks.data.types import LabeledSentence
    from elmo_tasks.experiment.run import as_examples

    class Head:
        def blank_example(self, tokens):
            return LabeledSentence(list(tokens), "")

    class Model:
        head = Head()

    assert as_examples(Model(), [["great", "film"]])[0].tokens == ["great", "film"]
    with pytest.raises(TypeError, match=r"examples\[0\].*list of token strings.*got str"):
        as_examples(Model(), ["great film"])


def test_embed_sentences_takes_a_generator(tmp_path):
    from elmo_features import Embedder, load_bilm
    from test_tasks_helpers import make_bilm

    options, weights = make_bilm(tmp_path / "bilm")
    emb = Embedder(load_bilm(options, weights))
    out = emb.embed_sentences(s for s in [["a", "b"], ["c"]])
    assert [a.shape[1] for a in out] == [2, 1]
    with pytest.raises(TypeError, match="sentences is int"):
        emb.embed_sentences(5)


def test_perplexity_of_a_diverged_model_is_inf():
    from elmo_features.training.evaluate import exp_or_inf

    assert exp_or_inf(1000.0) == math.inf and exp_or_inf(0.0) == 1.0


def test_heldout_file_that_is_a_training_file_is_noted(tmp_path, capsys):
    from elmo_features.training.config import TrainConfig
    from elmo_features.training.evaluate import read_heldout
    from elmo_features.util.paths import same_file

    train = tmp_path / "train.txt"
    train.write_text("the cat sat .\n")
    (tmp_path / "link.txt").symlink_to(train)
    assert same_file(tmp_path / "link.txt", train)
    cfg = TrainConfig.from_dict({"train_files": [str(train)], "heldout_file": str(tmp_path / "link.txt")})
    assert read_heldout(cfg) == [["the", "cat", "sat", "."]]
    assert "is one of the train_files" in capsys.readouterr().err

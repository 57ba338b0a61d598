"""The configs that ship inside the package: ``configs list/show``, and config names accepted where a path goes
(an existing file wins), so that the documented commands work from a pip install in any folder."""
from __future__ import annotations

import pytest
import yaml

from elmo_features.util.errors import ConfigError
from elmo_tasks.cli import main
from elmo_tasks.experiment.config import PACKAGED_CONFIGS, find_config, load_config, packaged_configs
from elmo_tasks.wsd.config import load_wsd_config


def test_every_task_config_ships_and_loads_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no configs/ folder here: the names resolve to the package's copies
    names = packaged_configs()
    assert {"ner_conll2003", "sentiment_polarity", "pos_conll2003", "wsd_semcor", "fusion/ner", "bilm/default"} <= set(names)
    for name, path in names.items():
        assert path.is_relative_to(PACKAGED_CONFIGS)
        if name.startswith(("bilm/", "backbones/wsd", "fusion/wsd")) or name.startswith("wsd_"):
            continue  # biLM training configs; WSD configs are checked below
        cfg = load_config(name)  # checked: every key, every component name
        assert cfg.name
    assert load_wsd_config("wsd_senses").knn == ["dev_layer", "senses", "senses_glosses", "senses_prior"]
    wsd = load_wsd_config("wsd_semcor")
    assert wsd.train == "data/wsd/semcor" and wsd.test == [f"data/wsd/{n}" for n in (
        "senseval2", "senseval3", "semeval2007", "semeval2013", "semeval2015")]
    assert load_wsd_config("configs/wsd_semcor.yaml", train="x", test=["y"]).test == ["y"]  # the flags override


def test_names_paths_and_the_clone_spelling(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert find_config("ner_conll2003") == PACKAGED_CONFIGS / "ner_conll2003.yaml"
    assert find_config("configs/ner_conll2003.yaml") == PACKAGED_CONFIGS / "ner_conll2003.yaml"  # the README's spelling
    assert find_config("fusion/ner.yaml") == PACKAGED_CONFIGS / "fusion" / "ner.yaml"
    (tmp_path / "ner_conll2003").write_text("name: mine\n")  # an existing file wins over the packaged name
    assert find_config("ner_conll2003").resolve() == tmp_path / "ner_conll2003"
    with pytest.raises(ConfigError, match="nosuch.yaml: config file not found, and no packaged config has that name"):
        find_config("nosuch.yaml")


def test_configs_list_and_show(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["configs", "list"]) == 0
    out = capsys.readouterr().out
    assert any(line.startswith("  ner_conll2003 ") and "CoNLL-2003 English NER" in line for line in out.splitlines())
    assert main(["configs", "show", "sentiment_polarity"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["name"] == "sentiment_polarity"
    assert main(["configs", "show", "sentiment_polarity", "--out", "mine.yaml"]) == 0
    assert (tmp_path / "mine.yaml").read_text() == (PACKAGED_CONFIGS / "sentiment_polarity.yaml").read_text()
    capsys.readouterr()
    assert main(["configs", "show", "sentiment_polarity", "--out", "mine.yaml"]) == 2  # never replaced silently
    assert ("--out mine.yaml exists; give another file, or replace it with --force: elmo-tasks configs show "
            "sentiment_polarity --out mine.yaml --force") in capsys.readouterr().err
    assert main(["configs", "show", "nosuch"]) == 2
    assert "no packaged config 'nosuch'" in capsys.readouterr().err


def test_train_bilm_takes_a_packaged_name_and_says_what_a_user_must_give(tmp_path, monkeypatch, capsys):
    """The bilm/* configs name the development corpus and the run folders of the shipped biLMs' training: from
    any folder, train-bilm finds the config by name and says, before any work, which file is missing and how to
    give one's own text; with those given it goes on to the next missing input (init_from), not into training."""
    monkeypatch.chdir(tmp_path)
    assert main(["train-bilm", "--config", "bilm/charonly"]) == 2
    err = capsys.readouterr().err
    assert "bilm/charonly: train_files[0]: ../shared/data/corpus/train.txt.gz not found; the packaged config" in err
    assert "--set 'train_files=[FILE,...]' --set heldout_file=FILE" in err
    (tmp_path / "t.txt").write_text("a b c\nd e f\n")
    assert main(["train-bilm", "--config", "bilm/charonly", "--set", "train_files=[t.txt]", "--set",
                 "heldout_file=t.txt", "--set", "out_dir=o"]) == 2
    err = capsys.readouterr().err
    assert "bilm/charonly: init_from: elmo_features/models/default not found; give an exported biLM folder" in err
    assert not (tmp_path / "o").exists()  # refused before the corpus was read
    (tmp_path / "mine.yaml").write_text("train_files: [missing.txt]\n")
    assert main(["train-bilm", "--config", "mine.yaml"]) == 2
    err = capsys.readouterr().err
    assert "mine.yaml: train_files[0]: missing.txt not found; give your own tokenized text" in err
    assert "packaged config" not in err


def test_printed_commands_hold_only_options_a_user_typed():
    """The top-level parser hands every sub-command a config finder; no rebuilt command (resume hints, recorded
    commands) may show it as an option."""
    from elmo_features.training.cli import resume_command
    from elmo_tasks.cli import build_parser
    from elmo_tasks.cli.run import command_line

    args = build_parser().parse_args(["compare", "sentiment_polarity", "--sources", "glove", "--progress", "off"])
    assert callable(args.find_config)
    assert command_line(args) == "elmo-tasks compare sentiment_polarity --sources glove --progress off"
    args = build_parser().parse_args(["train-bilm", "--config", "bilm/default", "--set", "max_train_tokens=5"])
    assert resume_command(args) == "elmo-tasks train-bilm --config bilm/default --resume --set max_train_tokens=5"

"""What the commands print for people: `configs list` (task configs with whole one-line descriptions, the research
history under --all), "did you mean" for a mistyped name, compare's result table, metrics rounded one way, counts
written as words (no Python dict in a message), embed's timing, and no warning from a packaged config's defaults."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import yaml

from elmo_tasks.cli import main
from elmo_tasks.experiment.config import PACKAGED_CONFIGS, packaged_configs

from test_reliability_outputs_r3 import bank_wsd_config
from test_reliability_r13 import one_layer_wsd
from test_tasks_helpers import elmo_section, make_bilm, make_env, static_config_file, tagging_config

FAST = ["--cache-dir", "none", "--progress", "off"]
HASH = re.compile(r"\b[0-9a-f]{7,40}\b")  # a commit hash


def _listed(out: str) -> dict[str, str]:
    """`configs list` lines ``  NAME  DESCRIPTION`` -> {name: description}."""
    rows = [line.split(None, 1) for line in out.splitlines() if line.startswith("  ")]
    return {r[0]: r[1] if len(r) > 1 else "" for r in rows}


# ---------------------------------------------------------------- configs list

def test_every_packaged_config_has_a_whole_one_line_description():
    for name, path in packaged_configs().items():
        first = path.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# "), name
        description = first[2:]
        assert description.endswith(".") and len(description) <= 80, (name, description)
        assert not HASH.search(description) and "configs/" not in description and "runs/" not in description, name


def test_configs_list_shows_the_task_configs_whole_and_the_research_history_under_all(capsys):
    assert main(["configs", "list"]) == 0
    out = capsys.readouterr().out
    shown = _listed(out)
    tasks = {n for n in packaged_configs() if "/" not in n}
    assert set(shown) == tasks and {"ner_conll2003", "tiny_ner_conll2003", "wsd_semcor", "wsd_senses"} <= tasks
    for name in tasks:  # each description whole: the config's first comment line, not cut
        first = (PACKAGED_CONFIGS / f"{name}.yaml").read_text().splitlines()[0]
        assert shown[name] == first[2:] and "…" not in shown[name]
    assert shown["wsd_semcor"].endswith(".") and "(Peters et al.\n" not in out
    assert "configs list --all" in out
    assert main(["configs", "list", "--all"]) == 0
    out = capsys.readouterr().out
    everything = _listed(out)
    assert set(everything) == set(packaged_configs()) and "bilm/default" in everything and "fusion/ner" in everything
    assert out.index("  wsd_senses") < out.index("  backbones/ner")  # the task configs first
    assert not any(HASH.search(d) for d in everything.values())


# ---------------------------------------------------------------- did you mean

@pytest.mark.parametrize("command, words", [
    (["configs", "show", "ner_conl2003"], "no packaged config 'ner_conl2003' (did you mean ner_conll2003?)"),
    (["run", "ner_conl2003"], "no packaged config has that name (did you mean ner_conll2003?)"),
    (["components", "head"], "unknown kind 'head' (did you mean heads?)"),
    (["components", "heads", "crf"], "unknown head 'crf' (did you mean crf_tagger?)"),
    (["data", "get", "conl2003"], "unknown data set(s) 'conl2003' (did you mean conll2003?)"),
    (["models", "get", "minilm"], "unknown model(s) 'minilm' (did you mean minilm-l6?)"),
])
def test_a_mistyped_name_gets_did_you_mean(command, words, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(command) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1, err


def test_did_you_mean_for_models_and_presets_and_not_for_a_far_name(tmp_path, monkeypatch):
    from elmo_features.encoders.loading import EncoderError, resolve_folder
    from elmo_features.formats.default_model import resolve_bilm
    from elmo_features.util.errors import UsageError
    from elmo_features.util.wording import close_name, did_you_mean

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EncoderError, match=r"model 'minilm-l7' \(did you mean minilm-l6\?\)"):
        resolve_folder("minilm-l7")  # `embed --transformer minilm-l7`, `model: minilm-l7` in a config
    with pytest.raises(UsageError, match=r"unknown biLM spec 'defualt' \(did you mean default\?\)"):
        resolve_bilm("defualt")
    with pytest.raises(UsageError, match=r"unknown biLM spec 'nosuchthing'; valid"):
        resolve_bilm("nosuchthing")
    assert did_you_mean("nosuch", packaged_configs()) == "" and close_name("Heads", ["heads"]) == "heads"


# ---------------------------------------------------------------- compare's table, metrics, counts

def test_compare_ends_with_its_result_table(tmp_path, capsys):
    torch.set_num_threads(1)
    env = make_env(tmp_path)
    cfg = tagging_config(env, max_epochs=1)
    cfg["compare"] = {"seeds": [1, 2], "sources": {"glove": {"name": "static", "path": str(env["glove"])},
                                                   "layer1": elmo_section(env, layer=1)}}
    conf = tmp_path / "cmp.yaml"
    conf.write_text(yaml.safe_dump(cfg, sort_keys=False))
    assert main(["compare", str(conf), "--results-dir", str(tmp_path / "res"), "--runs-dir", str(tmp_path / "runs"),
                 *FAST]) == 0
    out = capsys.readouterr().out.splitlines()
    import json

    s = json.loads((tmp_path / "res" / "summary.json").read_text())
    at = next(i for i, line in enumerate(out) if line.startswith("source "))
    assert out[at - 1].startswith("tiny_ner: f1 x100, mean ± sample std over seeds 1, 2")
    assert out[at].split() == ["source", "test", "f1", "dev", "f1", "runs"]
    for line, row in zip(out[at + 1: at + 3], s["sources"]):
        t, d = row["test"]["f1"], row["dev"]["f1"]
        assert line.split() == [row["source"], f"{t['mean'] * 100:.2f}", "±", f"{t['std'] * 100:.2f}",
                                f"{d['mean'] * 100:.2f}", "±", f"{d['std'] * 100:.2f}", "2"]
    assert out[at + 3].startswith("wrote ") and out[at + 3].split()[1].endswith("summary.md")  # then the files


def test_compare_table_has_the_paired_test_column_with_folds():
    from elmo_tasks.experiment.summary import result_table

    stat = lambda m: {"mean": m, "std": 0.01}  # noqa: E731
    s = {"name": "cv", "primary_metric": "accuracy", "seeds": [1],
         "sources": [{"source": "glove", "test": {"accuracy": stat(0.7)}, "dev": {"accuracy": stat(0.72)},
                      "epochs": [2, 2, 2]},
                     {"source": "layer1", "test": {"accuracy": stat(0.8)}, "dev": {"accuracy": stat(0.81)},
                      "epochs": [2, 2, 2]}],
         "cross_validation": {"folds": 3, "paired": [{"a": "glove", "b": "layer1", "bootstrap": {
             "delta": 0.1, "ci95": [0.05, 0.15], "p_b_not_better": 0.0012}}]}}
    lines = result_table(s).splitlines()
    assert lines[0] == "cv: accuracy x100, mean ± sample std over seeds 1 and 3 folds"
    assert lines[1].split()[-6:] == ["vs", "glove:", "B", "-", "A", "[95%"] or "vs glove: B - A [95% CI]" in lines[1]
    assert lines[2].split()[-1] == "-" and lines[3].endswith("+10.00 [+5.00, +15.00], 0.0012")


def test_run_and_predict_reader_print_the_same_rounded_scores_and_unseen_labels_in_words(tmp_path, capsys,
                                                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", "R", *FAST]) == 0
    test_line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("test: "))
    assert re.fullmatch(r"test: (\w+ (\d\.\d{4}|\d+)(, )?)+", test_line), test_line
    assert main(["predict", "R", str(env["conll_test"]), "--reader", "--out", "p.txt", *FAST]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"{env['conll_test']}: {test_line[len('test: '):]}"  # the same numbers, the same rounding
    Path("t.txt").write_text(Path(env["conll_test"]).read_text().replace("B-PER", "B-ZZZ").replace("I-PER", "I-ZZZ"))
    assert main(["predict", "R", "t.txt", "--reader", "--out", "p2.txt", *FAST]) == 0
    err = capsys.readouterr().err
    assert "never seen in training (counted as errors): S-ZZZ 2" in err and "{" not in err and "'" not in err


def test_wsd_senses_says_where_the_vectors_came_from_in_words(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(bank_wsd_config(tmp_path) | {"knn": ["senses_glosses"]}))
    assert main(["wsd", "senses", "--config", "c.yaml", "--source", "elmo", "--out", "s.h5", *FAST]) == 0
    wrote = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("wrote s.h5"))
    assert re.search(r"senses \(their vectors from: semcor \d+, synset \d+, hypernym \d+, lexfile \d+", wrote), wrote
    assert "{" not in wrote and "'" not in wrote


def test_embed_says_what_its_time_covers(tmp_path, capsys):
    options, weights = make_bilm(tmp_path / "m")
    (tmp_path / "in.txt").write_text("the cat sat\na dog ran\n")
    assert main(["embed", str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--options", str(options),
                 "--weights", str(weights), "--progress", "off"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"wrote 2 sentences \(6 tokens\) to \S+out.hdf5: embedded in \d+\.\d s, after loading the model "
                     r"in \d+\.\d s", err), err


# ---------------------------------------------------------------- a packaged config's own defaults

def test_a_one_layer_source_beside_a_biLM_gets_no_warning_for_rows_it_cannot_have(tmp_path, capsys, monkeypatch):
    """As wsd_semcor (glove beside the biLMs, knn with average and dev_layer): the biLM has those rows, glove its
    one `layers` row, and nothing is warned about; with one-layer sources only, the rows are said absent."""
    cfg, raw = one_layer_wsd(tmp_path, monkeypatch, knn=["layers", "average", "dev_layer"])
    raw["sources"]["elmo"] = bank_wsd_config(tmp_path / "b")["sources"]["elmo"]
    raw["features"] = ["vec", "elmo"]  # the one-layer source first: its rows are known before the biLM's
    Path(cfg).write_text(yaml.safe_dump(raw))
    assert main(["wsd", "--config", cfg, "--out", "W", "--no-plot", *FAST]) == 0
    captured = capsys.readouterr()
    assert "has one layer" not in captured.err and " row for it" not in captured.err, captured.err
    import json

    rows = {r["id"] for r in json.loads(Path("W/scores.json").read_text())["rows"]}
    assert {"vec-knn-layer0", "elmo-knn-average", "elmo-knn-dev_layer"} <= rows and "vec-knn-average" not in rows, rows
    wsd = yaml.safe_load((PACKAGED_CONFIGS / "wsd_semcor.yaml").read_text())
    assert {"average", "dev_layer"} <= set(wsd["knn"]) and "glove" in wsd["features"]  # the case above


def test_messages_name_config_values_in_words_not_python_lists_or_dicts(tmp_path):
    from elmo_features.formats.default_model import resolve_bilm
    from elmo_features.util.errors import ConfigError, UsageError
    from elmo_tasks.data.conll import read_conll2003

    (tmp_path / "d.txt").write_text("EU B-ORG\n")
    with pytest.raises(ConfigError, match=r"columns: must start with 'word', got ner, word$"):
        read_conll2003(tmp_path / "d.txt", columns=["ner", "word"])
    with pytest.raises(UsageError, match=r"^biLM spec with the keys options: needs exactly the keys options and "
                                         r"weights; missing: weights$"):
        resolve_bilm({"options": str(tmp_path / "o.json")})

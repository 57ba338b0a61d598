"""``elmo-tasks wsd`` end to end on toy folders: a tiny random biLM, toy static vectors, a fake WordNet."""
from __future__ import annotations

import json

import pytest
import torch
import yaml

import elmo_tasks
from elmo_features import BiLM, BiLMOptions, save_bilm
from elmo_tasks.cli import main
from elmo_tasks.wsd.data.reader import read_gold_keys
from wsd_toy import ToyInstance as I
from wsd_toy import write_dataset, write_index_sense

FIN, RIVER = "bank%1:14:00::", "bank%1:17:01::"
FACTORY, FLORA = "plant%1:06:01::", "plant%1:03:00::"
HAPPEN = "take_place%2:30:00::"
TINY = {"lstm": {"cell_clip": 3, "use_skip_connections": True, "n_layers": 2, "proj_clip": 3, "projection_dim": 8,
                 "dim": 16},
        "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8]], "n_highway": 1, "n_characters": 262,
                     "max_characters_per_token": 50, "activation": "relu"}}


def bank(key):
    return I("bank", "bank", "NOUN", [key])


def plant(key):
    return I("plants", "plant", "NOUN", [key])


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    root = tmp_path_factory.mktemp("wsd")
    write_index_sense(root / "wn" / "index.sense", [RIVER, FIN, FACTORY, FLORA, HAPPEN, "plant%2:35:00::"])
    train = [["money", "in", "the", bank(FIN)], ["the", "river", bank(RIVER)], ["a", bank(FIN), "loan"],
             ["muddy", bank(RIVER), "of", "the", "river"], ["steel", plant(FACTORY), "workers"],
             ["green", plant(FLORA), "grow"], ["it", I("took place", "take_place", "VERB", [HAPPEN])],
             ["the", bank(FIN), "and", plant(FACTORY)], ["river", bank(RIVER), "flowers", plant(FLORA)]] * 2
    write_dataset(root / "train", "toytrain", train)
    test = [["the", "river", bank(RIVER)], ["money", bank(FIN)], ["green", plant(FLORA)],
            ["it", I("took place", "take_place", "VERB", [HAPPEN])], [I("plant", "plant", "VERB", ["plant%2:35:00::"])],
            [I("zebra", "zebra", "NOUN", ["zebra%1:05:00::"])]]
    write_dataset(root / "test", "toytest", test)
    write_dataset(root / "nogold", "nogold", [["a", I("bank", "bank", "NOUN", [])]])  # predictions only
    torch.manual_seed(0)
    (root / "bilm").mkdir()
    (root / "bilm" / "options.json").write_text(json.dumps(TINY))
    save_bilm(BiLM(BiLMOptions.from_dict(TINY)), root / "bilm" / "options.json", root / "bilm" / "weights.hdf5")
    words = "the river bank money in a loan muddy of steel plants workers green grow it took place and flowers"
    g = torch.Generator().manual_seed(1)
    (root / "glove.txt").write_text("".join(
        w + " " + " ".join(f"{v:.4f}" for v in torch.randn(5, generator=g).tolist()) + "\n" for w in words.split()))
    cfg = {"name": "toy_wsd", "wordnet": str(root / "wn"), "features": ["elmo", "glove"],
           "sources": {"elmo": {"name": "elmo", "bilm": str(root / "bilm")},
                       "glove": {"name": "static", "path": str(root / "glove.txt"), "format": "text"}},
           "head": {"name": "wsd_linear"}, "head_dev_every": 3,
           "training": {"max_epochs": 2, "batch_size": 4, "lr": 0.05}}
    (root / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    return root


def _run(toy, out, *extra):
    return main(["wsd", "--config", str(toy / "cfg.yaml"), "--train", str(toy / "train"), "--test", str(toy / "test"),
                 str(toy / "nogold"), "--out", str(out), "--runs-dir", str(out / "heads"),
                 "--cache-dir", str(toy / "cache"), "--progress", "off", *extra])


def test_end_to_end_outputs(toy, tmp_path):
    out = tmp_path / "out"
    assert _run(toy, out) == 0
    summary = json.loads((out / "scores.json").read_text())
    ids = [r["id"] for r in summary["rows"]]
    assert ids == ["wn_first_sense", "mfs", "elmo-knn-layer0", "elmo-knn-layer1", "elmo-knn-layer2",
                   "elmo-knn-average", "elmo-wsd_linear", "elmo-knn-learned_mix", "elmo-wsd_linear-layer0",
                   "elmo-wsd_linear-layer1", "elmo-wsd_linear-layer2", "glove-knn-layer0", "glove-wsd_linear"]
    rows = {r["id"]: r for r in summary["rows"]}
    # first sense: bank->RIVER right, bank(FIN) wrong, plant->FACTORY wrong, take_place right, plant VERB right,
    # zebra (not in WordNet) unanswered
    wn = rows["wn_first_sense"]["scores"]["toytest"]
    assert (wn["correct"], wn["answered"], wn["total"]) == (3, 5, 6)
    assert set(rows["wn_first_sense"]["scores"]) == {"toytest", "ALL"}  # the gold-less folder is not scored
    assert rows["mfs"]["backoff"] == 2  # plant VERB and zebra were never seen in training
    mix = rows["elmo-wsd_linear"]["head"]["features"]["mix_weights"]
    assert len(mix) == 3 and abs(sum(mix) - 1) < 1e-5
    assert rows["elmo-knn-learned_mix"]["weights"] == pytest.approx(mix, abs=1e-6)
    gold = read_gold_keys(toy / "test" / "toytest.gold.key.txt")
    for rid, row in rows.items():
        answers = read_gold_keys(out / "keys" / rid / "toytest.key.txt")
        assert "d000.s005.t000" not in answers  # zebra: no answer
        s = row["scores"]["toytest"]
        assert s["answered"] == len(answers) == 5
        assert s["correct"] == sum(answers[i][0] in gold[i] for i in answers)
        assert (out / "keys" / rid / "nogold.key.txt").read_text().startswith("d000.s000.t000 bank%1:")
    table = (out / "table5.md").read_text()
    assert summary["version"] == elmo_tasks.__version__
    assert f"* elmo-tasks {summary['version']}, git commit: `{summary['git_commit']}`" in table
    assert "| WordNet first sense | 54.5 | – | 54.5 | 65.9 (WordNet 1st Sense Baseline) |" in table  # P 60, R 50
    assert "69.0 (biLM, Second layer)" in table and "not ours" in table
    assert f"* Command: `elmo-tasks wsd --train {toy / 'train'} --test {toy / 'test'} {toy / 'nogold'} --config" in table
    assert "--out results/wsd_original" in table.split("official ELMo weights")[1]
    assert (out / "f1_per_layer.png").read_bytes()[:4] == b"\x89PNG"
    state = torch.load(out / "heads" / "elmo-wsd_linear" / "model.pt", weights_only=True)
    vocab = json.loads((out / "heads" / "elmo-wsd_linear" / "vocab.json").read_text())
    assert FLORA not in vocab["labels"]  # its sentences are all in the head's held-out dev part
    assert state["state_dict"]["head.weight"].shape == (len(vocab["labels"]), 16)  # senses x biLM output dim
    saved = yaml.safe_load((out / "heads" / "elmo-wsd_linear" / "config.yaml").read_text())
    assert saved["head"]["name"] == "wsd_linear" and saved["features"]["mix"]["name"] == "scalar"


def test_rerun_is_deterministic(toy, tmp_path):
    assert _run(toy, tmp_path / "a", "--features", "elmo", "--set", "probes=false") == 0
    assert _run(toy, tmp_path / "b", "--features", "elmo", "--set", "probes=false") == 0
    for rid in ("elmo-knn-layer2", "elmo-wsd_linear"):
        a = (tmp_path / "a" / "keys" / rid / "toytest.key.txt").read_text()
        assert a == (tmp_path / "b" / "keys" / rid / "toytest.key.txt").read_text()


def test_head_trained_on_its_target_rows_alone_is_the_head_trained_on_whole_arrays(toy, tmp_path, monkeypatch):
    import elmo_tasks.wsd.run as wsd_run
    from elmo_tasks.features.layered import FrozenLayerFeatures

    kept = []
    original = wsd_run.subset_items
    monkeypatch.setattr(wsd_run, "subset_items", lambda items, pos: kept.append(len(items)) or original(items, pos))
    assert _run(toy, tmp_path / "a", "--features", "elmo") == 0  # with the per-layer probes
    assert sum(kept) == 18  # every training sentence, kept as its target tokens' rows
    monkeypatch.setattr(FrozenLayerFeatures, "tokenwise", property(lambda self: False))  # the whole arrays
    kept.clear()
    assert _run(toy, tmp_path / "b", "--features", "elmo") == 0
    assert not kept
    for run in ("elmo-wsd_linear", "elmo-wsd_linear-layer1"):
        a, b = (torch.load(tmp_path / x / "heads" / run / "model.pt", weights_only=True)["state_dict"]
                for x in ("a", "b"))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    rows = [[r["scores"] for r in json.loads((tmp_path / x / "scores.json").read_text())["rows"]] for x in "ab"]
    assert rows[0] == rows[1]


def test_head_alone_keeps_no_instance_vectors_and_trains_the_same_head(toy, tmp_path, monkeypatch):
    import elmo_tasks.wsd.run as wsd_run

    assert _run(toy, tmp_path / "a", "--features", "elmo", "--set", "probes=false") == 0
    calls = []
    original = wsd_run.instance_layers
    monkeypatch.setattr(wsd_run, "instance_layers", lambda *a, **k: calls.append(k.get("vectors", True))
                        or original(*a, **k))
    assert _run(toy, tmp_path / "b", "--features", "elmo", "--set", "probes=false", "--set", "knn=[]") == 0
    assert calls == [False]  # the training set streamed once for the head's rows; no test-set vectors
    ids = [r["id"] for r in json.loads((tmp_path / "b" / "scores.json").read_text())["rows"]]
    assert ids == ["wn_first_sense", "mfs", "elmo-wsd_linear"]
    a, b = (torch.load(tmp_path / x / "heads" / "elmo-wsd_linear" / "model.pt", weights_only=True)["state_dict"]
            for x in ("a", "b"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_errors(toy, tmp_path, capsys):
    assert _run(toy, tmp_path / "x", "--features", "bert") == 2
    assert "unknown source 'bert'" in capsys.readouterr().err
    assert _run(toy, tmp_path / "x", "--set", "knn=[layer7]") == 2
    assert "cfg.yaml: knn[0]: must be one of 'layers', 'average', 'learned_mix', 'fixed_mix'" in capsys.readouterr().err
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "bad.data.xml").write_text('<corpus>\n<text id="d0">\n<sentence id="s">\n<instance id="i">x</instance>\n'
                                      "</sentence></text></corpus>\n")
    assert main(["wsd", "--config", str(toy / "cfg.yaml"), "--train", str(toy / "train"), "--test", str(bad),
                 "--features", "none", "--out", str(tmp_path / "y")]) == 2
    assert "bad.data.xml:4: <instance> without a lemma attribute" in capsys.readouterr().err


def test_a_test_set_without_instances_is_an_error(toy, tmp_path, capsys):
    write_dataset(tmp_path / "empty", "empty", [["no", "targets", "here"]])
    assert main(["wsd", "--config", str(toy / "cfg.yaml"), "--train", str(toy / "train"), "--test",
                 str(tmp_path / "empty"), "--features", "none", "--out", str(tmp_path / "y")]) == 2
    assert "test set empty has no <instance> elements" in capsys.readouterr().err


def test_fixed_mix_row_without_head(toy, tmp_path):
    out = tmp_path / "fm"
    assert _run(toy, out, "--features", "elmo", "--set", "knn=[fixed_mix]", "--set", "fixed_mix=[1, 1, 2]",
                "--set", "head=null") == 0
    rows = json.loads((out / "scores.json").read_text())["rows"]
    assert [r["id"] for r in rows] == ["wn_first_sense", "mfs", "elmo-knn-fixed_mix"]
    assert rows[2]["weights"] == [0.25, 0.25, 0.5] and not (out / "heads").exists()


def test_gold_keys_not_in_wordnet_are_counted_and_reported(toy, tmp_path, capsys):
    out = tmp_path / "out"
    assert _run(toy, out, "--features", "glove", "--set", "head=null") == 0
    err = capsys.readouterr().err
    assert "test set toytest: 1 gold key(s) are not WordNet 3.0 sense keys" in err
    assert "toytest.gold.key.txt:6: zebra%1:05:00::" in err  # file:line of the first one
    s = json.loads((out / "scores.json").read_text())
    test = {t["name"]: t for t in s["tests"]}["toytest"]
    assert test["gold_keys_not_in_wordnet"] == 1 and s["train_gold_keys_not_in_wordnet"]["count"] == 0
    assert "gold keys that are not: toytest 1" in (out / "table5.md").read_text()


def test_testing_on_the_training_folder_is_said(toy, tmp_path, capsys):
    assert main(["wsd", "--config", str(toy / "cfg.yaml"), "--train", str(toy / "train"), "--test", str(toy / "train"),
                 "--features", "none", "--out", str(tmp_path / "o"), "--progress", "off"]) == 0
    assert "is the training folder" in capsys.readouterr().err

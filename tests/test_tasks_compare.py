"""`elmo-tasks compare`: per-source mean +- std over seeds, mix weights, OOV, provenance, plots."""
from __future__ import annotations

import csv
import json
import statistics

import torch
import yaml

import elmo_tasks
from test_tasks_helpers import elmo_section, make_env, tagging_config
from elmo_tasks.cli import main


def test_compare_writes_summary_with_measured_numbers(tmp_path, capsys):
    torch.set_num_threads(1)
    env = make_env(tmp_path)
    cfg = tagging_config(env, max_epochs=2)
    glove = {"name": "static", "path": str(env["glove"])}
    cfg["compare"] = {"seeds": [1, 2], "sources": {
        "glove": glove,
        "layer1": elmo_section(env, layer=1),
        "glove+mix": {"name": "concat", "sources": [glove, elmo_section(env)]},
    }}
    conf = tmp_path / "cmp.yaml"
    conf.write_text(yaml.safe_dump(cfg, sort_keys=False))
    results = tmp_path / "results"
    rc = main(["compare", str(conf), "--results-dir", str(results), "--runs-dir", str(tmp_path / "runs"),
               "--cache-dir", str(tmp_path / "cache"), "--progress", "off"])
    assert rc == 0
    s = json.loads((results / "summary.json").read_text())
    assert [r["source"] for r in s["sources"]] == ["glove", "layer1", "glove+mix"]
    out = capsys.readouterr().out  # the result table on the terminal, then where the files are
    table = out[out.index("tiny_ner: f1 x100, mean ± sample std over seeds 1, 2"):].splitlines()
    assert table[1].split() == ["source", "test", "f1", "dev", "f1", "runs"]
    assert [line.split()[0] for line in table[2:5]] == ["glove", "layer1", "glove+mix"]
    assert "±" in table[2] and table[5] == f"wrote {results / 'summary.md'} ({s['wall_seconds']:.0f}s)"
    assert len(s["runs"]) == 6
    for row in s["sources"]:  # mean and sample std recomputed from the per-run numbers
        f1 = [r["test"]["f1"] for r in s["runs"] if r["source"] == row["source"]]
        assert abs(row["test"]["f1"]["mean"] - statistics.fmean(f1)) < 1e-12
        assert abs(row["test"]["f1"]["std"] - statistics.stdev(f1)) < 1e-12
    by = {r["source"]: r for r in s["sources"]}
    assert "mix_weights" not in by["glove"] and "mix_weights" not in by["layer1"]
    w = by["glove+mix"]["mix_weights"]
    assert len(w) == 3 and abs(sum(w) - 1) < 1e-5 and by["glove+mix"]["gamma"] > 0
    assert by["glove"]["oov_rate"]["test"] == 1 / 6  # "Acme" of 6 test tokens
    assert s["machine"]["cpu_cores"] >= 1 and s["git_commit"] and s["command"].startswith("elmo-tasks compare")
    assert s["version"] == elmo_tasks.__version__
    assert f"- elmo-tasks {s['version']}, git commit: `{s['git_commit']}`" in (results / "summary.md").read_text()
    md = (results / "summary.md").read_text()
    assert "| glove+mix |" in md and "git commit" in md and "16.67%" in md
    fp = json.loads(next((tmp_path / "runs" / "tiny_ner").glob("compare-*/layer1-seed1/metrics.json"))
                    .read_text())["features"]["bilm_fingerprint"]
    assert by["layer1"]["bilm_fingerprints"] == [fp] == by["glove+mix"]["bilm_fingerprints"]
    assert "bilm_fingerprints" not in by["glove"] and f"- **layer1** (biLM `{fp[:12]}`):" in md
    rows = list(csv.DictReader(open(results / "summary.csv")))
    assert len(rows) == 6 * 2 * 5  # runs x (dev, test) x metrics
    for png in ("scores.png", "mix_weights.png"):
        assert (results / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # --sources / --seeds restrict the grid; an unknown variant is an error listing the valid ones
    rc = main(["compare", str(conf), "--sources", "layer1", "--seeds", "4", "--results-dir", str(tmp_path / "r2"),
               "--runs-dir", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache"), "--progress", "off"])
    assert rc == 0 and len(json.loads((tmp_path / "r2" / "summary.json").read_text())["runs"]) == 1
    assert main(["compare", str(conf), "--sources", "bert", "--results-dir", str(tmp_path / "r3")]) == 2
    assert "unknown variant(s) bert; valid: glove, layer1, glove+mix" in capsys.readouterr().err


def test_single_seed_has_no_spread():
    from elmo_tasks.experiment.summary import _pm, mean_std

    assert mean_std([0.25]) == (0.25, None)
    assert _pm(dict(zip(("mean", "std"), mean_std([0.25])))) == "25.00 (1 seed)"
    assert _pm(dict(zip(("mean", "std"), mean_std([0.25, 0.35])))) == "30.00 ± 7.07"


def test_seeds_by_source_gives_a_source_its_own_seeds(tmp_path, capsys):
    torch.set_num_threads(1)
    env = make_env(tmp_path)
    cfg = tagging_config(env, max_epochs=1)
    glove = {"name": "static", "path": str(env["glove"])}
    cfg["compare"] = {"seeds": [1, 2], "seeds_by_source": {"layer1": [3]},
                      "sources": {"glove": glove, "layer1": elmo_section(env, layer=1)}}
    conf = tmp_path / "cmp.yaml"
    conf.write_text(yaml.safe_dump(cfg, sort_keys=False))
    args = ["--runs-dir", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache"), "--progress", "off"]
    assert main(["compare", str(conf), "--results-dir", str(tmp_path / "r1"), *args]) == 0
    s = json.loads((tmp_path / "r1" / "summary.json").read_text())
    assert [(r["source"], r["seed"]) for r in s["runs"]] == [("glove", 1), ("glove", 2), ("layer1", 3)]
    assert s["seeds"] == [1, 2, 3] and s["seeds_by_source"] == {"glove": [1, 2], "layer1": [3]}
    assert "- seeds: 1, 2, 3 (glove: 1, 2; layer1: 3);" in (tmp_path / "r1" / "summary.md").read_text()
    # --seeds overrides the config for every source
    assert main(["compare", str(conf), "--seeds", "5", "--results-dir", str(tmp_path / "r2"), *args]) == 0
    s = json.loads((tmp_path / "r2" / "summary.json").read_text())
    assert [(r["source"], r["seed"]) for r in s["runs"]] == [("glove", 5), ("layer1", 5)] and "seeds_by_source" not in s
    # a name that is not a source, or an empty list, is a config error naming the key
    for bad, msg in (({"mix": [1]}, "compare.seeds_by_source: 'mix' is not a source; sources: glove, layer1"),
                     ({"layer1": []}, "compare.seeds_by_source.layer1: expected a list of at least 1 item"),
                     ({"layer1": ["a"]}, "compare.seeds_by_source.layer1[0]: expected an integer")):
        cfg["compare"]["seeds_by_source"] = bad
        conf.write_text(yaml.safe_dump(cfg, sort_keys=False))
        assert main(["compare", str(conf), "--results-dir", str(tmp_path / "r3"), *args]) == 2
        assert msg in capsys.readouterr().err

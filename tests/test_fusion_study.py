"""The fusion study of docs/fusion.md: its commands resolve as written, and run on tiny data (the real configs,
the default biLM, data paths swapped) through scripts/fusion_summary.py to a table with the right numbers."""
from __future__ import annotations

import importlib.util
import json
import re
import shlex
import statistics
from pathlib import Path

import pytest
import torch

from test_tasks_helpers import make_env
from elmo_tasks.cli import main
from elmo_tasks.experiment.config import load_config
from wsd_toy import ToyInstance as I
from wsd_toy import write_dataset, write_index_sense
from elmo_tasks.wsd.config import load_wsd_config

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "fusion.md"
L, D = 3, 256  # the default biLM
FUSION_PARAMS = {"scalar": L + 1, "average": 0, "layer_attention": D + L + 1, "gated": L * D + 1,
                 "concat_project": L * D * D + D}


def doc_commands() -> list[str]:
    (block,) = re.findall(r"## Reproducing results/fusion/.*?```sh\n(.*?)```", DOC.read_text(), flags=re.S)
    return [line for line in block.splitlines() if line.strip()]


def options(argv: list[str], name: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == name]


def test_the_documented_commands_resolve_as_written():
    cmds = doc_commands()
    compares = [shlex.split(c) for c in cmds if c.startswith("elmo-tasks compare")]
    assert len(compares) == 4
    for argv in compares:
        cfg = load_config(REPO / argv[2], options(argv, "--set"))
        assert set(cfg.compare.sources) == set(FUSION_PARAMS)
        assert cfg.compare.seeds == [1, 2, 3]
        for src in cfg.compare.sources.values():
            assert src["name"] == "elmo" and src["bilm"] == "default"
            assert src["mix"].get("l2_coef") == (None if src["mix"]["name"] == "average" else 0.001)
        out = options(argv, "--results-dir")[0]
        if "--sources" in argv:  # the output placement: scalar input + a separate scalar output mix
            assert options(argv, "--sources") == ["scalar"] and out.endswith("_output")
            assert cfg.head["output_mix"] == {"name": "scalar", "layer_norm": None, "l2_coef": 0.001,
                                              "initial": None, "trainable": True}
            assert cfg.name.endswith("_output")
        else:
            assert cfg.head["output_mix"] is None
        assert out.startswith("results/fusion/")
    # the same head and training as the project's task configs
    for study, task in (("ner", "ner_conll2003"), ("sentiment", "sentiment_polarity")):
        a, b = load_config(REPO / f"configs/fusion/{study}.yaml"), load_config(REPO / f"configs/{task}.yaml")
        assert (a.head, a.training, a.data, a.features) == (b.head, b.training, b.data, b.features)
    (loop,) = [c for c in cmds if c.startswith("for s in")]
    argv = shlex.split(loop.split("; do ")[1].split("; done")[0].replace("$s", "2"))
    wsd = load_wsd_config(REPO / options(argv, "--config")[0], options(argv, "--set"))
    base = load_wsd_config(REPO / "configs/wsd_semcor.yaml")
    assert wsd.training.seed == 2 and wsd.features == list(FUSION_PARAMS) and not wsd.probes and wsd.knn == []
    assert (wsd.head, wsd.head_dev_every, {**vars(wsd.training), "seed": 1}) == \
        (base.head, base.head_dev_every, vars(base.training))
    assert cmds[-1] == "python scripts/fusion_summary.py results/fusion"


def _wsd_toy(root: Path) -> None:
    fin, river, factory, flora = "bank%1:14:00::", "bank%1:17:01::", "plant%1:06:01::", "plant%1:03:00::"
    write_index_sense(root / "wn" / "index.sense", [river, fin, factory, flora])
    bank = lambda k: I("bank", "bank", "NOUN", [k])  # noqa: E731
    plant = lambda k: I("plants", "plant", "NOUN", [k])  # noqa: E731
    train = [["money", "in", "the", bank(fin)], ["the", "river", bank(river)], ["steel", plant(factory), "workers"],
             ["green", plant(flora), "grow"], ["a", bank(fin), "loan"], ["muddy", bank(river)]] * 2
    write_dataset(root / "train", "toytrain", train)
    write_dataset(root / "test", "toytest", [["the", "river", bank(river)], ["green", plant(flora)]])


def load_script():
    spec = importlib.util.spec_from_file_location("fusion_summary", REPO / "scripts" / "fusion_summary.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_study_runs_end_to_end_on_tiny_data(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    env = make_env(tmp_path / "env")
    _wsd_toy(tmp_path / "wsd")
    monkeypatch.chdir(tmp_path)  # run folders are relative paths, as in the real study
    data = [f"data.train={env['conll_train']}", f"data.dev={env['conll_train']}", f"data.test={env['conll_test']}"]
    common = ["--seeds", "1,2", "--runs-dir", "runs", "--cache-dir", "cache", "--progress", "off"]
    for line in doc_commands():
        argv = shlex.split(line)
        if argv[:2] == ["elmo-tasks", "compare"] and "ner.yaml" in argv[2]:
            sets = [x for s in options(argv, "--set") + data + ["training.max_epochs=1"] for x in ("--set", s)]
            rest = argv[3:]
            rest = [a for i, a in enumerate(rest) if a != "--set" and (i == 0 or rest[i - 1] != "--set")]
            assert main(["compare", str(REPO / argv[2]), *rest, *sets, *common]) == 0
    wsd_sets = ["--set", f"wordnet={tmp_path / 'wsd' / 'wn'}", "--set", "training.max_epochs=1",
                "--set", "training.batch_size=4", "--set", "head_dev_every=3"]
    for s in (1, 2):
        assert main(["wsd", "--config", str(REPO / "configs/fusion/wsd.yaml"), "--set", f"training.seed={s}",
                     *wsd_sets, "--train", str(tmp_path / "wsd" / "train"), "--test", str(tmp_path / "wsd" / "test"),
                     "--out", f"results/fusion/wsd/seed{s}", "--runs-dir", f"runs/wsd{s}", "--no-plot",
                     "--cache-dir", "cache", "--progress", "off"]) == 0

    script = load_script()
    assert script.main(["results/fusion"]) == 0
    s = json.loads(Path("results/fusion/summary.json").read_text())
    ner = {r["variant"]: r for r in s["tasks"]["ner"]}
    assert list(ner) == [*FUSION_PARAMS, "scalar + output_mix scalar"]
    raw = json.loads(Path("results/fusion/ner/summary.json").read_text())
    for name, n in FUSION_PARAMS.items():
        r = ner[name]
        f1 = [100 * x["test"]["f1"] for x in raw["runs"] if x["source"] == name]
        assert r["test"]["mean"] == pytest.approx(statistics.fmean(f1)) and r["seeds"] == [1, 2]
        assert r["test"]["std"] == pytest.approx(statistics.stdev(f1))
        assert r["fusion_parameters"] == n and r["parameters_added"] == n - FUSION_PARAMS["scalar"]
        assert len(r["layer_weights"]) == L and sum(r["layer_weights"]) == pytest.approx(1.0, abs=1e-5)
        assert r["vs_scalar"] in ("-", "within seed noise", "better beyond seed noise", "worse beyond seed noise")
    out = ner["scalar + output_mix scalar"]
    K = len(json.loads(next(Path("runs").glob("fusion_ner_output/*/scalar-seed1/vocab.json")).read_text())["labels"])
    assert out["parameters_added"] == FUSION_PARAMS["scalar"] + D * K  # the output mix + its output weights
    assert len(out["output_layer_weights"]) == L
    wsd = {r["variant"]: r for r in s["tasks"]["wsd"]}
    assert list(wsd) == list(FUSION_PARAMS) and s["tasks"]["sentiment"] == []
    seed_f1 = [[r["scores"]["ALL"]["F1"] for r in json.loads(Path(f"results/fusion/wsd/seed{k}/scores.json")
                                                             .read_text())["rows"] if r["id"] == "gated-wsd_linear"]
               for k in (1, 2)]
    assert wsd["gated"]["test_scores"] == [f[0] for f in seed_f1]
    assert wsd["gated"]["parameters_added"] == FUSION_PARAMS["gated"] - FUSION_PARAMS["scalar"]
    md = Path("results/fusion/summary.md").read_text()
    assert "| concat_project |" in md and "+196,860" in md and "## Default" in md and "(not run yet)" in md
    assert Path("results/fusion/fusion_weights.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_verdicts_and_the_default_rule():
    script = load_script()
    assert script.verdict([80.0, 81.0], [78.0, 79.5]) == "better beyond seed noise"
    assert script.verdict([80.0, 81.0], [78.0, 80.5]) == "within seed noise"
    assert script.verdict([70.0, 71.0], [78.0, 80.5]) == "worse beyond seed noise"
    assert script.verdict([80.0], [70.0, 71.0]) == "n/a (one seed)"
    rows = lambda **v: [{"variant": k, "test": {"mean": m}, "vs_scalar": verdict}  # noqa: E731
                        for k, (m, verdict) in v.items()]
    keep = script.recommend({"ner": rows(scalar=(70, "-"), gated=(72, "better beyond seed noise")),
                             "wsd": rows(scalar=(60, "-"), gated=(61, "within seed noise"))})
    assert "the default stays `scalar`" in keep and "best mean is **gated**" in keep
    change = script.recommend({"ner": rows(scalar=(70, "-"), gated=(72, "better beyond seed noise")),
                               "wsd": rows(scalar=(60, "-"), gated=(62, "better beyond seed noise"))})
    assert "gated (on ner, wsd)" in change and "changing the default" in change

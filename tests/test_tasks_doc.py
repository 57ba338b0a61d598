"""docs/adding_a_head.md, followed literally: its head code, import line and config work as written."""
from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import torch
import yaml

from test_tasks_helpers import elmo_section, make_env
from tasks import registry
from tasks.config import resolve
from tasks.data import get_reader
from tasks.experiment import load_run, predict_examples, run_experiment
from tasks.features.base import FeatureContext

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "adding_a_head.md"

CONLL_WITH_POS = "John NNP B-NP B-PER\nsat VBD B-VP O\n\nthe DT B-NP O\ncat NN I-NP O\nsat VBD B-VP O\n\n" \
                 "a DT B-NP O\ndog NN I-NP O\nran VBD B-VP O\nhome NN B-NP O\n"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_doc_code_is_the_shipped_head_and_import_line():
    head_code, line = blocks("python")
    assert head_code == (REPO / "tasks" / "heads" / "token_tagger.py").read_text(encoding="utf-8")
    assert line.strip() in (REPO / "tasks" / "heads" / "__init__.py").read_text(encoding="utf-8").splitlines()
    (config,) = blocks("yaml")
    assert yaml.safe_load(config) == yaml.safe_load((REPO / "configs" / "pos_conll2003.yaml").read_text())


def test_following_the_doc_gives_a_working_pos_tagger(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    # steps 1 and 2: the head file, as a new module written from the doc (registered under a new name) and
    # imported; the global registry gets the extra head for this test only
    head_code, _ = blocks("python")
    path = tmp_path / "doc_token_tagger.py"
    path.write_text(head_code.replace("from ..", "from tasks.").replace("from .base", "from tasks.heads.base")
                    .replace('register("token_tagger")', 'register("doc_tagger")'))
    monkeypatch.setattr(registry.HEADS, "_entries", dict(registry.HEADS._entries))
    spec = importlib.util.spec_from_file_location("doc_token_tagger", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "doc_token_tagger", module)
    spec.loader.exec_module(module)
    assert registry.HEADS.get("doc_tagger") is module.TokenTagger
    # step 3: the doc's config, pointed at tiny files
    env = make_env(tmp_path)
    conll = tmp_path / "pos.txt"
    conll.write_text(CONLL_WITH_POS)
    (config,) = blocks("yaml")
    raw = yaml.safe_load(config)
    raw["head"]["name"] = "doc_tagger"
    raw["data"].update(train=str(conll), dev=str(conll), test=str(conll))
    raw["features"] = elmo_section(env, layer=1)
    raw["training"].update(max_epochs=60, patience=60, batch_size=3, lr=0.05)
    cfg = resolve(raw)
    # step 4: run, reload, predict
    ctx = FeatureContext(cache_dir=None, progress=False)
    metrics = run_experiment(cfg, tmp_path / "run", ctx, progress=False)
    assert json.loads((tmp_path / "run" / "vocab.json").read_text())["labels"] == ["DT", "NN", "NNP", "VBD"]
    assert metrics["test"]["accuracy"] >= 0.8  # a linear probe fits 4 training sentences of POS tags
    _, model = load_run(tmp_path / "run", ctx)
    examples = get_reader("conll2003")(conll, tag_column="pos")
    saved = json.loads((tmp_path / "run" / "predictions.json").read_text())["test"]
    assert predict_examples(cfg, model, examples, False) == saved

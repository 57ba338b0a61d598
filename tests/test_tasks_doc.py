"""docs/adding_a_head.md, followed literally: its head, in a package of the user's own loaded with --include, and
its config work as written; the head is the shipped token_tagger under another name."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import torch
import yaml

from test_tasks_helpers import elmo_section, make_env
from elmo_tasks import plugins, registry
from elmo_tasks.experiment.config import resolve
from elmo_tasks.data import get_reader
from elmo_tasks.experiment.run import load_run, predict_examples, run_experiment
from elmo_tasks.features.base import FeatureContext

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "adding_a_head.md"

CONLL_WITH_POS = "John NNP B-NP B-PER\nsat VBD B-VP O\n\nthe DT B-NP O\ncat NN I-NP O\nsat VBD B-VP O\n\n" \
                 "a DT B-NP O\ndog NN I-NP O\nran VBD B-VP O\nhome NN B-NP O\n"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def as_shipped(plugin_code: str) -> str:
    """The doc's plugin head under the shipped name (both import the toolkit by absolute names)."""
    return plugin_code.replace("pos_tagger", "token_tagger").replace("PosTagger", "TokenTagger")


def test_doc_code_is_the_shipped_head_in_a_users_package():
    (head_code,) = blocks("python")
    assert as_shipped(head_code) == (REPO / "tasks" / "heads" / "token_tagger.py").read_text(encoding="utf-8")
    assert "from ." not in head_code  # a user's package imports the toolkit by absolute names
    (config,) = blocks("yaml")
    shipped = yaml.safe_load((REPO / "tasks" / "configs" / "pos_conll2003.yaml").read_text())
    shipped["head"]["name"] = "pos_tagger"
    assert yaml.safe_load(config) == shipped
    (toml,) = blocks("toml")
    assert '[project.entry-points."elmo_tasks.plugins"]' in toml and 'my_heads = "my_heads.pos_tagger"' in toml


def test_following_the_doc_gives_a_working_pos_tagger(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    # steps 1 and 2: the head file in the user's package my_heads/, loaded as --include my_heads loads it; the
    # global registry gets the extra head for this test only
    (head_code,) = blocks("python")
    (tmp_path / "my_heads").mkdir()
    (tmp_path / "my_heads" / "__init__.py").write_text("")
    (tmp_path / "my_heads" / "pos_tagger.py").write_text(head_code)
    monkeypatch.setattr(registry.HEADS, "_entries", dict(registry.HEADS._entries))
    monkeypatch.setattr(plugins, "_INCLUDED", [])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in ("my_heads", "my_heads.pos_tagger"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    plugins.include("my_heads")
    assert registry.HEADS.get("pos_tagger") is sys.modules["my_heads.pos_tagger"].PosTagger
    monkeypatch.delitem(sys.modules, "my_heads")
    monkeypatch.delitem(sys.modules, "my_heads.pos_tagger")
    # step 3: the doc's config, pointed at tiny files
    env = make_env(tmp_path)
    conll = tmp_path / "pos.txt"
    conll.write_text(CONLL_WITH_POS)
    (config,) = blocks("yaml")
    raw = yaml.safe_load(config)
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


def test_adding_a_source_doc_shows_the_source_the_plugin_tests_run():
    from plugin_fixture import COMPONENTS
    import textwrap

    doc = (REPO / "docs" / "adding_a_source.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", doc, flags=re.S)
    body = code[code.index("@dataclass"):]
    assert body in textwrap.dedent(COMPONENTS)  # the class tests/test_plugins.py runs, word for word
    for line in code[: code.index("@dataclass")].strip().splitlines():
        assert not line or line in textwrap.dedent(COMPONENTS)  # and its imports

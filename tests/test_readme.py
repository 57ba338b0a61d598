"""The README's Python blocks run as written (the packaged Transformer swapped for a tiny local one)."""
from __future__ import annotations

import re
from pathlib import Path

import torch

from encoder_helpers import make_bert

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run(tmp_path, capsys):
    torch.set_num_threads(1)
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 3
    bert = make_bert(tmp_path / "bert")
    namespace: dict = {}
    for code in blocks:
        exec(compile(code.replace('load_encoder("minilm-l6")', f'load_encoder({str(bert)!r})'), "README", "exec"),
             namespace)
    assert namespace["out"]["elmo"].shape[:2] == (2, 6)
    assert [a.shape[:2] for a in namespace["arrays"]] == [(3, 4), (3, 2)]  # the tiny BERT: 3 hidden states
    assert "torch.Size" in capsys.readouterr().out


def test_readme_docs_and_results_name_no_issue_numbers_and_existing_paths():
    repo = README.parent
    texts = {p: p.read_text(encoding="utf-8") for p in [README, *sorted((repo / "docs").glob("*.md"))]}
    for path, text in texts.items():
        assert not re.search(r"\bissues? #?\d", text, flags=re.I), f"{path} names an issue number"
    readme = texts[README]
    for rel in sorted(set(re.findall(r"`((?:results|docs|configs|bench|scripts)/[\w./+-]*)`", readme))):
        target = rel.rstrip("/").replace("*", "")
        if "*" not in rel and "NAME" not in rel:
            assert (repo / target).exists(), f"README names {rel}, which does not exist"


def test_declared_requirements_match_the_readme_and_the_imports():
    import tomllib

    repo = README.parent
    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.10" and "Python 3.10 or newer" in README.read_text()
    deps = " ".join(project["dependencies"])
    for module, package in (("pyarrow", "pyarrow"), ("transformers", "transformers"), ("h5py", "h5py"),
                            ("huggingface_hub", "huggingface-hub"), ("scipy", "scipy")):
        used = any(re.search(rf"^\s*(import|from) {module}\b", p.read_text(), flags=re.M)
                   for p in list((repo / "tasks").rglob("*.py")) + list((repo / "elmo_features").rglob("*.py")))
        assert used and package in deps, f"{module} is imported but {package} is not declared"


def test_every_script_is_documented_in_scripts_readme():
    repo = README.parent
    doc = (repo / "scripts" / "README.md").read_text()
    for script in sorted((repo / "scripts").glob("*.py")):
        assert f"`{script.name}`" in doc, f"scripts/{script.name} is not in scripts/README.md"

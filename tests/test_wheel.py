"""The wheel, as a user outside this repository gets it: built from the source files, installed into a fresh
virtual environment in a folder with no source tree (the dependencies of the interpreter running the tests are
reused, so nothing is downloaded), then: the import name from a folder holding a ``tasks.py``, the packaged configs,
a tiny ``run`` from a packaged config's name, and a plugin package made in a temporary folder (a head, a feature
source and a reader), loaded once with ``--include`` and once through its ``elmo_tasks.plugins`` entry point, used
in ``compare`` and in ``wsd``."""
from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
from pathlib import Path

import pytest

from plugin_fixture import PLUGIN, write_plugin, write_task, write_wsd

REPO = Path(__file__).resolve().parents[1]
CONLL = "-DOCSTART- -X- -X- O\n\nJohn NNP B-NP B-PER\nlives VBZ B-VP O\nin IN B-PP O\nParis NNP B-NP B-LOC\n. . O O\n\n" \
        "Mary NNP B-NP B-PER\nsaw VBD B-VP O\nBerlin NNP B-NP B-LOC\n. . O O\n"


def run(cmd: list[str], cwd: Path, env: dict, expect: int = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == expect, (cmd, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def running_site_packages() -> list[str]:
    """The site-packages folders of the interpreter running the tests (a venv's own, not its base interpreter's)."""
    paths = [*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    if site.ENABLE_USER_SITE:
        paths.append(site.getusersitepackages())
    return list(dict.fromkeys(p for p in paths if Path(p).is_dir()))


def venv_site_packages(venv: Path) -> Path:
    (found,) = (venv / "lib").glob("python3*/site-packages")
    return found


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> tuple[Path, dict]:
    """A virtual environment with the wheel installed (and the system's packages visible for the dependencies)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # the files a source distribution holds: the build never writes into the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for pkg in ("elmo_features", "tasks"):
        shutil.copytree(REPO / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"),
         str(src)], tmp, env)
    (wheel,) = (tmp / "dist").glob("elmo_tasks-*.whl")
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", str(venv)], tmp, env)
    # the dependencies: the running interpreter's packages (torch, ...), listed after the venv's own. (A venv made
    # with --system-site-packages would see its base interpreter's packages instead: no torch when the tests run in
    # a venv.) A .pth file adds folders without running their .pth files, so the checkout's editable install stays out.
    (venv_site_packages(venv) / "_running_interpreter.pth").write_text("\n".join(running_site_packages()) + "\n")
    py = venv / "bin" / "python"
    run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)], tmp, env)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["ELMO_TASKS_DOWNLOAD_CACHE"] = str(tmp / "cache")
    return venv, env


def test_the_wheel_works_outside_the_repository(venv, tmp_path):
    venv_dir, env = venv
    py, cli = str(venv_dir / "bin" / "python"), str(venv_dir / "bin" / "elmo-tasks")
    where = run([py, "-c", "import elmo_features, elmo_tasks, torch; print(elmo_tasks.__file__); "
                 "print(elmo_features.__file__); print(torch.__file__)"], tmp_path, env).stdout.split()
    assert all(Path(w).is_relative_to(venv_dir) for w in where[:2]), where  # the installed copy, not the checkout
    # the dependencies are those of the interpreter running the tests, also when it runs in a venv of its own
    assert any(Path(where[2]).is_relative_to(p) for p in running_site_packages()), (where[2], running_site_packages())

    listed = run([cli, "configs", "list", "--all"], tmp_path, env).stdout
    for name in ("ner_conll2003", "sentiment_polarity", "wsd_semcor", "fusion/ner", "bilm/default"):
        assert f"\n  {name} " in listed
    run([cli, "configs", "show", "ner_conll2003", "--out", "mine.yaml"], tmp_path, env)
    assert "name: ner_conll2003" in (tmp_path / "mine.yaml").read_text()

    # a tiny run from a packaged config's name, on tiny data where `data get` would write it
    (tmp_path / "data" / "conll2003").mkdir(parents=True)
    for split in ("train", "valid", "test"):
        (tmp_path / "data" / "conll2003" / f"{split}.txt").write_text(CONLL)
    run([cli, "run", "ner_conll2003", "--set", "training.max_epochs=1", "--out", "r", "--progress", "off"],
        tmp_path, env)
    assert (tmp_path / "r" / "metrics.json").is_file()


def test_a_plugin_from_include_and_from_its_entry_point(venv, tmp_path):
    venv_dir, env = venv
    py, cli = str(venv_dir / "bin" / "python"), str(venv_dir / "bin" / "elmo-tasks")
    work = tmp_path / "work"
    write_task(work)
    write_wsd(work)
    write_plugin(work)  # a module next to the config: --include finds it in the current folder
    run([cli, "compare", "acme.yaml", "--include", PLUGIN, "--results-dir", "res1", "--progress", "off"], work, env)
    summary = (work / "res1" / "summary.md").read_text()
    assert "| hashed |" in summary
    import tomllib  # a summary made by the installed wheel records the package's version; --version prints it

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert run([cli, "--version"], work, env).stdout.strip() == f"elmo-tasks {version}"
    assert f"elmo-tasks {version}, git commit:" in summary
    shutil.rmtree(work / PLUGIN)

    # the same package, installed with an entry point in the group elmo_tasks.plugins: no --include needed
    dist = tmp_path / "acme-dist"
    write_plugin(dist)
    (dist / "pyproject.toml").write_text(textwrap.dedent(f"""
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "acme-nlp"
        version = "0.1"

        [project.entry-points."elmo_tasks.plugins"]
        acme = "{PLUGIN}.components"

        [tool.setuptools]
        packages = ["{PLUGIN}"]
        """))
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "whl"),
         str(dist)], tmp_path, env)
    (plugin_wheel,) = (tmp_path / "whl").glob("acme_nlp-*.whl")
    run([py, "-m", "pip", "install", "--no-deps", "--no-index", str(plugin_wheel)], tmp_path, env)
    assert "[acme_nlp.components]" in run([cli, "components", "features"], work, env).stdout
    run([cli, "compare", "acme.yaml", "--results-dir", "res2", "--progress", "off"], work, env)
    assert "| hashed |" in (work / "res2" / "summary.md").read_text()
    run([cli, "wsd", "--config", "wsd.yaml", "--out", "o", "--no-plot", "--progress", "off"], work, env)
    assert "| acme 1-NN, layer 1 |" in (work / "o" / "table5.md").read_text()


def test_the_import_name_is_elmo_tasks_even_beside_a_users_tasks_py(venv, tmp_path):
    """invoke's convention puts a tasks.py in the working folder: the installed package must not be named tasks."""
    venv_dir, env = venv
    (tmp_path / "tasks.py").write_text("raise SystemExit('the user tasks.py was imported')\n")
    out = run([str(venv_dir / "bin" / "python"), "-c", "from elmo_tasks.wsd.tagging import SenseTagger; "
               "import elmo_tasks; print(SenseTagger.__name__, elmo_tasks.__file__)"], tmp_path, env).stdout.split()
    assert out[0] == "SenseTagger" and Path(out[1]).is_relative_to(venv_dir), out
    top = sorted(p.name for p in venv_site_packages(venv_dir).iterdir())
    assert not [name for name in top if re.fullmatch(r"tasks(\.py|\.pth)?|tasks-.*", name)], top
    assert "elmo_tasks" in top and "elmo_features" in top


def test_the_package_list_covers_every_package_folder():
    """pyproject lists the packages one by one: a new folder with an __init__.py must be listed, or the wheel lacks it."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {folder: name for name, folder in setuptools["package-dir"].items()}
    found = set()
    for top in ("elmo_features", "tasks"):
        for init in (REPO / top).rglob("__init__.py"):
            parts = init.parent.relative_to(REPO).parts
            found.add(".".join((folders.get(parts[0], parts[0]), *parts[1:])))
    assert found == set(setuptools["packages"]), (sorted(found - set(setuptools["packages"])),
                                                  sorted(set(setuptools["packages"]) - found))

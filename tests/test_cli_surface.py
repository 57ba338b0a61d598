"""What a new user meets first on the command line: the version, help on every parser (no reStructuredText markup),
one meaning per option, argparse's own errors as one line, and hints that are commands that parse."""
from __future__ import annotations

import argparse
import ast
import contextlib
import io
import re
import shlex
from importlib import metadata
from pathlib import Path

import pytest

import elmo_features
import elmo_tasks
from elmo_features.util import provenance
from elmo_tasks.cli import build_parser, main

REPO = Path(__file__).resolve().parents[1]
HINT = re.compile(r"`(elmo-tasks [^`]*)`")  # a command quoted in a message: one to type, so it must parse


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("elmo-tasks",)):
    """Every parser with its command words, the nested sub-commands included (data get, wsd senses, ...)."""
    yield " ".join(path), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*path, name))


def _parses(command: str) -> str:
    """'' when ``command`` (``elmo-tasks ...``) parses, else argparse's error line."""
    argv = shlex.split(command)
    assert argv[0] == "elmo-tasks", command
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv[1:])
    except SystemExit as e:
        return err.getvalue().strip() if e.code else ""  # (--help exits 0)
    return ""


# ---------------------------------------------------------------- the version

@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_package_version(flag, capsys):
    with pytest.raises(SystemExit) as e:
        main([flag])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"elmo-tasks {metadata.version('elmo-tasks')}\n"


def test_both_packages_carry_the_metadata_version():
    assert elmo_tasks.__version__ == elmo_features.__version__ == metadata.version("elmo-tasks")


def test_a_checkout_that_is_not_installed_reads_pyprojects_version(monkeypatch):
    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    declared = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.MULTILINE).group(1)
    assert provenance.package_version() == declared
    monkeypatch.setattr(provenance, "REPO", REPO / "no such folder")
    assert provenance.package_version() == "unknown"


# ---------------------------------------------------------------- help on every parser

def test_every_parser_and_argument_has_help_without_markup():
    problems = []
    for name, parser in _walk(build_parser()):
        if not (parser.description or "").strip():
            problems.append(f"{name}: no description")
        texts = [parser.description or "", parser.epilog or ""]
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:  # the one-line help listed by the parent
                    if not (choice.help or "").strip():
                        problems.append(f"{name} {choice.dest}: no help line")
                    texts.append(choice.help or "")
                continue
            label = "/".join(action.option_strings) or action.dest
            if action.help is None or not action.help.strip():
                problems.append(f"{name} {label}: no help")
            elif action.help != argparse.SUPPRESS:
                texts.append(action.help)
        problems += [f"{name}: markup in {t!r}" for t in texts if "`" in t]
    assert not problems, "\n".join(problems)


def test_the_top_level_help_says_what_the_tool_does_with_examples_that_parse(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "sub-command per module" not in out and "Downstream NLP on frozen ELMo-style features" in out
    examples = [line.strip() for line in out.split("examples:")[1].splitlines() if line.strip().startswith("elmo-tasks ")]
    assert len(examples) >= 3
    assert {"compare", "data", "wsd"} <= {shlex.split(e)[1] for e in examples}
    assert [e for e in examples if _parses(e)] == []


@pytest.mark.parametrize("command", ["run", "compare", "wsd"])
def test_config_arguments_say_a_packaged_name_works(command):
    sub = dict(_walk(build_parser()))[f"elmo-tasks {command}"]
    config = next(a for a in sub._actions if a.dest == "config")
    assert "packaged config" in config.help and "configs list" in config.help and "configs/" not in config.help


def test_components_lines_show_no_markup(capsys):
    assert main(["components"]) == 0
    out = capsys.readouterr().out
    assert "`" not in out
    assert "Comma-separated label,text with standard CSV quoting" in out  # (its docstring: ``label,text``)
    assert main(["components", "features", "elmo"]) == 0
    assert "`" not in capsys.readouterr().out


# ---------------------------------------------------------------- one meaning per option

def _parse(argv):
    return build_parser().parse_args(argv)


def test_data_folder_and_download_cache_have_their_own_names():
    assert _parse(["data", "get", "conll2003", "--data-dir", "D"]).data_dir == "D"
    assert _parse(["data", "list", "--data-dir", "D"]).data_dir == "D"
    assert _parse(["embed", "in.txt", "out.h5", "--download-cache", "C"]).download_cache == "C"
    assert _parse(["models", "get", "minilm-l6", "--download-cache", "C"]).download_cache == "C"
    assert _parse(["models", "list", "--download-cache", "C"]).download_cache == "C"
    helps = {name: p.format_help() for name, p in _walk(build_parser())}
    assert not [n for n, h in helps.items() if "--download-dir" in h]  # the old spelling is not shown


def test_the_old_download_dir_spelling_still_works_and_warns_once(tmp_path, capsys):
    assert main(["data", "list", "--download-dir", str(tmp_path), "--download-dir", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert f"(data folder: {tmp_path}; set $ELMO_TASKS_DATA or --data-dir to change it)" in out
    assert err.count("warning:") == 1 and "--download-dir is now spelled --data-dir" in err
    assert main(["models", "list", "--download-dir", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "--download-dir is now spelled --download-cache" in err
    assert _parse(["embed", "in.txt", "out.h5", "--download-dir", "C"]).download_cache == "C"


# ---------------------------------------------------------------- argparse's errors and the hints

ARGPARSE_ERRORS = {  # argv -> words of the one line
    (): "the following arguments are required: COMMAND",
    ("nosuch",): "invalid choice: 'nosuch'",
    ("wsd", "senses"): "the following arguments are required: --source, --out",
    ("run",): "the following arguments are required: config",
    ("data", "get"): "the following arguments are required: NAME",
    ("embed", "in.txt", "out.h5", "--batch-size", "0"): "argument --batch-size: expected an integer >= 1, got 0",
    ("compare", "c.yaml", "--jobs"): "argument --jobs: expected one argument",
    ("run", "c.yaml", "--no-such-flag"): "error: elmo-tasks run: unrecognized arguments: --no-such-flag",
    ("data", "list", "extra"): "error: elmo-tasks data list: unrecognized arguments: extra",
}


@pytest.mark.parametrize("argv", list(ARGPARSE_ERRORS), ids=[" ".join(a) or "nothing" for a in ARGPARSE_ERRORS])
def test_argparse_errors_are_one_line_with_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and err.startswith("error: elmo-tasks"), err
    assert ARGPARSE_ERRORS[argv] in err and "usage:" not in err
    hints = HINT.findall(err)
    assert hints and all(h.endswith(" --help") and not _parses(h) for h in hints), err


def test_the_help_still_shows_the_usage(capsys):
    with pytest.raises(SystemExit) as e:
        main(["wsd", "senses", "--help"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("usage: elmo-tasks wsd senses ")


def _message_strings(path: Path):
    """(line, text) of every string in a module but its docstrings; an f-string's fields read as ``x``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            yield node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "x" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.lineno, node.value


def test_every_command_quoted_in_a_message_parses():
    """A command quoted in a message (`elmo-tasks ...`) is one to type: it parses (placeholders such as FILE stand
    for the user's values), never argparse's error about a missing argument."""
    failures = set()
    for root in ("tasks", "elmo_features"):
        for path in sorted((REPO / root).rglob("*.py")):
            for line, text in _message_strings(path):
                for command in HINT.findall(text):
                    problem = _parses(command)
                    if problem:
                        failures.add(f"{path.relative_to(REPO)}:{line}: {command}: {problem}")
    assert not failures, "\n".join(sorted(failures))


def _hints_of(argv, capsys) -> list[str]:
    """The commands quoted in the error a user's command prints (exit code 2)."""
    capsys.readouterr()
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2, (argv, err)
    return HINT.findall(err)


def test_the_hints_user_errors_print_are_commands_that_parse(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ELMO_TASKS_DATA", str(tmp_path / "data"))
    (tmp_path / "in.txt").write_text("the bank of the river\n")
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    from elmo_features.util.paths import RUN_MODEL_FILES

    for name in RUN_MODEL_FILES:
        (unfinished / name).write_text("{}")
    cases = {
        "wsd tag without its sense file": ["wsd", "tag", "in.txt", "--senses", "missing senses.h5"],
        "wsd tag with a text file": ["wsd", "tag", "in.txt", "--senses", "in.txt"],
        "run with an unknown config name": ["run", "tiny_ner_conl2003"],
        "configs show with a typo": ["configs", "show", "ner_conll"],
        "predict on an unfinished run": ["predict", unfinished, "in.txt"],
        "data get the framework without WordNet": ["data", "get", "wsd-framework", "--data-dir", tmp_path / "d"],
        "wsd senses without its required options": ["wsd", "senses"],
    }
    hints = {case: _hints_of(argv, capsys) for case, argv in cases.items()}
    assert all(hints.values()), hints  # every one of these errors says what to run
    assert any("wsd senses --source minilm --out 'missing senses.h5'" in h for h in hints[
        "wsd tag without its sense file"])
    bad = {case: [(h, _parses(h)) for h in hs if _parses(h)] for case, hs in hints.items()}
    assert not any(bad.values()), bad

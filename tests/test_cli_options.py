"""One flag, one meaning: the options every computing command shares are declared by one helper each."""
from __future__ import annotations

import argparse

import pytest
import torch

from elmo_features.util import threads
from elmo_tasks.cli import build_parser

COMPUTING = ("embed", "train-bilm", "eval-bilm", "run", "compare", "predict", "wsd")


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _option(parser: argparse.ArgumentParser, flag: str):
    return next((a for a in parser._actions if flag in a.option_strings), None)


@pytest.mark.parametrize("command", COMPUTING)
def test_threads_and_progress_mean_the_same_everywhere(command):
    p = _subparsers()[command]
    t = _option(p, "--threads")
    assert t is not None and t.default is None and t.help.startswith("torch CPU threads of each process (default: ")
    with pytest.raises(SystemExit):
        p.parse_args(["--threads", "0"])  # the same positive-integer type everywhere
    if command != "eval-bilm":
        assert _option(p, "--progress").choices == ("auto", "on", "off")
    cache = _option(p, "--cache-dir")  # the frozen-feature cache wherever it is taken
    assert command not in ("run", "compare", "predict", "wsd") or cache.help.startswith("frozen-feature cache folder")


def test_default_threads_share_the_cores_among_a_launchs_processes(monkeypatch):
    saved = torch.get_num_threads()
    monkeypatch.setattr(threads, "cpu_cores", lambda: 8)
    try:
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
        assert threads.set_threads(None) == 8 and torch.get_num_threads() == 8
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")  # torchrun: 3 local ranks share 8 cores
        assert threads.set_threads(None) == 2
        assert threads.set_threads(None, default=1) == 1 and threads.set_threads(5, default=1) == 5
        assert torch.get_num_threads() == 5
    finally:
        torch.set_num_threads(saved)


def test_components_lists_names_and_the_declared_keys(capsys):
    from elmo_tasks.cli import main
    from elmo_tasks.heads.crf_tagger import CrfTaggerConfig

    assert main(["components", "fusions"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("fusions:\n") and "  scalar " in out and "heads:" not in out
    assert main(["components", "heads", "crf_tagger"]) == 0
    out = capsys.readouterr().out
    assert "  dropout: number in [0, 1), default 0.5\n" in out
    assert "  output_mix: a fusion section {name: ...} (elmo-tasks components fusions), default null\n" in out
    keys = [line.split(":")[0].strip() for line in out.splitlines()[1:] if not line.startswith("      ")]
    assert set(keys) == set(CrfTaggerConfig.__dataclass_fields__)  # every key of the Config, each once
    assert len(keys) == len(set(keys))
    assert main(["components", "readers", "conll2003"]) == 0 and "  tag_column: string, default \"ner\"" in capsys.readouterr().out
    assert main(["components", "heads", "crf"]) == 2
    assert "unknown head 'crf' (did you mean crf_tagger?); valid head names: crf_tagger" in capsys.readouterr().err
    assert main(["components", "layers"]) == 2 and "valid kinds: heads, features" in capsys.readouterr().err

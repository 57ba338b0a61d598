"""The short hostile pass on the newest code, the cases fixed at once: eval-bilm's result with standard output closed
(X01), and a named pipe given as a senses file (W02)."""
from __future__ import annotations

import os
import sys

import pytest

from elmo_features.util.errors import PathError
from elmo_tasks.cli import main

from test_tasks_helpers import one_line_error


def test_x01_eval_bilm_refuses_a_closed_stdout_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", None)  # `eval-bilm ... >&-`: its perplexities go only to standard output
    missing = str(tmp_path / "nowhere")
    assert main(["eval-bilm", missing, "--options", missing, "--weights", missing, "--vocab", missing]) == 2
    one_line_error(capsys, "standard output is closed")


@pytest.mark.parametrize("api", [True, False])
def test_w02_a_named_pipe_as_senses_file_is_refused_not_waited_on(tmp_path, capsys, api):
    fifo = tmp_path / "senses.h5"
    os.mkfifo(fifo)  # opening it for reading would block until a writer comes
    if api:
        from elmo_tasks.wsd.tagging import SenseTagger

        with pytest.raises(PathError, match="is a named pipe, not a regular file"):
            SenseTagger(str(fifo))
        return
    (tmp_path / "in.txt").write_text("the bank\n")
    assert main(["wsd", "tag", str(tmp_path / "in.txt"), "--senses", str(fifo)]) == 2
    one_line_error(capsys, "is a named pipe, not a regular file")

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

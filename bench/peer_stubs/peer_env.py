"""For the scripts that run inside the AllenNLP venv (peer_worker.py, peer_embed_file.py): importing this installs
the import stubs (stub_finder) before AllenNLP is imported, and gives what both scripts use from it."""
from __future__ import annotations

import stub_finder

stub_finder.install()

import torch  # noqa: E402
from allennlp.modules.elmo import _ElmoBiLm, batch_to_ids  # noqa: E402,F401
from allennlp.nn.util import remove_sentence_boundaries  # noqa: E402,F401


def load_elmo_bilm(options: str, weights: str, threads: int) -> _ElmoBiLm:
    """AllenNLP's ``_ElmoBiLm`` from the options JSON and HDF5 weights, in eval mode, on ``threads`` threads."""
    torch.set_num_threads(threads)
    bilm = _ElmoBiLm(options, weights)
    bilm.eval()
    return bilm

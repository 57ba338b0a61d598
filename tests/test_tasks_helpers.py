"""Tiny fixtures for the task tests (imported by tests/test_tasks_*.py and tests/test_heads_*.py).

A tiny random biLM saved in the bilm-tf layout, tiny GloVe-style text vectors, tiny CoNLL-2003 and TSV
files, and config dicts wiring them together. Everything is built in a temp folder in well under a second.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from elmo_features import BiLM, BiLMOptions, save_bilm

TINY_OPTIONS = {
    "lstm": {"cell_clip": 3, "use_skip_connections": True, "n_layers": 2, "proj_clip": 3, "projection_dim": 8,
             "dim": 16},
    "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8], [3, 8]], "n_highway": 1,
                 "n_characters": 262, "max_characters_per_token": 50, "activation": "relu"},
}

CONLL_TRAIN = """-DOCSTART- -X- -X- O

John NNP B-NP B-PER
lives VBZ B-VP O
in IN B-PP O
Paris NNP B-NP B-LOC
. . O O

Mary NNP B-NP B-PER
Smith NNP I-NP I-PER
visited VBD B-VP O
Berlin NNP B-NP B-LOC

the DT B-NP O
cat NN I-NP O
sat VBD B-VP O

New NNP B-NP B-LOC
York NNP I-NP I-LOC
is VBZ B-VP O
big JJ B-ADJP O

Smith NNP B-NP B-PER
met VBD B-VP O
John NNP B-NP B-PER
in IN B-PP O
York NNP B-NP B-LOC
"""

CONLL_TEST = """John NNP B-NP B-PER
visited VBD B-VP O
Berlin NNP B-NP B-LOC

Acme NNP B-NP B-ORG
met VBD B-VP O
Mary NNP B-NP B-PER
"""

TSV_TRAIN = "pos\ta great and moving film\nneg\tdull and boring\npos\tgreat fun\nneg\ta boring mess\n" \
            "pos\tmoving and great\nneg\tboring , dull , long\n"
TSV_TEST = "pos\tgreat film\nneg\tboring film\nneu\tit is a film\n"

GLOVE_WORDS = ["john", "lives", "in", "paris", ".", "mary", "smith", "visited", "berlin", "the", "cat", "sat",
               "new", "york", "is", "big", "met", "a", "great", "and", "moving", "film", "dull", "boring", "fun",
               "mess", ",", "long"]


def make_bilm(folder: Path, seed: int = 0) -> tuple[Path, Path]:
    """A random tiny biLM saved as options.json + weights.hdf5 in ``folder``."""
    torch.manual_seed(seed)
    bilm = BiLM(BiLMOptions.from_dict(TINY_OPTIONS))
    with torch.no_grad():  # large enough that token vectors differ clearly (std ~0.1-0.5 per dim)
        for name, p in bilm.named_parameters():
            if "char_embedding" in name:
                p.normal_(0, 1)
            else:
                p.uniform_(-0.6, 0.6)
    folder.mkdir(parents=True, exist_ok=True)
    opts, weights = folder / "options.json", folder / "weights.hdf5"
    save_bilm(bilm, opts, weights)
    return opts, weights


def make_glove(path: Path, dim: int = 6, seed: int = 0) -> Path:
    """GloVe text vectors for GLOVE_WORDS (lowercased; so "Acme" is OOV)."""
    rng = np.random.default_rng(seed)
    path.write_text("".join(w + " " + " ".join(f"{x:.4f}" for x in rng.normal(size=dim)) + "\n"
                            for w in GLOVE_WORDS), encoding="utf-8")
    return path


def make_env(tmp: Path) -> dict[str, Path]:
    """All tiny files: biLM, vectors, CoNLL train/dev/test, TSV train/dev/test."""
    opts, weights = make_bilm(tmp / "bilm")
    files = {"options": opts, "weights": weights, "glove": make_glove(tmp / "glove.txt")}
    for name, text in [("conll_train", CONLL_TRAIN), ("conll_test", CONLL_TEST), ("tsv_train", TSV_TRAIN),
                       ("tsv_test", TSV_TEST)]:
        files[name] = tmp / f"{name}.txt"
        files[name].write_text(text, encoding="utf-8")
    return files


def elmo_section(env: dict, **kw) -> dict:
    return {"name": "elmo", "options_file": str(env["options"]), "weights_file": str(env["weights"]), **kw}


def tagging_config(env: dict, head: dict | None = None, features: dict | None = None, **training) -> dict:
    """A CoNLL NER config on the tiny files."""
    return {
        "name": "tiny_ner",
        "data": {"reader": "conll2003", "train": str(env["conll_train"]), "dev": str(env["conll_train"]),
                 "test": str(env["conll_test"]), "reader_options": {"scheme": "BIOES"}},
        "features": features or elmo_section(env),
        "head": head or {"name": "crf_tagger", "hidden_dim": 8, "dropout": 0.0},
        "training": {"max_epochs": 3, "batch_size": 2, "lr": 0.01, **training},
    }


def classification_config(env: dict, head: dict | None = None, features: dict | None = None) -> dict:
    return {
        "name": "tiny_sentiment",
        "data": {"reader": "tsv", "train": str(env["tsv_train"]), "dev": str(env["tsv_train"]),
                 "test": str(env["tsv_test"])},
        "features": features or elmo_section(env),
        "head": head or {"name": "sentence_classifier", "hidden_dim": 8, "dropout": 0.0},
        "training": {"max_epochs": 3, "batch_size": 2, "lr": 0.01},
    }


def static_config_file(tmp_path: Path, kind: str = "ner", data: dict | None = None, training: dict | None = None,
                       **top) -> tuple[dict, str]:
    """A tiny config on static vectors (fast; ``kind`` "ner" or "sentiment", one epoch), written to c.yaml: ``data``
    entries naming an env file take its path; ``training`` and top-level keys (``top``) are set. -> (env, its path)."""
    import yaml

    env = make_env(tmp_path)
    features = {"name": "static", "path": str(env["glove"])}
    cfg = tagging_config(env, features=features) if kind == "ner" else classification_config(env, features=features)
    cfg["data"].update({k: str(env[v]) if v in env else v for k, v in (data or {}).items()})
    cfg["training"].update({"max_epochs": 1, **(training or {})})
    cfg.update(top)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    return env, str(tmp_path / "c.yaml")


def one_line_error(capsys, *needles: str) -> str:
    """The captured stderr is one ``error:`` line holding every needle; returns it."""
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and err.count("\n") == 0, err
    for n in needles:
        assert n in err, err
    return err

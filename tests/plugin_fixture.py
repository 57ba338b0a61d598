"""A plugin package written into a temporary folder, as a user would write one outside this repository: a head,
a feature source with a frozen "model" file and per-layer arrays, and a reader, each registered with the
toolkit's decorators. Used by tests/test_plugins.py (``--include``) and tests/test_wheel.py (entry point)."""
from __future__ import annotations

import textwrap
from pathlib import Path

PLUGIN = "acme_nlp"

COMPONENTS = '''
"""acme_nlp: a head, a feature source and a reader from outside elmo-tasks."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from elmo_tasks.data.types import TaggedSentence
from elmo_tasks.features.base import FeatureSource, InputPath, pad_tokens
from elmo_tasks.heads.base import TaggingHead
from elmo_tasks.registry import FEATURES, HEADS, READERS


@READERS.register("word_slash_tag", path_kind="file")
def read_word_slash_tag(path, lowercase: bool = False):
    """One sentence per line, tokens written word/TAG."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        pairs = [t.rsplit("/", 1) for t in line.split()]
        if pairs:
            out.append(TaggedSentence([w.lower() if lowercase else w for w, _ in pairs], [t for _, t in pairs]))
    return out


@dataclass
class HashedConfig:
    model_path: str = "model.bin"  # the frozen "model": its bytes seed every vector
    dim: int = 4


def _model_bytes(config):
    return Path(config.model_path).read_bytes()


@FEATURES.register("hashed")
class HashedFeatures(FeatureSource):
    """Two frozen layers of hashed word vectors, seeded by a model file; the head sees their mean."""

    Config = HashedConfig
    offers_layers = True

    @classmethod
    def input_paths(cls, config):
        return [InputPath("model_path", config.model_path, "file")]

    @classmethod
    def frozen_fingerprints(cls, config, memo):
        return [hashlib.sha256(_model_bytes(config)).hexdigest()]

    def __init__(self, config, context):
        super().__init__(config, context)
        self.output_dim = config.dim
        self.seed = _model_bytes(config)

    def word_layers(self, sentences, split):
        out = []
        for s in sentences:
            rows = [np.frombuffer(hashlib.sha256(self.seed + w.encode() + bytes([k])).digest()[: 4 * self.config.dim],
                                  dtype=np.uint32).astype(np.float32) / 2**32 - 0.5
                    for k in range(2) for w in s]
            out.append(np.stack(rows).reshape(2, len(s), self.config.dim))  # (L=2, n, D)
        return out

    def precompute(self, sentences, split):
        return [a.mean(axis=0) for a in self.word_layers(sentences, split)]  # (n, D)

    def collate(self, items, T):
        return pad_tokens(items, T)  # (B, T, D)

    def forward(self, batch, mask):
        return batch


@dataclass
class LinearTaggerConfig:
    pass


@HEADS.register("linear_tagger")
class LinearTagger(TaggingHead):
    """A linear softmax over the tags, per token."""

    Config = LinearTaggerConfig
    block_output = True
    primary_metric = "accuracy"

    def __init__(self, config, input_dim, vocab):
        super().__init__(config, input_dim, vocab)
        self.labels = list(vocab["labels"])
        self.out = nn.Linear(input_dim, len(self.labels))

    @classmethod
    def demo_examples(cls):
        return [TaggedSentence("the cat sat".split(), "D N V".split())]

    def blank_example(self, tokens):
        return TaggedSentence(list(tokens), [self.labels[0]] * len(tokens))

    def loss(self, x, mask, examples):
        gold = torch.full(mask.shape, -100, dtype=torch.long)  # (B, T)
        for b, ex in enumerate(examples):
            gold[b, : len(ex.tags)] = torch.tensor([self.labels.index(t) for t in ex.tags])
        return F.cross_entropy(self.out(x).transpose(1, 2), gold, ignore_index=-100)

    def predict(self, x, mask, examples):
        best = self.out(x).argmax(-1)  # (B, T)
        return [[self.labels[i] for i in best[b, : len(ex.tokens)].tolist()] for b, ex in enumerate(examples)]

    def evaluate(self, examples, predictions):
        pairs = [(g, p) for ex, ps in zip(examples, predictions) for g, p in zip(ex.tags, ps)]
        return {"accuracy": sum(g == p for g, p in pairs) / len(pairs)}

    def format_prediction(self, example, prediction):
        return "\\n".join(f"{w}\\t{t}" for w, t in zip(example.tokens, prediction))
'''

BROKEN = '''
"""A head that forgot predict(): refused when it registers."""
from dataclasses import dataclass

from elmo_tasks.heads.base import TaggingHead
from elmo_tasks.registry import HEADS


@dataclass
class C:
    pass


@HEADS.register("half_head")
class HalfHead(TaggingHead):
    Config = C
    primary_metric = "accuracy"

    def loss(self, x, mask, examples):
        return x.sum()

    def evaluate(self, examples, predictions):
        return {"accuracy": 0.0}

    def format_prediction(self, example, prediction):
        return ""
'''

TRAIN = "the/D cat/N sat/V\na/D dog/N ran/V\nthe/D dog/N sat/V\na/D cat/N ran/V\n"

CONFIG = """
name: acme
data: {reader: word_slash_tag, train: train.txt, dev: train.txt, test: train.txt}
features: {name: hashed, model_path: model.bin}
head: {name: linear_tagger}
training: {max_epochs: 2, batch_size: 2, lr: 0.05}
compare:
  sources:
    hashed: {name: hashed, model_path: model.bin}
  seeds: [1]
"""


def write_plugin(root: Path, broken: bool = False) -> Path:
    """The package ``acme_nlp`` (and, with ``broken``, the module ``acme_broken``) under ``root``."""
    pkg = root / PLUGIN
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text('"""acme_nlp: components for elmo-tasks."""\n')
    (pkg / "components.py").write_text(textwrap.dedent(COMPONENTS).lstrip())
    if broken:
        (root / "acme_broken.py").write_text(textwrap.dedent(BROKEN).lstrip())
    return pkg


def write_task(folder: Path) -> Path:
    """A tiny tagging task for the plugin in ``folder``: config, data and the frozen model file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.txt").write_text(TRAIN)
    (folder / "model.bin").write_bytes(b"acme model v1")
    (folder / "acme.yaml").write_text(CONFIG.lstrip())
    return folder / "acme.yaml"


def write_wsd(folder: Path) -> None:
    """A tiny WSD task in the framework format (train and test folders) with its WordNet index.sense."""
    keys = {"bank": ["bank%1:14:00::", "bank%1:17:01::"], "run": ["run%2:38:00::", "run%2:38:01::"]}
    (folder / "wordnet").mkdir(parents=True, exist_ok=True)
    (folder / "wordnet" / "index.sense").write_text(
        "".join(f"{k} 0000000{i + 1} {i + 1} 0\n" for ks in keys.values() for i, k in enumerate(ks)))
    for name, n in (("train", 8), ("test", 4)):
        d = folder / name
        d.mkdir(exist_ok=True)
        xml = ['<?xml version="1.0" encoding="UTF-8"?>', '<corpus lang="en">', '<text id="d000">']
        gold = []
        for i in range(n):
            lemma = "bank" if i % 2 == 0 else "run"
            pos = "NOUN" if lemma == "bank" else "VERB"
            iid = f"d000.s{i:03d}.t000"
            xml += [f'<sentence id="d000.s{i:03d}">', f'<wf lemma="x" pos="X">w{i % 3}</wf>',
                    f'<instance id="{iid}" lemma="{lemma}" pos="{pos}">{lemma}</instance>', "</sentence>"]
            gold.append(f"{iid} {keys[lemma][(i // 2) % 2]}")
        (d / f"{name}.data.xml").write_text("\n".join(xml + ["</text>", "</corpus>"]) + "\n")
        (d / f"{name}.gold.key.txt").write_text("\n".join(gold) + "\n")
    (folder / "wsd.yaml").write_text(
        "name: acme_wsd\nwordnet: wordnet\ntrain: train\ntest: [test]\nfeatures: [acme]\n"
        "sources:\n  acme: {name: hashed, model_path: model.bin}\nknn: [layers, average]\nhead: null\n")

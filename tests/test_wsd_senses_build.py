"""`wsd senses` builds: SemCor streamed into per-sense sums gives the file the whole-array path gave, --lemmas builds
a few lemmas' senses (from their glosses alone without SemCor), and a missing SemCor is one line naming its command.
A tiny WordNet (test_wsd_senses) and a tiny random biLM."""
from __future__ import annotations

import h5py
import numpy as np
import pytest
import yaml

from test_tasks_helpers import make_bilm
from test_wsd_senses import write_wordnet

RIVER = ["we sat on the bank of the river", "they sat on the slope by the river", "I walked on the bank of the river",
         "the rock by the bank of the river", "a slope of rock", "the river bank was a slope"]
MONEY = ["the bank raised its interest rates", "the bank cut its interest rates", "a bank raised its rates",
         "the depository held the money", "an institution took the money", "the bank is an institution"]
KEYS = {"bank": {"river": "bank%1:17:01::", "money": "bank%1:14:00::"}, "slope": "slope%1:17:00::",
        "rock": "rock%1:05:00::", "depository": "depository%1:14:00::", "institution": "institution%1:14:00::"}


def write_train(d):
    """Training sentences in two documents: every tagged word of the tiny WordNet, "bank" in both senses."""
    d.mkdir()
    xml, gold = ['<?xml version="1.0" encoding="UTF-8"?>', "<corpus>"], []
    for i, (text, topic) in enumerate([(s, "river") for s in RIVER] + [(s, "money") for s in MONEY]):
        if i % 4 == 0:
            xml += (["</text>"] if i else []) + [f'<text id="d{i // 4:03d}">']
        sid, t = f"d{i // 4:03d}.s{i:03d}", 0
        xml.append(f'<sentence id="{sid}">')
        for w in text.split():
            key = KEYS.get(w)
            if key is None:
                xml.append(f'<wf lemma="{w}" pos="X">{w}</wf>')
                continue
            xml.append(f'<instance id="{sid}.t{t:03d}" lemma="{w}" pos="NOUN">{w}</instance>')
            gold.append(f"{sid}.t{t:03d} {key[topic] if isinstance(key, dict) else key}")
            t += 1
        xml.append("</sentence>")
    (d / "train.data.xml").write_text("\n".join(xml + ["</text>", "</corpus>"]) + "\n")
    (d / "train.gold.key.txt").write_text("\n".join(gold) + "\n")
    return d


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    write_wordnet(tmp_path / "wn")
    opts, weights = make_bilm(tmp_path / "bilm")
    cfg = {"name": "tiny", "wordnet": str(tmp_path / "wn"), "train": str(write_train(tmp_path / "train")),
           "test": [str(tmp_path / "train")],
           "sources": {"elmo": {"name": "elmo", "options_file": str(opts), "weights_file": str(weights)}},
           "knn": ["senses_glosses"], "head": None, "head_dev_every": 3, "gloss_texts": ["definition", "full"]}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _arrays(path) -> dict:
    with h5py.File(path, "r") as f:
        return {n: f[n][()] for n in ("keys", "context", "gloss", "step", "counts")}


def _old_build(cfg_path, out):
    """The sense file as `wsd senses` built it before streaming: every training instance's layers in one array
    (``vectors.instance_layers``), held out from it (``sense_method.hold_out``), summed whole (``SenseSums``)."""
    from dataclasses import replace

    from elmo_tasks.features.base import FeatureContext, build_features
    from elmo_tasks.wsd.config import load_wsd_config
    from elmo_tasks.wsd.data.examples import all_targets, load_inventory, to_examples
    from elmo_tasks.wsd.data.reader import load_dataset
    from elmo_tasks.wsd.example_sums import example_sums
    from elmo_tasks.wsd.knn import SenseSums
    from elmo_tasks.wsd.sense_method import hold_out, load_graph, plan_senses, sense_context
    from elmo_tasks.wsd.vectors import CHUNK, instance_layers

    cfg = load_wsd_config(str(cfg_path), [], features=["elmo"])
    context = FeatureContext(cache_dir=None, progress=False)
    section = cfg.sources["elmo"]
    source = build_features(section, replace(context, memo=context.memo.streaming()))
    train_ex = to_examples(load_dataset(cfg.train), load_inventory(cfg.wordnet))
    train_vecs = instance_layers(source, train_ex, "train", CHUNK)
    graph = load_graph(cfg.wordnet)
    held_out = hold_out(train_ex, train_vecs, cfg.head_dev_every, cfg.dev_split)
    plan = plan_senses(section, graph, held_out, context, cfg.gloss_texts, False,
                       examples=example_sums(section, graph, context, False))
    sums = SenseSums.from_targets(all_targets(train_ex), train_vecs)
    context_vecs, step = sense_context(graph, sums, plan)
    counts = np.zeros(len(graph.keys), dtype=np.int64)
    for k, c in zip(sums.keys, sums.counts):
        counts[graph.index[k]] = c
    return {"keys": np.array(graph.keys, dtype=object), "context": context_vecs, "gloss": plan.gloss, "step": step,
            "counts": counts}, plan


def test_streamed_sums_give_the_file_of_the_whole_array_path(tiny):
    from elmo_tasks.cli import main

    old, plan = _old_build(tiny / "c.yaml", tiny / "old.h5")
    assert main(["wsd", "senses", "--config", "c.yaml", "--source", "elmo", "--out", "new.h5", "--cache-dir", "none",
                 "--progress", "off"]) == 0
    new = _arrays(tiny / "new.h5")
    assert [k.decode() if isinstance(k, bytes) else k for k in new["keys"]] == list(old["keys"])
    for name in ("context", "gloss"):
        np.testing.assert_allclose(new[name], old[name], rtol=0, atol=1e-6)
    assert (new["step"] == old["step"]).all() and (new["counts"] == old["counts"]).all()
    with h5py.File(tiny / "new.h5", "r") as f:
        import json
        meta = json.loads(f.attrs["meta"])
    assert meta["layers"] == plan.weights and meta["w"] == plan.w and meta["pooling"] == plan.pooling


def test_choices_on_the_held_out_candidates_glosses_give_the_file_of_every_gloss(tiny, monkeypatch):
    """All of WordNet: the choices embed only the held-out instances' candidates' glosses, then every sense's
    chosen gloss once; the file is the one of every gloss embedded with every text (1e-6), and the cache holds the
    chosen (S, D) vectors, not every layer of every sense."""
    from elmo_tasks.cli import main
    from elmo_tasks.wsd import sense_build

    old, plan = _old_build(tiny / "c.yaml", tiny / "old.h5")
    seen = []
    monkeypatch.setattr(sense_build, "lean_glosses", lambda c, t, s: seen.append((c, t, s)) or c < s)
    assert main(["wsd", "senses", "--config", "c.yaml", "--source", "elmo", "--out", "lean.h5", "--cache-dir",
                 "cache", "--progress", "off"]) == 0
    (candidates, texts, senses), = seen
    assert texts == 2 and 0 < candidates < senses  # (some senses' glosses were embedded once, with the choice)
    new = _arrays(tiny / "lean.h5")
    for name in ("context", "gloss"):
        np.testing.assert_allclose(new[name], old[name], rtol=0, atol=1e-6)
    assert (new["step"] == old["step"]).all()
    with h5py.File(tiny / "lean.h5", "r") as f:
        import json
        meta = json.loads(f.attrs["meta"])
    assert (meta["gloss_text"], meta["pooling"], meta["gloss_layers"]) == \
        (plan.gloss_text, plan.pooling, plan.gloss_weights)
    assert meta["held_out"]["gloss_senses"] == candidates
    arrays = {a: np.load(a, mmap_mode="r").shape for a in (tiny / "cache" / "glosses").glob("*/*.npy")}
    assert [shape for a, shape in arrays.items() if a.name == "mixed.npy"] == [(senses, 1, new["gloss"].shape[1])]
    every_layer = [shape for a, shape in arrays.items() if a.name in ("sentence.npy", "lemma.npy")]
    assert len(every_layer) == 4 and {s[0] for s in every_layer} == {candidates}  # 2 texts x 2 poolings


def test_streaming_in_chunks_equals_one_pass_and_keeps_no_per_word_arrays(tiny):
    """Chunks of 2 sentences give the sums and held-out vectors of one array of every instance."""
    from elmo_tasks.features.base import FeatureContext, build_features
    from elmo_tasks.wsd.config import load_wsd_config
    from elmo_tasks.wsd.data.examples import all_targets, load_inventory, to_examples
    from elmo_tasks.wsd.data.reader import load_dataset
    from elmo_tasks.wsd.knn import SenseSums
    from elmo_tasks.wsd.semcor_sums import all_sums, held_out_of, stream_sums
    from elmo_tasks.wsd.sense_method import hold_out
    from elmo_tasks.wsd.vectors import instance_layers

    cfg = load_wsd_config("c.yaml", [], features=["elmo"])
    source = build_features(cfg.sources["elmo"], FeatureContext(cache_dir=None, progress=False))
    train_ex = to_examples(load_dataset(cfg.train), load_inventory(cfg.wordnet))
    seen = []
    word_layers = source.word_layers
    source.word_layers = lambda s, split: seen.append(len(s)) or word_layers(s, split)
    streamed = stream_sums(source, train_ex, 3, "documents", False, chunk=2)
    assert max(seen) == 2  # never more than a chunk's per-word arrays
    vecs = instance_layers(source, train_ex, "train")
    old = hold_out(train_ex, vecs, 3, "documents")
    new = held_out_of(streamed, train_ex, 3, "documents")
    assert [t.id for t in new.targets] == [t.id for t in old.targets]
    np.testing.assert_allclose(new.vecs, old.vecs, atol=1e-6)
    order = [new.sums.index[k] for k in old.sums.keys]
    assert sorted(new.sums.keys) == old.sums.keys
    np.testing.assert_allclose(new.sums.sums[order], old.sums.sums, atol=1e-6)
    whole = SenseSums.from_targets(all_targets(train_ex), vecs)
    every = all_sums(streamed)
    order = [every.index[k] for k in whole.keys]
    np.testing.assert_allclose(every.sums[order], whole.sums, atol=1e-6)
    assert (every.counts[order] == whole.counts).all()


def test_lemmas_build_only_their_senses_with_and_without_semcor(tiny, capsys):
    from elmo_tasks.cli import main

    assert main(["wsd", "senses", "--config", "c.yaml", "--source", "elmo", "--lemmas", "bank,Rock", "--out", "a.h5",
                 "--cache-dir", "cache", "--progress", "off"]) == 0
    a = _arrays(tiny / "a.h5")
    keys = [k.decode() if isinstance(k, bytes) else k for k in a["keys"]]
    assert keys == ["bank%1:14:00::", "bank%1:17:01::", "rock%1:05:00::"]
    assert (a["step"] >= 0).all() and a["counts"].tolist() == [4, 4, 2]  # their SemCor instances only
    # without SemCor: the glosses alone, said in one line
    (tiny / "train").rename(tiny / "elsewhere")
    capsys.readouterr()
    assert main(["wsd", "senses", "--config", "c.yaml", "--source", "elmo", "--lemmas", "bank", "--out", "b.h5",
                 "--cache-dir", "cache", "--progress", "off"]) == 0
    err = capsys.readouterr().err
    assert "no SemCor: each sense's vector is its gloss's" in err and len(err.strip().splitlines()) == 1
    b = _arrays(tiny / "b.h5")
    from elmo_tasks.wsd.senses import STEPS
    assert (b["step"] == STEPS.index("gloss")).all() and np.allclose(b["context"], b["gloss"])
    # the tagger reads it: "bank" by the river takes a sense of bank
    from elmo_tasks.wsd.tagging import SenseTagger
    row = SenseTagger("b.h5").tag([["the", "bank", "of", "the", "river"]])[0]
    assert [r for r in row if r["token"] == "bank"][0]["key"].startswith("bank%")
    # all of WordNet without SemCor: one line naming the command that gets it
    assert main(["wsd", "senses", "--config", "c.yaml", "--source", "elmo", "--out", "c.h5", "--cache-dir", "none",
                 "--progress", "off"]) == 2
    err = capsys.readouterr().err
    assert "`elmo-tasks data get wsd-framework`" in err and len(err.strip().splitlines()) == 1
    assert not (tiny / "c.h5").exists()
    # a lemma WordNet lacks: one line naming it
    (tiny / "elsewhere").rename(tiny / "train")
    assert main(["wsd", "senses", "--config", "c.yaml", "--source", "elmo", "--lemmas", "bank,zyzzyva", "--out",
                 "d.h5", "--cache-dir", "none", "--progress", "off"]) == 2
    assert "zyzzyva: not a lemma of WordNet" in capsys.readouterr().err


def test_mix_reads_a_memory_mapped_gloss_array_from_its_file(tmp_path, monkeypatch):
    """A cached gloss array (memory-mapped .npy) is mixed block by block from its file: the values of the array."""
    from elmo_tasks.wsd import senses

    a = np.random.default_rng(0).normal(size=(11, 3, 4)).astype(np.float16)  # (S, L, D)
    np.save(tmp_path / "g.npy", a)
    monkeypatch.setattr(senses, "MIX_ROWS", 4)
    mapped = np.load(tmp_path / "g.npy", mmap_mode="r")
    np.testing.assert_array_equal(senses.mix(mapped, [0.5, 0.0, 1.0]), senses.mix(a, [0.5, 0.0, 1.0]))
    assert senses._rows(mapped, 8, 12).shape == (3, 3, 4)


def test_two_torchrun_ranks_write_the_file_of_one_process(tiny):
    """`wsd senses` as 2 ranks (gloo): SemCor's sentences and the glosses shared, rank 0 gathers and writes the file
    one process writes (1e-6), rank 0 keeps the gloss cache; a rank given another command stops both."""
    import json

    from dist_launch import launch, start, wait
    from elmo_tasks.cli import main

    args = ["wsd", "senses", "--config", str(tiny / "c.yaml"), "--source", "elmo", "--progress", "off", "--threads", "1"]
    assert main([*args, "--out", str(tiny / "one.h5"), "--cache-dir", "none"]) == 0
    ranks = launch("tests.wsd_senses_ranks", [*args, "--out", str(tiny / "two.h5"), "--cache-dir", str(tiny / "cache")],
                   timeout=600)
    assert [r.returncode for r in ranks] == [0, 0], ranks[0].stderr + ranks[1].stderr
    assert "wrote" in ranks[0].stdout and not ranks[1].stdout  # rank 0 alone writes and says so
    one, two = _arrays(tiny / "one.h5"), _arrays(tiny / "two.h5")
    assert list(one["keys"]) == list(two["keys"])
    for name in ("context", "gloss"):
        np.testing.assert_allclose(two[name], one[name], rtol=0, atol=1e-6)
    assert (one["step"] == two["step"]).all() and (one["counts"] == two["counts"]).all()
    with h5py.File(tiny / "one.h5", "r") as f1, h5py.File(tiny / "two.h5", "r") as f2:
        m1, m2 = json.loads(f1.attrs["meta"]), json.loads(f2.attrs["meta"])
    assert {k: m1[k] for k in ("layers", "w", "pooling", "gloss_text", "prior", "steps", "train")} == \
        {k: m2[k] for k in ("layers", "w", "pooling", "gloss_text", "prior", "steps", "train")}
    assert list((tiny / "cache" / "glosses").iterdir())  # rank 0 kept the gathered glosses in its cache
    # the choices on the held-out candidates' glosses, then every sense's chosen gloss: the same file
    ranks = wait(start("tests.wsd_senses_ranks", [*args, "--out", str(tiny / "lean.h5"), "--cache-dir", "none"],
                       env={"LEAN_GLOSSES": "1"}), 600)
    assert [r.returncode for r in ranks] == [0, 0], ranks[0].stderr + ranks[1].stderr
    lean = _arrays(tiny / "lean.h5")
    for name in ("context", "gloss"):
        np.testing.assert_allclose(lean[name], one[name], rtol=0, atol=1e-6)
    # a rank launched with another command: both stop before any work, each saying so in one line
    three = [*args, "--out", str(tiny / "three.h5"), "--cache-dir", "none"]
    r0, r1 = wait(start("tests.wsd_senses_ranks", three, rank_args={1: [*three, "--set", "head_dev_every=2"]}), 300)
    assert (r0.returncode, r1.returncode) == (2, 2), r0.stderr + r1.stderr
    assert "rank 1 was given another job than rank 0: the command" in r0.stderr
    assert not (tiny / "three.h5").exists()

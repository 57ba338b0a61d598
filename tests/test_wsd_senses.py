"""Sense vectors for every WordNet sense on a tiny WordNet: the data files read, propagation through the synset,
the hypernyms (not instance hypernyms) and the lexicographer file, and 1-NN over all candidates with glosses."""
from __future__ import annotations

import numpy as np
import pytest

from elmo_tasks.wsd.data.examples import WsdTarget
from elmo_tasks.wsd.senses import Candidates, Graph, answer, candidate_cosines, propagate
from elmo_tasks.wsd.data.wordnet import WordNet

# synsets (offset, lexfile, lemmas, hypernym pointers, gloss)
NOUNS = [("00000010", "17", ["slope", "incline"], [], "an elevated geological formation"),
         ("00000020", "17", ["bank"], [("@", "00000010")], 'sloping land beside water; "the bank of the river"'),
         ("00000030", "14", ["institution"], [], "an organization founded for a purpose"),
         ("00000040", "14", ["bank", "depository"], [("@", "00000030")], "a financial institution that takes deposits"),
         ("00000050", "14", ["Fort_Knox"], [("@i", "00000030")], "a place holding gold"),
         ("00000060", "05", ["rock"], [], "a stone")]
KEYS = {"slope%1:17:00::": "00000010", "incline%1:17:00::": "00000010", "bank%1:17:01::": "00000020",
        "institution%1:14:00::": "00000030", "bank%1:14:00::": "00000040", "depository%1:14:00::": "00000040",
        "fort_knox%1:14:00::": "00000050", "rock%1:05:00::": "00000060"}


def write_wordnet(folder):
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for off, lex, lemmas, ptrs, gloss in NOUNS:
        words = " ".join(f"{w} 0" for w in lemmas)
        pointers = " ".join(f"{sym} {target} n 0000" for sym, target in ptrs)
        lines.append(f"{off} {lex} n {len(lemmas):02x} {words} {len(ptrs):03d} {pointers} | {gloss}  ".replace("  |", " |"))
    (folder / "data.noun").write_text("  1 licence header line\n" + "\n".join(lines) + "\n")
    for pos in ("verb", "adj", "adv"):
        (folder / f"data.{pos}").write_text("  1 licence header line\n")
    number = {}
    rows = []
    for key, off in sorted(KEYS.items()):
        lemma = key.split("%")[0]
        number[lemma] = number.get(lemma, 0) + 1
        rows.append(f"{key} {off} {number[lemma]} 0")
    (folder / "index.sense").write_text("\n".join(rows) + "\n")
    return folder


@pytest.fixture
def graph(tmp_path):
    return Graph(WordNet(write_wordnet(tmp_path / "wn")))


def test_wordnet_files_and_augmented_glosses(graph):
    wn = graph.wn
    assert wn.synset_of["bank%1:17:01::"] == "n00000020" and wn.synsets["n00000020"].hypernyms == ["n00000010"]
    assert wn.synsets["n00000050"].hypernyms == []  # an instance hypernym (@i) is not a hypernym
    assert wn.gloss_sentence("depository%1:14:00::") == "depository - bank , depository - a financial institution " \
                                                       "that takes deposits".split()
    river = "bank%1:17:01::"  # gloss 'sloping land beside water; "the bank of the river"'
    assert wn.gloss_sentence(river) == "bank - bank - sloping land beside water".split()  # LMMS: the definition
    assert wn.gloss_sentence(river, "full") == 'bank - bank - sloping land beside water ; " the bank of the ' \
                                               'river "'.split()


def test_propagation_steps(graph):
    e = np.eye(4, dtype=np.float32)
    keys = ["slope%1:17:00::", "institution%1:14:00::", "depository%1:14:00::"]  # what the training data tags
    vec, step = propagate(graph, keys, e[:3])
    at = {k: graph.index[k] for k in graph.keys}
    expect = {"slope%1:17:00::": 0, "institution%1:14:00::": 0, "depository%1:14:00::": 0,
              "incline%1:17:00::": 1, "bank%1:14:00::": 1,  # their synsets have a tagged sense
              "bank%1:17:01::": 2,  # its hypernym (slope) has a vector
              "fort_knox%1:14:00::": 3,  # only an instance hypernym: the lexicographer file (14) mean
              "rock%1:05:00::": -1}  # nothing in lexfile 05
    assert {k: int(step[at[k]]) for k in expect} == expect
    np.testing.assert_allclose(vec[at["bank%1:14:00::"]], e[2])  # the synset mean: depository's
    np.testing.assert_allclose(vec[at["bank%1:17:01::"]], e[0])  # the hypernym synset's vector
    np.testing.assert_allclose(vec[at["fort_knox%1:14:00::"]], (e[1] + e[2]) / 2)  # lexfile 14: two synsets


def test_one_nearest_neighbour_over_every_candidate_with_glosses(graph):
    keys = ["slope%1:17:00::", "bank%1:14:00::"]
    vec, step = propagate(graph, keys, np.array([[1, 0, 0], [0, 1, 0]], dtype=np.float32))
    cands = ["bank%1:17:01::", "bank%1:14:00::"]  # WordNet sense order: river first
    river = WsdTarget("t0", 0, 1, "bank", "NOUN", cands, ["bank%1:17:01::"])
    money = WsdTarget("t1", 0, 1, "bank", "NOUN", cands, ["bank%1:14:00::"])
    v = np.array([[0.9, 0.1, 0.0], [0.1, 0.9, 0.0]], dtype=np.float32)
    c = candidate_cosines([river, money], v, graph, vec, step, None)
    answers, backoff = answer([river, money], c, graph, {})
    assert answers == {"t0": "bank%1:17:01::", "t1": "bank%1:14:00::"} and backoff == 0  # the river sense was
    # never tagged: it is reached through its hypernym, no first-sense back-off
    gloss = np.zeros_like(vec)
    gloss[graph.index["bank%1:14:00::"]] = [1, 0, 0]  # a gloss that pulls the river-like vector to finance
    c = candidate_cosines([river], v[:1], graph, vec, step, gloss)
    assert answer([river], c, graph, {"NOUN": 0.0})[0]["t0"] == "bank%1:17:01::"
    assert answer([river], c, graph, {"NOUN": 2.0})[0]["t0"] == "bank%1:14:00::"  # weighted: the gloss decides
    assert isinstance(c, Candidates)


def test_the_wsd_command_adds_sense_vector_rows(tmp_path, monkeypatch, capsys):
    import json

    import yaml

    from elmo_tasks.cli import main

    write_wordnet(tmp_path / "wn")
    words = "slope bank river money depository institution rock the of sat on".split()
    rng = np.random.default_rng(0)
    (tmp_path / "vec.txt").write_text("".join(f"{w} " + " ".join(f"{x:.3f}" for x in rng.normal(size=4)) + "\n"
                                              for w in words))
    tagged = [("slope", "slope%1:17:00::"), ("bank", "bank%1:14:00::"), ("depository", "depository%1:14:00::")]
    for name, n in (("train", 40), ("test", 6)):
        d = tmp_path / name
        d.mkdir()
        xml, gold = ['<?xml version="1.0" encoding="UTF-8"?>', "<corpus>", '<text id="d000">'], []
        for i in range(n):
            lemma, key = tagged[i % 3] if name == "train" else ("bank", ["bank%1:17:01::", "bank%1:14:00::"][i % 2])
            xml += [f'<sentence id="d000.s{i:03d}">', '<wf lemma="the" pos="DET">the</wf>',
                    f'<instance id="d000.s{i:03d}.t000" lemma="{lemma}" pos="NOUN">{lemma}</instance>', "</sentence>"]
            gold.append(f"d000.s{i:03d}.t000 {key}")
        (d / f"{name}.data.xml").write_text("\n".join(xml + ["</text>", "</corpus>"]) + "\n")
        (d / f"{name}.gold.key.txt").write_text("\n".join(gold) + "\n")
    cfg = {"name": "tiny_senses", "wordnet": str(tmp_path / "wn"), "train": str(tmp_path / "train"),
           "test": [str(tmp_path / "test")], "features": ["vec"],
           "sources": {"vec": {"name": "static", "path": str(tmp_path / "vec.txt"), "format": "text"}},
           "knn": ["senses", "senses_glosses"], "head": None, "head_dev_every": 4, "gloss_texts": ["definition", "full"]}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    monkeypatch.chdir(tmp_path)
    assert main(["wsd", "--config", "c.yaml", "--out", "o", "--no-plot", "--progress", "off", "--cache-dir",
                 str(tmp_path / "cache")]) == 0
    rows = {r["id"]: r for r in json.loads((tmp_path / "o" / "scores.json").read_text())["rows"]}
    full, glosses = rows["vec-senses"], rows["vec-senses_glosses"]
    assert full["backoff"] == 0 and glosses["backoff"] == 0  # every candidate has a vector
    held = full["senses"]["held_out"]["examples"]  # "the bank of the river": WordNet's one tagged example
    assert held["tagged"] == 1 and held["senses"] == 1 and set(held["accuracy"]) == {"none", "unseen", "all"}
    examples = int(full["senses"]["examples"] != "none")  # bank%1:17:01:: from its example, not its hypernym
    assert full["senses"]["coverage"] == {"semcor": 3, "synset": 1, "hypernym": 1 - examples, "lexfile": 2,
                                          "examples": examples, "gloss": 0, "none": 1}
    assert set(glosses["senses"]["w"]) == {"NOUN"} and glosses["senses"]["pooling"] in ("sentence", "lemma")
    assert "sense vectors, + glosses" in (tmp_path / "o" / "table5.md").read_text()
    assert glosses["senses"]["gloss_text"] in ("definition", "full")
    assert {"glosses_definition_sentence_layer 0", "glosses_full_lemma_layer 0"} <= set(glosses["senses"]["held_out"])
    assert len(list((tmp_path / "cache" / "glosses").glob("*/sentence.npy"))) == 2  # both texts' glosses cached
    assert len(list((tmp_path / "cache" / "glosses").glob("*/target.npy"))) == 1  # and WordNet's examples
    for bad, says in (([], "list at least one of definition, full"), (["full", "full"], "lists one twice"),
                      (["gloss"], "definition")):
        (tmp_path / "bad.yaml").write_text(yaml.safe_dump(cfg | {"gloss_texts": bad}))
        assert main(["wsd", "--config", "bad.yaml", "--out", "o2", "--no-plot", "--progress", "off"]) == 2
        err = capsys.readouterr().err
        assert "gloss_texts" in err and says in err and not (tmp_path / "o2").exists()


def test_wsd_senses_and_tag_disambiguate_plain_text(tmp_path, monkeypatch, capsys):
    """`wsd senses` then `wsd tag` on the README's sentences: "bank" by a river and "bank" raising rates get two
    different synsets, the right ones (a tiny WordNet, a tiny random biLM, training sentences of both senses)."""
    import json

    import yaml

    from elmo_tasks.cli import main
    from test_tasks_helpers import make_bilm

    write_wordnet(tmp_path / "wn")
    opts, weights = make_bilm(tmp_path / "bilm")
    river = ["we sat on the bank of the river", "they sat on the bank of the river", "I walked on the bank of the river"]
    money = ["the bank raised its interest rates", "the bank cut its interest rates", "a bank raised its rates"]
    d = tmp_path / "train"
    d.mkdir()
    xml, gold = ['<?xml version="1.0" encoding="UTF-8"?>', "<corpus>", '<text id="d000">'], []
    for i, (text, key) in enumerate([(s, "bank%1:17:01::") for s in river] + [(s, "bank%1:14:00::") for s in money]):
        xml.append(f'<sentence id="d000.s{i:03d}">')
        for w in text.split():
            xml.append(f'<instance id="d000.s{i:03d}.t000" lemma="bank" pos="NOUN">bank</instance>' if w == "bank"
                       else f'<wf lemma="{w}" pos="X">{w}</wf>')
            if w == "bank":
                gold.append(f"d000.s{i:03d}.t000 {key}")
        xml.append("</sentence>")
    (d / "train.data.xml").write_text("\n".join(xml + ["</text>", "</corpus>"]) + "\n")
    (d / "train.gold.key.txt").write_text("\n".join(gold) + "\n")
    cfg = {"name": "tiny", "wordnet": str(tmp_path / "wn"), "train": str(d), "test": [str(d)],
           "sources": {"elmo": {"name": "elmo", "options_file": str(opts), "weights_file": str(weights)}},
           "knn": ["senses_glosses"], "head": None, "head_dev_every": 2}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    monkeypatch.chdir(tmp_path)
    assert main(["wsd", "senses", "--config", "c.yaml", "--source", "elmo", "--out", "senses.h5", "--cache-dir",
                 "none", "--progress", "off"]) == 0
    from elmo_tasks import __version__
    from elmo_tasks.wsd.sense_file import read_sense_meta

    assert read_sense_meta(tmp_path / "senses.h5")["version"] == __version__  # beside its git_commit
    (tmp_path / "in.txt").write_text("I sat on the bank of the river\nthe bank raised its interest rates\n")
    assert main(["wsd", "tag", "in.txt", "--senses", "senses.h5", "--out", "tags.jsonl"]) == 0
    first, second = [json.loads(line) for line in (tmp_path / "tags.jsonl").read_text().splitlines()]
    bank1, bank2 = first[4], second[1]
    assert bank1["token"] == bank2["token"] == "bank"
    assert (bank1["key"], bank1["synset"]) == ("bank%1:17:01::", "00000020-n")
    assert (bank2["key"], bank2["synset"]) == ("bank%1:14:00::", "00000040-n")
    assert "financial institution" in bank2["gloss"] and first[0]["key"] is None  # "I" has no sense here
    # a sense file made with another source is refused, naming both fingerprints
    other, _ = make_bilm(tmp_path / "bilm2", seed=1)
    weights.write_bytes((tmp_path / "bilm2" / weights.name).read_bytes())
    capsys.readouterr()
    assert main(["wsd", "tag", "in.txt", "--senses", "senses.h5"]) == 2
    assert "was made with another feature source: " in capsys.readouterr().err
    (tmp_path / "bilm").rename(tmp_path / "bilm_moved")  # the source's files moved: the sense file is named
    assert main(["wsd", "tag", "in.txt", "--senses", "senses.h5"]) == 2
    err = capsys.readouterr().err
    assert "senses.h5 was made with a feature source that does not load now" in err and "put it back" in err


def test_a_learned_mix_is_a_layer_candidate_chosen_on_held_out_sentences(graph):
    """Layer 1 is noise that layer 0 carries too: only the mix [1, -1] (a stand-in for a learned mix) separates the
    senses, so the plan must score it on the held-out instances and choose it over every single layer and sum."""
    from elmo_tasks.features.base import FeatureContext
    from elmo_tasks.wsd.knn import SenseSums
    from elmo_tasks.wsd.sense_method import HeldOut, plan_senses

    rng = np.random.default_rng(0)
    cands = ["bank%1:17:01::", "bank%1:14:00::"]
    signal = {cands[0]: np.array([1.0, 0.0]), cands[1]: np.array([0.0, 1.0])}

    def instances(n, start):
        targets, vecs = [], []
        for i in range(n):
            key = cands[i % 2]
            noise = rng.normal(scale=5.0, size=2)
            vecs.append([signal[key] + noise, noise])  # (L=2, D=2)
            targets.append(WsdTarget(f"t{start + i}", 0, 1, "bank", "NOUN", cands, [key]))
        return targets, np.asarray(vecs, dtype=np.float32)

    fit, fit_vecs = instances(40, 0)
    held, held_vecs = instances(40, 100)
    held_out = HeldOut(20, SenseSums.from_targets(fit, fit_vecs), held, held_vecs)
    plain = plan_senses({}, graph, held_out, FeatureContext(), glosses=False, progress=False)
    assert plain.layer_label != "mix learned by the head" and plain.held_out["layers"][plain.layer_label] < 1.0
    plan = plan_senses({}, graph, held_out, FeatureContext(), glosses=False, progress=False,
                       extra=[("mix learned by the head", [1.0, -1.0])])
    assert plan.layer_label == "mix learned by the head" and plan.weights == [1.0, -1.0]
    assert plan.held_out["layers"]["mix learned by the head"] == 1.0
    assert set(plan.held_out["layers"]) == {"layer 0", "layer 1", "sum of the top 2 layers", "mix learned by the head"}


class _Glosses:
    """A feature source stand-in: each gloss's words as (L=2, n, D=3) vectors from the words' lengths; it raises
    KeyboardInterrupt at call ``stop_at`` (a stop in the middle of the gloss phase)."""

    def __init__(self, stop_at: int | None = None):
        self.calls, self.stop_at = 0, stop_at

    def word_layers(self, sentences, split):
        self.calls += 1
        if self.calls == self.stop_at:
            raise KeyboardInterrupt
        return [np.stack([np.array([[len(w), i, 1.0] for i, w in enumerate(s)], dtype=np.float32)] * 2)
                for s in sentences]


def test_gloss_layers_are_cached_as_computed_and_resume_after_a_stop(graph, tmp_path, monkeypatch):
    from elmo_tasks.wsd import senses
    from elmo_tasks.wsd.gloss_cache import GlossStore

    monkeypatch.setattr(senses, "GLOSS_CHUNK", 3)  # 8 senses: chunks of 3, 3, 2
    whole = senses.gloss_layers(graph, _Glosses(), "fp", None, progress=False)  # in memory, no cache
    with pytest.raises(KeyboardInterrupt):
        senses.gloss_layers(graph, _Glosses(stop_at=3), "fp", tmp_path, progress=False)
    source = _Glosses()
    resumed = senses.gloss_layers(graph, source, "fp", tmp_path, progress=False)
    assert source.calls == 1  # only the chunk that was not done
    for pooling in senses.POOLINGS:
        np.testing.assert_array_equal(resumed[pooling], whole[pooling])
        assert isinstance(resumed[pooling], np.memmap)  # read from the disk as needed, not all held in memory
    again = _Glosses()
    senses.gloss_layers(graph, again, "fp", tmp_path, progress=False)
    assert again.calls == 0  # complete: read back
    other = _Glosses()
    senses.gloss_layers(graph, other, "another model", tmp_path, progress=False)
    assert other.calls == 3  # another fingerprint: its own folder, computed in full
    folder = GlossStore(tmp_path, "fp", senses.POOLINGS, len(graph.keys), 3).folder
    (folder / "lemma.npy").write_bytes((folder / "lemma.npy").read_bytes()[:100])  # cut short (a full disk)
    remade = _Glosses()
    again = senses.gloss_layers(graph, remade, "fp", tmp_path, progress=False)
    assert remade.calls == 3  # made again, not a traceback or a short array
    np.testing.assert_array_equal(again["lemma"], whole["lemma"])
    del again
    edited = np.load(folder / "sentence.npy", mmap_mode="r+")
    edited[:] = np.nan  # edited in place, the file whole: its checksum no longer matches
    edited.flush()
    del edited
    remade = _Glosses()
    again = senses.gloss_layers(graph, remade, "fp", tmp_path, progress=False)
    assert remade.calls == 3 and np.array_equal(again["sentence"], whole["sentence"])


def test_mix_in_row_chunks_equals_one_einsum(monkeypatch):
    from elmo_tasks.wsd import senses

    layers = np.random.default_rng(0).standard_normal((50, 3, 4)).astype(np.float16)
    whole = senses.mix(layers, [0.5, 0.0, 1.0])
    monkeypatch.setattr(senses, "MIX_ROWS", 7)
    np.testing.assert_array_equal(senses.mix(layers, [0.5, 0.0, 1.0]), whole)


def test_wordnet_examples_tag_their_synsets_lemma_found_by_morphy(tmp_path):
    """A quoted example of a synset's gloss tags the synset's lemma where it occurs inflected ("banks" -> bank,
    "took place" -> take_place); an example without any of the synset's lemmas tags nothing."""
    from elmo_tasks.wsd.data.wn_examples import example_texts, tagged_examples, tokenize

    folder = write_wordnet(tmp_path / "wn")
    text = (folder / "data.noun").read_text().replace('"the bank of the river"',
                                                      '"the banks of the river" ; "a muddy shore"')
    (folder / "data.noun").write_text(text)
    (folder / "data.verb").write_text("  1 licence header line\n00000070 41 v 01 take_place 0 000 | happen; "
                                      '"the meeting took place at noon"  \n')
    (folder / "verb.exc").write_text("took take\n")
    with open(folder / "index.sense", "a") as f:
        f.write("take_place%2:41:00:: 00000070 1 0\n")
    assert example_texts('land; "the bank" ; "a shore"') == ["the bank", "a shore"]
    assert tokenize("he didn't go, the well-known place.") == ["he", "didn't", "go", ",", "the", "well-known",
                                                                "place", "."]
    found = {(e.key, e.tokens[e.start:e.end]) for e in tagged_examples(WordNet(folder))}
    assert found == {("bank%1:17:01::", ("banks",)), ("take_place%2:41:00::", ("took", "place"))}


def test_example_only_senses_have_their_own_step_and_feed_the_synset_mean(graph):
    from elmo_tasks.wsd.knn import SenseSums
    from elmo_tasks.wsd.senses import STEPS, context_centroids

    e = np.eye(3, dtype=np.float32)
    semcor = SenseSums.from_keys([["slope%1:17:00::"], ["slope%1:17:00::"]], np.stack([e[:1], e[:1] * 3]))
    examples = SenseSums.from_keys([["depository%1:14:00::"], ["slope%1:17:00::"]], np.stack([e[1:2], e[2:3]]))
    keys, c, only = context_centroids(semcor, examples, "none", [1.0])
    assert keys == ["slope%1:17:00::"] and only == [] and np.allclose(c, [[2, 0, 0]])
    keys, c, only = context_centroids(semcor, examples, "unseen", [1.0])
    assert keys == ["depository%1:14:00::", "slope%1:17:00::"] and only == ["depository%1:14:00::"]
    assert np.allclose(c, [[0, 1, 0], [2, 0, 0]])  # slope's SemCor centroid is kept as it was
    keys, c, only = context_centroids(semcor, examples, "all", [1.0])
    assert np.allclose(c, [[0, 1, 0], [4 / 3, 0, 1 / 3]])  # the example is a third instance of slope
    vec, step = propagate(graph, keys, c, only)
    at = graph.index
    assert step[at["depository%1:14:00::"]] == STEPS.index("examples") and step[at["slope%1:17:00::"]] == 0
    assert step[at["bank%1:14:00::"]] == 1  # depository's synset: from its example-only centroid
    np.testing.assert_allclose(vec[at["bank%1:14:00::"]], e[1])
    with pytest.raises(ValueError, match="expected one of none, unseen, all"):
        context_centroids(semcor, examples, "some", [1.0])


def test_held_out_sentences_choose_how_wordnet_examples_are_used(graph):
    """The held-out instances are of the river bank, a sense the fit sentences never tag: its example's vector
    answers them, so the plan must choose to use the examples (and "none" when the examples mislead)."""
    from elmo_tasks.features.base import FeatureContext
    from elmo_tasks.wsd.knn import SenseSums
    from elmo_tasks.wsd.sense_method import HeldOut, plan_senses

    river, money = "bank%1:17:01::", "bank%1:14:00::"
    cands = [river, money]
    fit = [WsdTarget(f"f{i}", 0, 1, "bank", "NOUN", cands, [money]) for i in range(4)]
    held = [WsdTarget(f"h{i}", 0, 1, "bank", "NOUN", cands, [river]) for i in range(4)]
    vecs = np.array([[[0.0, 1.0]]] * 4, dtype=np.float32)  # (4, L=1, D=2): money along y
    held_vecs = np.array([[[1.0, 0.2]]] * 4, dtype=np.float32)  # river-like
    held_out = HeldOut(2, SenseSums.from_targets(fit, vecs), held, held_vecs)
    good = SenseSums.from_keys([[river]], np.array([[[1.0, 0.0]]], dtype=np.float32))
    plan = plan_senses({}, graph, held_out, FeatureContext(), glosses=False, progress=False, examples=good)
    assert plan.examples in ("unseen", "all") and plan.held_out["examples"]["accuracy"][plan.examples] == 1.0
    assert plan.held_out["examples"]["accuracy"]["none"] < 1.0  # the river sense only through its hypernym
    bad = SenseSums.from_keys([[river]], np.array([[[-1.0, 0.1]]], dtype=np.float32))
    plan = plan_senses({}, graph, held_out, FeatureContext(), glosses=False, progress=False, examples=bad)
    assert plan.examples == "none" and plan.example_sums is None


def test_held_out_documents_take_every_nth_document_whole():
    from elmo_features.util.errors import ConfigError
    from elmo_tasks.wsd.data.examples import WsdSentence
    from elmo_tasks.wsd.sense_method import check_hold_out, hold_out, held_out_sentences

    docs = ["d000", "d000", "d001", "d002", "d002", "d002", "d001", "d003"]  # d001's sentences are not adjacent
    train = [WsdSentence(["bank"], [WsdTarget(f"{d}.s{i}.t0", 0, 1, "bank", "NOUN", ["a%1:00:00::", "b%1:00:00::"],
                                              ["a%1:00:00::" if i % 2 else "b%1:00:00::"])], f"{d}.s{i:03d}")
             for i, d in enumerate(docs)]
    assert held_out_sentences(train, 2) == [i % 2 == 1 for i in range(8)]
    assert held_out_sentences(train, 2, "documents") == [d in ("d001", "d003") for d in docs]
    vecs = np.arange(16, dtype=np.float32).reshape(8, 1, 2)  # (N, L, D)
    held = hold_out(train, vecs, 2, "documents")
    assert held.by == "documents" and [t.id for t in held.targets] == ["d001.s2.t0", "d001.s6.t0", "d003.s7.t0"]
    assert held.vecs[:, 0, 0].tolist() == [4.0, 12.0, 14.0] and held.sums.counts.sum() == 5
    with pytest.raises(ConfigError, match="holds out no annotated instance of the 4 training documents \\(every 5th "
                                          "document\\).*or dev_split: sentences"):
        check_hold_out(train, 5, "documents")
    check_hold_out(train, 5)  # every 5th sentence: the fifth

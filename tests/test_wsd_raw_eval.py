"""``elmo-tasks wsd raw-eval``: test sentences joined back into raw text (the detokenizer and its spans), the
tagger's tokens aligned to the gold instances by span, the framework's scores computed by hand on a toy case, and
the first-sense baseline through the raw-text pipeline; end to end on a tiny WordNet, sense file and biLM."""
from __future__ import annotations

import json

import numpy as np
import pytest

import elmo_tasks.data  # noqa: F401 (first: elmo_tasks.wsd.data.reader cannot be imported first)
from elmo_tasks.cli import main
from elmo_tasks.data.detokenize import detokenize
from elmo_tasks.data.tokenizer import tokenize, tokenize_spans
from elmo_tasks.wsd.data.reader import load_dataset
from elmo_tasks.wsd.raw_eval import align, evaluate, evaluate_set, raw_sentences, render
from elmo_tasks.wsd.tag_output import TaggedSentence, TaggedText, TaggedToken

# isort: split
from test_wsd_tag_text import write_wordnet
from wsd_tag_fixture import bank_sentences, build_sense_file
from wsd_toy import ToyInstance as I
from wsd_toy import write_dataset


# ---------------------------------------------------------------- the detokenizer

@pytest.mark.parametrize("tokens,text", [
    ("I deposited money at the bank , then fished by the river .".split(),
     "I deposited money at the bank, then fished by the river."),
    ("He said `` I do n't know '' ( really ) ; it cost $ 5 , 10 % more ??!!".split(),
     'He said "I don\'t know" (really); it cost $5, 10% more??!!'),
    (['She', 'said', '"', 'no', '"', 'and', '"', 'yes', '"', '.'], 'She said "no" and "yes".'),
    ("the students ' books , Mary 's CA N'T -LRB- x -RRB- -- fine ...".split(),
     "the students' books, Mary's CAN'T (x) -- fine..."),
])
def test_detokenize_joins_punctuation_and_clitics_back(tokens, text):
    raw, spans = detokenize(tokens)
    assert raw == text
    written = {"``": '"', "''": '"', "-LRB-": "(", "-RRB-": ")"}
    assert [raw[s:e] for s, e in spans] == [written.get(t, t) for t in tokens]
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def test_the_package_tokenizer_splits_detokenized_text_into_the_same_tokens_at_the_same_spans():
    tokens = "`` We do n't bank on it , '' said Mr. Smith ( of the U.S. bank ) : $ 1,000 isn't 10 % .".split()
    tokens[tokens.index("isn't")] = "money"  # (a framework token never holds a clitic)
    raw, spans = detokenize(tokens)
    got = tokenize_spans(raw)
    assert [t for t, _, _ in got] == ['"' if t in ("``", "''") else t for t in tokens] == tokenize(raw)
    assert [(s, e) for _, s, e in got] == spans


def test_detokenize_refuses_a_string_and_tokens_with_spaces():
    with pytest.raises(TypeError):
        detokenize("a b")
    with pytest.raises(ValueError, match="token 1"):
        detokenize(["a", "b c"])


# ---------------------------------------------------------------- alignment and scores by hand (a fake tagger)

def tok(word, start, key=None, lemma=None, pos=None):
    return TaggedToken(word, start, start + len(word), key=key, lemma=lemma, pos=pos)


def test_align_takes_the_token_with_exactly_the_instance_span():
    sent = TaggedSentence("the river bank,", [tok("the", 0), tok("river", 4, "r%1"), tok("bank", 10, "b%1"),
                                              tok(",", 14)])
    spans = {"a": (4, 9), "b": (10, 14), "multi": (4, 14), "off": (10, 15)}
    assert {k: t.token for k, t in align(sent, spans).items()} == {"a": "river", "b": "bank"}


class FakeSource:
    def word_layers(self, sentences, split):
        return [np.ones((1, len(s), 2), dtype=np.float32) for s in sentences]  # (L=1, n, D=2)


class FakeTagger:
    """Tags by a fixed table word -> (key, lemma, pos); gold-lemma answers: the last candidate sense."""

    meta = {"layers": [1.0]}
    source = FakeSource()
    TABLE = {"banks": ("bank%1:14:00::", "bank", "NOUN"), "fished": ("fish%2:38:00::", "fish", "VERB"),
             "river": ("river%1:17:00::", "river", "NOUN"), "plan": ("plan%2:31:00::", "plan", "VERB")}
    by_lemma = {("bank", "NOUN"): ["bank%1:17:01::", "bank%1:14:00::"], ("fish", "VERB"): ["fish%2:38:00::"],
                ("river", "NOUN"): ["river%1:17:00::"], ("plan", "NOUN"): ["plan%1:09:00::", "plan%1:06:00::"],
                ("plan", "VERB"): ["plan%2:31:00::", "plan%2:36:00::"]}
    keys = sorted({k for ks in by_lemma.values() for k in ks})
    index = {k: i for i, k in enumerate(keys)}
    has = np.ones(len(keys), dtype=bool)
    pos_head = None

    def tag(self, text):
        out = TaggedText()
        for n, line in enumerate(text.split("\n"), 1):
            toks = [TaggedToken(t, s, e, *self.TABLE.get(t, ())) for t, s, e in tokenize_spans(line)]
            out.append(TaggedSentence(line, toks, n))
        return out

    def best_sense(self, cands, v):
        return cands[-1], 1.0, None


@pytest.fixture
def toy(tmp_path):
    bank = I("banks", "bank", "NOUN", ["bank%1:14:00::"])  # raw: bank%1:14:00 (right); gold: last = 1:14 (right)
    river = I("river", "river", "NOUN", ["river%1:17:00::"])  # right both ways
    fished = I("fished", "fish", "VERB", ["fish%2:38:00::"])
    plan = I("plan", "plan", "NOUN", ["plan%1:09:00::"])  # raw: the verb (wrong); gold: last noun sense (wrong)
    multi = I("river bank", "river_bank", "NOUN", ["bank%1:17:01::"])  # never aligned; no gold lemma in the file
    write_dataset(tmp_path / "toy", "toy", [["the", bank, ",", "then", "I", fished, "by", "the", river, "."],
                                            ["``", "a", plan, "''", "on", "the", multi, "."]])
    return load_dataset(tmp_path / "toy")


def test_scores_by_hand_on_a_toy_set(toy):
    r = evaluate_set(FakeTagger(), toy)
    assert [s.text for s in raw_sentences(toy)] == ["the banks, then I fished by the river.", '"a plan" on the river bank.']
    assert (r["instances"], r["multiword"], r["aligned"]) == (5, 1, 4)
    raw = r["scores"]["raw"]  # 4 answered (banks, fished, river right; plan wrong), 5 instances
    assert (raw["correct"], raw["answered"], raw["total"]) == (3, 4, 5)
    assert (raw["P"], raw["R"], raw["F1"], raw["coverage"]) == (75.0, 60.0, round(100 * 2 * .75 * .6 / 1.35, 1), 80.0)
    assert (r["pos_as_gold"], r["lemma_as_gold"]) == (3, 4)  # plan: a verb
    first = r["scores"]["raw_first_sense"]  # bank%1:17:01 (wrong), fish, river (right), plan%2:31 (wrong)
    assert (first["correct"], first["answered"]) == (2, 4)
    gold = r["scores"]["gold"]  # last candidate of the gold lemma: bank 1:14 right, fish, river right, plan 1:06 wrong
    assert (gold["correct"], gold["answered"], gold["coverage"]) == (3, 4, 80.0)
    gfirst = r["scores"]["gold_first_sense"]  # bank%1:17:01 wrong, fish, river right, plan%1:09 right
    assert (gfirst["correct"], gfirst["answered"]) == (3, 4)


def test_all_sums_the_sets_counts(toy, tmp_path):
    res = evaluate(FakeTagger(), [toy, toy], tmp_path / "keys")
    a = res["all"]
    assert (a["instances"], a["aligned"], a["scores"]["raw"]["correct"], a["scores"]["raw"]["F1"]) == \
        (10, 8, 6, res["tests"][0]["scores"]["raw"]["F1"])
    lines = (tmp_path / "keys" / "raw" / "toy.key.txt").read_text().splitlines()
    assert len(lines) == 4 and lines[0].split()[1] == "bank%1:14:00::"
    md = render({"name": "x", "command": "c", "git_commit": "abc", "machine": {"cpu_model": "cpu", "cpu_cores": 2,
                 "torch_threads": 2}, "date": "d", "senses": "s.h5", "source": "minilm", "lemmas": None,
                 "prior": False, "pos_head": False, **res})
    assert "| raw text (tagger's tokens, lemma, POS) | 66.7 | 66.7 | 66.7 |" in md
    assert "| coverage (answered / all) | 80.0% | 80.0% | 80.0% |" in md


# ---------------------------------------------------------------- end to end: elmo-tasks wsd raw-eval

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = build_sense_file(tmp_path_factory.mktemp("raweval"), write_wordnet, bank_sentences())
    money_bank = lambda: I("bank", "bank", "NOUN", ["bank%1:14:00::"])  # noqa: E731
    test = [["I", I("deposited", "deposit", "VERB", ["deposit%2:40:00::"]), I("money", "money", "NOUN",
             ["money%1:21:00::"]), "at", "the", money_bank(), ",", "then", I("fished", "fish", "VERB",
             ["fish%2:38:00::"]), "by", "the", I("river", "river", "NOUN", ["river%1:17:00::"]), "."],
            ["``", "We", I("bank", "bank", "VERB", ["bank%2:40:00::"]), "on", "it", "''", ",", "he", "said", "."],
            ["the", I("river bank", "river_bank", "NOUN", ["bank%1:17:01::"]), "."]]
    write_dataset(root / "test", "test", test)
    return root


def test_raw_eval_writes_its_table_and_the_raw_answers_are_the_taggers(built, capsys):
    from elmo_tasks.wsd.tagging import SenseTagger

    out = built / "out"
    args = ["wsd", "raw-eval", "--senses", str(built / "senses.h5"), "--test", str(built / "test"), "--out", str(out),
            "--progress", "off"]
    assert main(args) == 0, capsys.readouterr().err
    summary = json.loads((out / "raw_eval.json").read_text())
    (t,) = summary["tests"]
    assert (t["instances"], t["multiword"], t["aligned"]) == (7, 1, 6)
    assert summary["command"].startswith("elmo-tasks wsd raw-eval ") and "--senses" in summary["command"]
    assert summary["machine"]["cpu_cores"] and summary["source"] == "elmo" and summary["git_commit"]
    md = (out / "raw_eval.md").read_text()
    assert "| multi-word instances | 1 | 1 |" in md and summary["command"] in md
    keys = lambda mode: dict(line.split() for line in (out / "keys" / mode / "test.key.txt").read_text().splitlines())  # noqa: E731
    tagger = SenseTagger(str(built / "senses.h5"))
    tagged = tagger.tag('I deposited money at the bank, then fished by the river.\n"We bank on it", he said.')
    words = {(n, tk.token): tk for n, s in enumerate(tagged) for tk in s if tk.key}
    raw = keys("raw")
    assert raw["d000.s000.t002"] == words[(0, "bank")].key and raw["d000.s000.t004"] == "river%1:17:00::"
    assert raw["d000.s001.t000"] == words[(1, "bank")].key
    assert "d000.s002.t000" not in raw  # the multi-word instance
    first = keys("raw_first_sense")  # the first WordNet sense of the lemma and part of speech the tagger chose
    assert first["d000.s001.t000"] == tagger.by_lemma[("bank", words[(1, "bank")].pos)][0]
    assert first["d000.s000.t002"] == "bank%1:17:01::"  # bank as a noun: sense 1 is the river's
    gold_first = keys("gold_first_sense")
    assert gold_first["d000.s001.t000"] == "bank%2:40:00::" and "d000.s002.t000" not in gold_first  # (no river_bank)
    assert main(args) == 0  # the folder is this command's: rerunning refreshes it


def test_raw_eval_refuses_a_foreign_folder_and_a_missing_test_set(built, capsys):
    other = built / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    base = ["wsd", "raw-eval", "--senses", str(built / "senses.h5"), "--progress", "off"]
    assert main([*base, "--test", str(built / "test"), "--out", str(other)]) == 2
    assert "not empty" in capsys.readouterr().err and (other / "notes.txt").read_text() == "mine"
    assert main([*base, "--test", str(built / "nope"), "--out", str(built / "o2")]) == 2
    err = capsys.readouterr().err
    assert "nope" in err and "Traceback" not in err

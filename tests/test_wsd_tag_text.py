"""``wsd tag`` on raw text: the package's tokenizer splits each line (``--pretokenized``: whitespace), tokens keep their
character offsets, ``word/POS`` marks survive tokenization, and the output comes as text, JSON lines or TSV (the
Python API returns objects that print as the text format). A tiny WordNet (bank by the river, bank that takes
deposits, the verb bank/deposit, river, money, fish, rock) and a tiny random biLM."""
from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pytest

import elmo_tasks.data  # noqa: F401 (first: elmo_tasks.wsd.data.reader cannot be imported first)
from elmo_tasks.cli import main
from elmo_tasks.data.tokenizer import normalize, tokenize, tokenize_spans, whitespace_spans

# isort: split
from wsd_tag_fixture import bank_sentences, build_sense_file, by_token, write_toy_wordnet
from wsd_tag_fixture import tagger  # noqa: F401 (a pytest fixture: SenseTagger of the senses fixture)

SENTENCE = "I deposited money at the bank, then fished by the river."

# (pos, offset, lexfile, lemmas, gloss); every key below points at one of these
SYNSETS = [("n", "00000010", "17", ["bank"], 'sloping land beside a body of water; "they pulled the canoe up on the bank"'),
           ("n", "00000020", "14", ["depository_financial_institution", "bank", "banking_concern"],
            "a financial institution that accepts deposits and channels the money into lending activities"),
           ("n", "00000030", "17", ["river"], "a large natural stream of water"),
           ("n", "00000040", "21", ["money"], "the most common medium of exchange"),
           ("n", "00000050", "05", ["rock", "stone"], "a lump of hard consolidated mineral matter"),
           ("v", "00000060", "40", ["deposit", "bank"], "put into a bank account"),
           ("v", "00000070", "38", ["fish"], "catch or try to catch fish or shellfish")]
KEYS = [("bank%1:17:01::", "00000010", 1), ("bank%1:14:00::", "00000020", 2),
        ("depository_financial_institution%1:14:00::", "00000020", 1), ("banking_concern%1:14:00::", "00000020", 1),
        ("river%1:17:00::", "00000030", 1), ("money%1:21:00::", "00000040", 1), ("rock%1:05:00::", "00000050", 1),
        ("stone%1:05:00::", "00000050", 1), ("deposit%2:40:00::", "00000060", 1), ("bank%2:40:00::", "00000060", 1),
        ("fish%2:38:00::", "00000070", 1)]


def write_wordnet(folder):
    return write_toy_wordnet(folder, SYNSETS, KEYS)


@pytest.fixture(scope="module")
def senses(tmp_path_factory):
    return build_sense_file(tmp_path_factory.mktemp("tagtext"), write_wordnet, bank_sentences())


# ---------------------------------------------------------------- the tokenizer's offsets

@pytest.mark.parametrize("text", [SENTENCE, "He lives in the U.S.", 'He said "it\'s the U.S."  ',
                                  "\u201cwe bank/VERB on it\u201d \u2014 don't 1990 -- 1995 caf\u00e9 \ufb01ne \u2026",
                                  "''quoted'' x\u00ady \u1100\u1161 e\u0301t\u00e9", "  \t lead and trail  "])
def test_tokenize_spans_are_tokenize_with_offsets_in_the_text(text):
    spans = tokenize_spans(text)
    assert [t for t, _, _ in spans] == tokenize(text)
    assert all(0 <= s < e <= len(text) for _, s, e in spans)
    assert [s for _, s, _ in spans] == sorted(s for _, s, _ in spans)
    for tok, s, e in spans:  # each token is read from its span (the final period of "U.S." read twice)
        assert normalize(text[s:e]).replace(" ", "") in (tok, tok.replace("-", "--")), (tok, text[s:e])
    assert whitespace_spans(text) == [(t, text.index(t, s), text.index(t, s) + len(t))
                                      for t, s, _ in whitespace_spans(text)]


def test_tokenize_spans_of_the_example_sentence():
    spans = tokenize_spans(SENTENCE)
    assert [(t, SENTENCE[s:e]) for t, s, e in spans if t in ("bank", ",", "river", ".")] == [
        ("bank", "bank"), (",", ","), ("river", "river"), (".", ".")]
    assert spans[5] == ("bank", SENTENCE.index("bank"), SENTENCE.index("bank") + 4)


# ---------------------------------------------------------------- SenseTagger.tag on raw text

def test_raw_text_tags_bank_and_river_with_their_offsets(tagger):
    (sent,) = tagger.tag(SENTENCE)
    words = by_token(sent)
    assert words["bank"].key in tagger.candidates("bank", None) and words["river"].key == "river%1:17:00::"
    for t in sent:
        assert SENTENCE[t.start:t.end] == t.token
    assert words[","].key is None and words[","].reason == "punctuation or symbol"
    assert words["the"].reason == "function word" and words["at"].reason == "function word"
    assert words["then"].reason == "not in WordNet"  # (an adverb the test sets tag: looked up, not in this WordNet)
    assert words["bank"]["key"] == words["bank"].key  # the old dict access still reads a field


def test_raw_text_tags_as_its_tokens_do_and_pretokenized_keeps_whitespace_tokens(tagger):
    (raw,) = tagger.tag(SENTENCE)
    (pre,) = tagger.tag([tokenize(SENTENCE)])  # the old call: a list of token lists
    assert [(t.token, t.key, t.score, t.margin) for t in raw] == [(t.token, t.key, t.score, t.margin) for t in pre]
    (white,) = tagger.tag(SENTENCE, pretokenized=True)  # as wsd tag read every line before
    words = by_token(white)
    assert "bank," in words and words["bank,"].key is None and words["bank,"].reason == "not in WordNet"
    assert words["river."].key is None and (words["bank,"].start, words["bank,"].end) == (25, 30)


def test_reasons_score_and_margin(tagger, senses):
    import h5py

    with h5py.File(senses / "senses.h5") as f:  # rock's lexicographer file has no trained sense: no vector
        keys = [k.decode() for k in f["keys"][()]]
        assert f["step"][keys.index("rock%1:05:00::")] < 0
    (sent,) = tagger.tag("the zebra saw a rock by the bank")
    words = by_token(sent)
    assert words["zebra"].reason == "not in WordNet" and words["rock"].reason == "no sense vector for this lemma"
    assert words["the"].reason == "function word"
    bank, (river,) = words["bank"], [t for t in tagger.tag("the river")[0] if t.key]
    assert river.margin is None  # one candidate sense
    # the margin: the best score minus the second best, the scores recomputed from the file's vectors
    from elmo_tasks.wsd.knn import _unit
    from elmo_tasks.wsd.vectors import all_layers

    a = all_layers(tagger.source, [["the", "zebra", "saw", "a", "rock", "by", "the", "bank"]], "t")[0]
    v = _unit(np.einsum("lnd,l->nd", a.astype(np.float64), np.asarray(tagger.meta["layers"], dtype=np.float64)))[7]
    cands = tagger.candidates("bank", None)
    rows = [tagger.index[k] for k in cands]
    score = tagger.context[rows] @ v + np.array([tagger.meta["w"].get("NOUN", 0.0)] * len(cands)) * (
        tagger.gloss[rows] @ v)
    top = np.sort(score)[::-1]
    assert bank.key == cands[int(np.argmax(score))]
    assert bank.score == pytest.approx(top[0], abs=1e-6) and bank.margin == pytest.approx(top[0] - top[1], abs=1e-6)
    assert bank.margin > 0


def test_a_word_pos_mark_survives_tokenization_and_names_the_part_of_speech(tagger):
    text = "we bank/VERB on it, then the bank/noun."
    (sent,) = tagger.tag(text)
    marked = [t for t in sent if t.token == "bank"]
    assert [t.pos for t in marked] == ["VERB", "NOUN"] and marked[0].key == "bank%2:40:00::"
    assert [text[t.start:t.end] for t in marked] == ["bank", "bank"]  # the mark is not in the word's span
    assert marked[0].lemmas == ("deposit", "bank") and marked[0].synset_name == "deposit.v.01"
    (pre,) = tagger.tag("we bank/VERB on it", pretokenized=True)
    assert [t.key for t in pre if t.token == "bank"] == ["bank%2:40:00::"]


def test_tagged_objects_print_the_text_format(tagger):
    tagged = tagger.tag(SENTENCE + "\nthey fished in the river")
    bank = by_token(tagged[0])["bank"]
    assert bank.synset_name in ("bank.n.01", "depository_financial_institution.n.01")
    line = str(bank)
    assert line.startswith(f"bank  {bank.key}") and ", ".join(bank.lemmas) in line and f"{bank.score:.3f}" in line
    text = str(tagged)
    assert text.split("\n")[0] == SENTENCE and "\n\nthey fished in the river\n" in text
    assert "  the " not in text and "fished" in text.split("\n\n")[1]  # function words left out
    assert tagged[1].line == 2 and [t.token for t in tagged[1].tagged] == ["fished", "river"]


# ---------------------------------------------------------------- elmo-tasks wsd tag

def run_tag(capsys, monkeypatch, senses, *extra, stdin=SENTENCE + "\n", tty=False):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    monkeypatch.setattr("sys.stdout.isatty", lambda: tty)
    capsys.readouterr()
    code = main(["wsd", "tag", "-", "--senses", str(senses / "senses.h5"), *extra])
    return code, capsys.readouterr()


def test_wsd_tag_from_stdin_tags_punctuated_words_in_json_lines(senses, capsys, monkeypatch):
    code, out = run_tag(capsys, monkeypatch, senses)
    assert code == 0, out.err
    (row,) = [json.loads(line) for line in out.out.splitlines()]
    words = {t["token"]: t for t in row}
    assert words["bank"]["key"] and words["river"]["key"] == "river%1:17:00::"
    assert SENTENCE[words["bank"]["start"]:words["bank"]["end"]] == "bank"
    assert set(words["bank"]) >= {"start", "end", "lemma", "pos", "key", "synset", "synset_name", "gloss", "score",
                                  "margin", "reason"}
    assert words["the"]["key"] is None and words["the"]["reason"] == "function word"
    assert words["river"]["margin"] is None and words["river"]["synset"] == "00000030-n"


def test_wsd_tag_formats_by_terminal_option_and_extension(senses, capsys, monkeypatch, tmp_path):
    code, out = run_tag(capsys, monkeypatch, senses, tty=True)
    assert code == 0, out.err
    lines = out.out.splitlines()
    assert lines[0] == SENTENCE and any(line.strip().startswith("bank ") for line in lines)
    assert not any(line.strip().startswith(("the ", "I ", ", ")) for line in lines[1:])  # untagged left out
    code, out = run_tag(capsys, monkeypatch, senses, "--format", "tsv")
    rows = [r.split("\t") for r in out.out.splitlines()]
    assert rows[0][:7] == ["line", "start", "end", "token", "lemma", "pos", "key"]
    assert [r[3] for r in rows[1:]] == ["deposited", "money", "bank", "fished", "river"]
    assert all(len(r) == len(rows[0]) for r in rows)
    for ext, first in ((".tsv", "line\tstart"), (".txt", SENTENCE), (".jsonl", "[{")):
        out_file = tmp_path / f"tags{ext}"
        code, _ = run_tag(capsys, monkeypatch, senses, "--out", str(out_file), tty=True)
        assert code == 0 and out_file.read_text().startswith(first), ext


def test_wsd_tag_pretokenized_reads_whitespace_tokens_as_before(senses, capsys, monkeypatch):
    line = "we bank/VERB on the bank , by the river ."
    code, out = run_tag(capsys, monkeypatch, senses, "--pretokenized", "--format", "jsonl", stdin=line + "\n")
    assert code == 0, out.err
    (row,) = [json.loads(line) for line in out.out.splitlines()]
    assert [t["token"] for t in row] == ["we", "bank", "on", "the", "bank", ",", "by", "the", "river", "."]
    assert row[1]["key"] == "bank%2:40:00::" and row[4]["pos"] == "NOUN" and row[8]["key"] == "river%1:17:00::"
    assert [line[t["start"]:t["end"]] for t in row] == [t["token"] for t in row]  # (the mark left out)


def test_the_wordnet_is_found_in_data_or_named_with_the_command_that_gets_it(senses, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ELMO_TASKS_WORDNET", raising=False)
    moved = senses / "wn_moved"
    (senses / "wn").rename(moved)
    try:
        code, out = run_tag(capsys, monkeypatch, senses)
        assert code == 2
        err = out.err.strip()
        assert err.startswith("error: ") and "\n" not in err and "elmo-tasks data get wordnet-3.0" in err, err
        shutil.copytree(moved, tmp_path / "data" / "wordnet-3.0")  # where `data get` puts it
        code, out = run_tag(capsys, monkeypatch, senses)
        assert code == 0, out.err
    finally:
        moved.rename(senses / "wn")

"""Round five, raw text and sense files (docs/reliability.md, "Round five: raw text and sense files"): invisible
format characters inside words, ``wsd senses --lemmas`` lists, and a sense file's part-of-speech head removed or
copied from another file; on the tiny sense file of test_wsd_tag_text."""
from __future__ import annotations

import hashlib
import json
import shutil

import h5py
import pytest

import elmo_tasks.data  # noqa: F401 (first: elmo_tasks.wsd.data.reader cannot be imported first)
from elmo_tasks.cli import main
from elmo_tasks.data.tokenizer import tokenize, tokenize_spans

from test_tasks_helpers import one_line_error
from test_wsd_tag_text import senses  # noqa: F401 (the module's sense file fixture)

# LRM, RLM, word joiner, LRE..RLO, LRI..PDI, soft hyphen, Arabic letter mark, ZWSP, BOM: Unicode category Cf
INVISIBLE = ["\u200e", "\u200f", "\u2060", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067",
             "\u2068", "\u2069", "\u00ad", "\u061c", "\u200b", "\ufeff"]


# ---------------------------------------------------------------- B11/B09: format characters inside words

@pytest.mark.parametrize("mark", INVISIBLE)
def test_b11_a_format_character_is_dropped_from_tokens_and_spans_still_slice_the_line(mark):
    for text, words in ((f"bank{mark} river", ["bank", "river"]), (f"{mark}bank{mark} money", ["bank", "money"]),
                        (f"New York{mark}", ["New", "York"]), (f"ba{mark}nk", ["bank"])):
        spans = tokenize_spans(text)
        assert [t for t, _, _ in spans] == tokenize(text) == words, text
        for tok, s, e in spans:  # the span slices the line; an edge mark is outside it, an inner one inside
            assert text[s:e].replace(mark, "") == tok and text[s] != mark and text[e - 1] != mark, (text, s, e)


def test_b11_words_with_bidi_marks_and_word_joiners_are_tagged(senses, capsys):  # noqa: F811
    line = "bank\u200e river\u2060 \u2066bank\u2069 money \u202bbank\u202c\u200f"
    (senses / "in.txt").write_text(line + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["wsd", "tag", str(senses / "in.txt"), "--senses", str(senses / "senses.h5"), "--format",
                 "jsonl"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    tagged = [(t["token"], line[t["start"]:t["end"]]) for t in row if t["key"]]
    assert tagged == [("bank", "bank"), ("river", "river"), ("bank", "bank"), ("money", "money"), ("bank", "bank")]


# ---------------------------------------------------------------- D05/D14/D12: --lemmas lists

def _senses_cmd(root, *lemmas: str, out: str = "l.h5") -> list[str]:
    return ["wsd", "senses", "--config", str(root / "c.yaml"), "--source", "elmo", "--cache-dir", "none",
            "--progress", "off", "--out", str(root / out), *[a for lem in lemmas for a in ("--lemmas", lem)]]


@pytest.mark.parametrize("given, item", [(",", "item 1 of 2 is empty"), ("bank,,river", "item 2 of 3 is empty"),
                                         ("bank, ", "item 2 of 2 is empty")])
def test_d05_a_lemmas_list_with_an_empty_item_is_refused(senses, capsys, given, item):  # noqa: F811
    capsys.readouterr()
    assert main(_senses_cmd(senses, given)) == 2
    one_line_error(capsys, f"--lemmas {given!r}: {item}", "--lemmas bank,river")
    assert not (senses / "l.h5").exists()


def test_d14_lemmas_given_twice_are_joined_and_the_recorded_command_says_both(senses, capsys):  # noqa: F811
    assert main(_senses_cmd(senses, "bank", "river", out="two.h5")) == 0
    with h5py.File(senses / "two.h5", "r") as f:
        keys = sorted(k.decode() for k in f["keys"][()])
        meta = json.loads(f.attrs["meta"])
    assert {k.partition("%")[0] for k in keys} == {"bank", "river"}
    assert "--lemmas bank --lemmas river" in meta["command"]


def test_d12_many_unknown_lemmas_show_the_first_five_and_the_count(senses, capsys):  # noqa: F811
    capsys.readouterr()
    assert main(_senses_cmd(senses, ",".join(["bank"] + [f"zz{i}" for i in range(3000)]))) == 2
    err = one_line_error(capsys, "--lemmas: zz0, zz1, zz2, zz3, zz4 and 2,995 more (3,000 of the 3,001 given): "
                                 "not lemmas of WordNet")
    assert len(err) < 300 and "zz5," not in err


# ---------------------------------------------------------------- P08/P09: the part-of-speech head

def _tag_with(senses, path, capsys) -> int:  # noqa: F811
    (senses / "in.txt").write_text("the bank by the river\n")
    capsys.readouterr()
    return main(["wsd", "tag", str(senses / "in.txt"), "--senses", str(path), "--format", "tsv"])


def test_p08_a_sense_file_whose_head_was_removed_is_refused_with_its_command(senses, tmp_path, capsys):  # noqa: F811
    path = tmp_path / "nohead.h5"
    shutil.copy(senses / "senses.h5", path)
    with h5py.File(path, "r+") as f:
        assert json.loads(f.attrs["meta"])["pos_head"]
        del f["pos_head"]
    assert _tag_with(senses, path, capsys) == 2
    err = one_line_error(capsys, f"{path}: its meta records a part-of-speech head, but the file holds none",
                         "make it again: ")
    assert "elmo-tasks wsd senses" in err and f"--out {path}" in err


def test_p09_a_head_copied_from_another_sense_file_is_refused(senses, tmp_path, capsys):  # noqa: F811
    assert main(_senses_cmd(senses, "river", out="other.h5")) == 0
    path = tmp_path / "mixed.h5"
    shutil.copy(senses / "senses.h5", path)
    with h5py.File(path, "r+") as f, h5py.File(senses / "other.h5", "r") as g:
        del f["pos_head"]
        g.copy(g["pos_head"], f, "pos_head")
    assert _tag_with(senses, path, capsys) == 2
    one_line_error(capsys, f"{path}: its part-of-speech head does not match the checksum",
                   "copied from another sense file", "make it again: ")


def test_p09_a_file_from_before_heads_were_bound_to_their_file_is_still_read(senses, tmp_path, capsys):  # noqa: F811
    from elmo_tasks.wsd.pos_head import _digest

    path = tmp_path / "older.h5"
    shutil.copy(senses / "senses.h5", path)
    with h5py.File(path, "r+") as f:  # as the version before wrote it: the head's checksum its own, none in the meta
        g = f["pos_head"]
        g.attrs["sha256"] = _digest({name: g[name][()] for name in g}, json.loads(g.attrs["config"]))
        meta = json.loads(f.attrs["meta"])
        del meta["pos_head"]["sha256"]
        f.attrs["meta"] = json.dumps(meta)
        f.attrs["meta_sha256"] = hashlib.sha256(f.attrs["meta"].encode("utf-8")).hexdigest()
    assert _tag_with(senses, path, capsys) == 0
    assert "bank%" in capsys.readouterr().out

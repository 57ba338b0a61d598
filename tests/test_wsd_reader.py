"""Reader of the Raganato framework format and the WordNet sense inventory: parsing, spans, errors with lines."""
from __future__ import annotations

import pytest

from elmo_tasks.wsd.data.examples import to_examples
from elmo_tasks.wsd.data.inventory import InventoryError, SenseInventory
from elmo_tasks.wsd.data.reader import WsdFormatError, find_dataset_files, load_dataset, read_data_xml, read_gold_keys
from wsd_toy import ToyInstance, write_dataset, write_index_sense

XML = """<?xml version="1.0" encoding="UTF-8"?>
<corpus lang="en" source="toy">
<text id="d000">
<sentence id="d000.s000">
<wf lemma="the" pos="DET">The</wf>
<instance id="d000.s000.t000" lemma="bank" pos="NOUN">bank</instance>
<instance id="d000.s000.t001" lemma="take_place" pos="VERB">took  place</instance>
<wf lemma="&amp;" pos=".">&amp;</wf>
</sentence>
<sentence id="d000.s001">
<wf lemma="hi" pos="X">hi</wf>
</sentence>
</text>
</corpus>
"""


def _folder(tmp_path, xml=XML, keys="d000.s000.t000 bank%1:14:00::\nd000.s000.t001 take_place%2:30:00:: x%2:30:01::\n",
            name="mytest"):
    d = tmp_path / "anyname"
    d.mkdir()
    (d / f"{name}.data.xml").write_text(xml, encoding="utf-8")
    if keys is not None:
        (d / f"{name}.gold.key.txt").write_text(keys, encoding="utf-8")
    return d


def test_reads_tokens_spans_and_gold(tmp_path):
    ds = load_dataset(_folder(tmp_path))
    assert ds.name == "mytest"
    s0, s1 = ds.sentences
    assert s0.tokens == ["The", "bank", "took", "place", "&"]  # multiword split on whitespace, entities decoded
    assert [(i.id, i.lemma, i.pos, i.start, i.end) for i in s0.instances] == [
        ("d000.s000.t000", "bank", "NOUN", 1, 2), ("d000.s000.t001", "take_place", "VERB", 2, 4)]
    assert s1.tokens == ["hi"] and s1.instances == []
    assert ds.gold["d000.s000.t001"] == ["take_place%2:30:00::", "x%2:30:01::"]


def test_examples_skip_sentences_without_instances_and_attach_candidates(tmp_path):
    ds = load_dataset(_folder(tmp_path))
    inv = SenseInventory.from_path(write_index_sense(tmp_path / "index.sense",
                                                     ["bank%1:17:01::", "bank%1:14:00::", "bank%2:40:00::"]))
    ex = to_examples(ds, inv)
    assert len(ex) == 1
    bank, take = ex[0].targets
    assert bank.candidates == ["bank%1:17:01::", "bank%1:14:00::"]  # NOUN only, sense-number order
    assert bank.first_sense == "bank%1:17:01::"
    assert take.candidates == [] and take.first_sense is None


def test_folder_without_key_file(tmp_path):
    d = _folder(tmp_path, keys=None)
    with pytest.raises(WsdFormatError, match="gold.key.txt"):
        load_dataset(d)
    assert load_dataset(d, require_gold=False).gold is None


@pytest.mark.parametrize("bad, line, msg", [
    ('<instance id="d000.s000.t000" pos="NOUN">bank</instance>', 6, "without a lemma"),
    ('<instance id="d000.s000.t000" lemma="bank" pos="NN">bank</instance>', 6, "has pos 'NN'"),
    ('<instance id="d000.s000.t000" lemma="bank" pos="NOUN"></instance>', 6, "empty <instance>"),
    ('<instance id="d000.s000.t000" lemma="bank" pos="NOUN">bank</wf>', 6, "malformed XML"),
    ('<foo/>', 6, "unexpected element <foo>"),
])
def test_xml_errors_name_file_and_line(tmp_path, bad, line, msg):
    xml = XML.replace('<instance id="d000.s000.t000" lemma="bank" pos="NOUN">bank</instance>', bad)
    path = _folder(tmp_path, xml=xml) / "mytest.data.xml"
    with pytest.raises(WsdFormatError, match=msg) as e:
        read_data_xml(path)
    assert f"mytest.data.xml:{line}:" in str(e.value)


def test_duplicate_instance_id_is_an_error(tmp_path):
    xml = XML.replace('id="d000.s000.t001"', 'id="d000.s000.t000"')
    with pytest.raises(WsdFormatError, match=r"mytest.data.xml:7: duplicate instance id"):
        read_data_xml(_folder(tmp_path, xml=xml) / "mytest.data.xml")


def test_key_file_errors_and_mismatch(tmp_path):
    d = _folder(tmp_path, keys="d000.s000.t000 bank%1:14:00::\n\nd000.s000.t001\n")
    with pytest.raises(WsdFormatError, match=r"mytest.gold.key.txt:3: expected 'instance_id key"):
        read_gold_keys(d / "mytest.gold.key.txt")
    (d / "mytest.gold.key.txt").write_text("d000.s000.t000 bank%1:14:00::\nd000.s000.t009 bank%1:14:00::\n")
    with pytest.raises(WsdFormatError, match=r"1 instance without a gold key \(d000.s000.t001\), 1 gold key line "
                                             r"for instances not in .*t009"):
        load_dataset(d)


def test_find_files_needs_exactly_one_xml(tmp_path):
    d = _folder(tmp_path)
    (d / "other.data.xml").write_text(XML)
    with pytest.raises(WsdFormatError, match="exactly one NAME.data.xml"):
        find_dataset_files(d)
    with pytest.raises(FileNotFoundError):
        find_dataset_files(tmp_path / "missing")


def test_toy_writer_round_trip(tmp_path):
    sents = [["A", ToyInstance("river bank", "river_bank", "NOUN", ["river_bank%1:17:00::"]), "."],
             [ToyInstance("ran", "run", "VERB", ["run%2:38:00::", "run%2:38:01::"])]]
    ds = load_dataset(write_dataset(tmp_path / "toy", "toy", sents))
    assert [s.tokens for s in ds.sentences] == [["A", "river", "bank", "."], ["ran"]]
    assert ds.gold == {"d000.s000.t000": ["river_bank%1:17:00::"], "d000.s001.t000": ["run%2:38:00::", "run%2:38:01::"]}


def test_inventory_adjective_satellites_and_errors(tmp_path):
    p = tmp_path / "index.sense"
    p.write_text("big%3:00:01:: 1 2 0\nbig%5:00:00:large:00 2 1 5\nbig%1:00:00:: 3 1 0\n")
    inv = SenseInventory.from_path(tmp_path)  # a folder holding index.sense works too
    assert inv.candidates("Big", "ADJ") == ["big%5:00:00:large:00", "big%3:00:01::"]
    assert inv.first_sense("big", "NOUN") == "big%1:00:00::" and inv.first_sense("big", "ADV") is None
    p.write_text("big%3:00:01:: 1 2 0\nbroken line\n")
    with pytest.raises(InventoryError, match=r"index.sense:2: expected"):
        SenseInventory.from_path(p)
    with pytest.raises(InventoryError, match="elmo-tasks data get wordnet-3.0"):
        SenseInventory.from_path(tmp_path / "nowhere")

"""CoNLL-2003, TSV/CSV and SST readers and the reader registry, on tiny files written by the tests."""
import pytest

from elmo_tasks.data import DataFormatError, LabeledSentence, READERS, TaggedSentence, get_reader, read_data

CONLL_BIO = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

"""
CONLL_IOB1 = """-DOCSTART- -X- -X- O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O
. . O O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER
"""


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_conll_bio(tmp_path):
    sents = read_data("conll2003", write(tmp_path, "a.txt", CONLL_BIO))
    assert [s.tokens for s in sents] == [["EU", "rejects", "German", "call", "."], ["Peter", "Blackburn"]]
    assert sents[0].tags == ["B-ORG", "O", "B-MISC", "O", "O"]
    assert sents[1].tags == ["B-PER", "I-PER"]
    assert sents[0].columns["pos"] == ["NNP", "VBZ", "JJ", "NN", "."]
    assert sents[0].columns["ner"] == sents[0].tags
    assert all(isinstance(s, TaggedSentence) for s in sents)


def test_conll_iob1_detected_and_converted(tmp_path):
    path = write(tmp_path, "b.txt", CONLL_IOB1)
    bio = read_data("conll2003", path)
    assert [s.tags for s in bio] == [["B-ORG", "O", "B-MISC", "O", "O"], ["B-PER", "I-PER"]]
    assert bio[0].columns["ner"][0] == "I-ORG"  # columns keep the file's form
    bioes = read_data("conll2003", path, scheme="BIOES")
    assert bioes[1].tags == ["B-PER", "E-PER"] and bioes[0].tags[0] == "S-ORG"
    assert read_data("conll2003", path, scheme="IOB1")[0].tags == ["I-ORG", "O", "I-MISC", "O", "O"]
    chunks = read_data("conll2003", path, tag_column="chunk")
    assert chunks[0].tags == ["B-NP", "B-VP", "B-NP", "I-NP", "O"]
    assert read_data("conll2003", path, tag_column="pos")[1].tags == ["NNP", "NNP"]


def test_conll_forced_input_scheme_is_validated(tmp_path):
    path = write(tmp_path, "b.txt", CONLL_IOB1)
    with pytest.raises(DataFormatError, match=r"b\.txt:3: .*BIO scheme"):
        read_data("conll2003", path, input_scheme="BIO")


def test_conll_malformed_line_reports_file_and_line(tmp_path):
    path = write(tmp_path, "bad.txt", CONLL_BIO.replace("call NN I-NP O", "call NN O"))
    with pytest.raises(DataFormatError, match=r"bad\.txt:6: expected 4 columns"):
        read_data("conll2003", path)


def test_conll_bad_tag_reports_line(tmp_path):
    path = write(tmp_path, "t.txt", CONLL_BIO.replace("Blackburn NNP I-NP I-PER", "Blackburn NNP I-NP X-PER"))
    with pytest.raises(DataFormatError, match=r"t\.txt:10: .*malformed tag 'X-PER'"):
        read_data("conll2003", path)


def test_conll_empty_file_and_bad_options(tmp_path):
    with pytest.raises(DataFormatError, match="no sentences"):
        read_data("conll2003", write(tmp_path, "e.txt", "-DOCSTART- -X- -X- O\n\n\n"))
    path = write(tmp_path, "a.txt", CONLL_BIO)
    with pytest.raises(ValueError, match="valid: pos, chunk, ner"):
        read_data("conll2003", path, tag_column="lemma")
    two = read_data("conll2003", write(tmp_path, "two.txt", "a B-X\nb I-X\n\nc O\n"), columns=["word", "ner"])
    assert [s.tags for s in two] == [["B-X", "I-X"], ["O"]]


def test_tsv_reader(tmp_path):
    path = write(tmp_path, "a.tsv", "label\ttext\npos\ta good \" film\n\nneg\tbad  one\n")
    data = read_data("tsv", path)
    assert data == [LabeledSentence(["a", "good", '"', "film"], "pos"), LabeledSentence(["bad", "one"], "neg")]
    no_header = read_data("tsv", write(tmp_path, "b.tsv", "pos\tIt's good.\n"), tokenizer="ptb")
    assert no_header == [LabeledSentence(["It", "'s", "good", "."], "pos")]
    swapped = read_data("tsv", write(tmp_path, "c.tsv", "sentence\tlabel\nfine film\t1\n"),
                        label_column="label", text_column="sentence")
    assert swapped == [LabeledSentence(["fine", "film"], "1")]


def test_tsv_errors_have_file_line(tmp_path):
    with pytest.raises(DataFormatError, match=r"m\.tsv:3: expected 2 fields"):
        read_data("tsv", write(tmp_path, "m.tsv", "pos\ta\nneg\tb\nneg\n"))
    with pytest.raises(DataFormatError, match=r"e\.tsv:2: empty text"):
        read_data("tsv", write(tmp_path, "e.tsv", "pos\ta\nneg\t   \n"))
    with pytest.raises(DataFormatError, match="no examples"):
        read_data("tsv", write(tmp_path, "z.tsv", "\n\n"))


def test_csv_reader_quoting(tmp_path):
    path = write(tmp_path, "a.csv", 'label,text\n1,"a ""quoted"", multi\nline text"\n0,plain\n')
    data = read_data("csv", path)
    assert data[0] == LabeledSentence(["a", '"quoted",', "multi", "line", "text"], "1")
    assert data[1].label == "0"
    with pytest.raises(DataFormatError, match=r"b\.csv:4: expected 2 fields"):
        read_data("csv", write(tmp_path, "b.csv", 'y,text\n1,"a\nb"\n0,c,d\n'))


SST = """(3 (2 It) (4 (4 (2 's) (4 (3 (2 a) (4 (3 lovely) (2 film))) (3 (2 with) (4 (3 (3 lovely) (2 performances)))))) (2 .)))
(2 (2 -LRB-) (2 meh) (2 -RRB-))
(0 (1 Dull) (1 ``stuff''))
"""


def test_sst_reader(tmp_path):
    path = write(tmp_path, "dev.txt", SST)
    five = read_data("sst", path)
    assert [s.label for s in five] == ["3", "2", "0"]
    assert five[0].tokens == ["It", "'s", "a", "lovely", "film", "with", "lovely", "performances", "."]
    assert five[1].tokens == ["(", "meh", ")"]
    binary = read_data("sst", path, binary=True)
    assert [(s.label, s.tokens[0]) for s in binary] == [("pos", "It"), ("neg", "Dull")]
    phrases = read_data("sst", path, include_subtrees=True, binary=True)
    assert len(phrases) > len(binary) and LabeledSentence(["lovely"], "pos") in phrases
    raw = read_data("sst", path, ptb_unescape=False)
    assert raw[1].tokens[0] == "-LRB-"


@pytest.mark.parametrize("line", ["(3 (2 It) (4 good)", "(3 (2 It)) extra", "(7 (2 It))", "((2 It))", "(3 )"])
def test_sst_malformed_tree(tmp_path, line):
    path = write(tmp_path, "bad.txt", "(2 (2 ok))\n" + line + "\n")
    with pytest.raises(DataFormatError, match=r"bad\.txt:2: malformed tree"):
        read_data("sst", path)


def test_registry_errors(tmp_path):
    assert set(READERS) >= {"conll2003", "tsv", "csv", "sst", "hf"}
    with pytest.raises(KeyError, match="valid: conll2003, csv, hf, raganato, sst, tsv"):
        get_reader("conll")
    with pytest.raises(ValueError, match="data reader sst: unknown key .binari.; valid keys: binary, include_subtrees"):
        read_data("sst", tmp_path / "x.txt", binari=True)
    with pytest.raises(FileNotFoundError):
        read_data("sst", tmp_path / "missing.txt")

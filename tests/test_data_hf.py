"""The hf reader on local files (offline) and to_hf_dataset round trips."""
import json

import pytest

from elmo_tasks.data import DataFormatError, LabeledSentence, TaggedSentence, read_data, to_hf_dataset


def test_local_jsonl_classification(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in [{"sentence": "a fine film", "label": 1},
                                                  {"sentence": "dull", "label": 0}]) + "\n")
    data = read_data("hf", p)
    assert data == [LabeledSentence(["a", "fine", "film"], "1"), LabeledSentence(["dull"], "0")]


def test_save_to_disk_round_trip_with_classlabels(tmp_path):
    import datasets

    ds = datasets.Dataset.from_dict(
        {"tokens": [["EU", "rejects"], ["Peter"]], "ner_tags": [[1, 0], [2]]},
        features=datasets.Features({"tokens": datasets.Sequence(datasets.Value("string")),
                                    "ner_tags": datasets.Sequence(datasets.ClassLabel(names=["O", "B-ORG", "B-PER"]))}))
    ds.save_to_disk(str(tmp_path / "saved"))
    data = read_data("hf", tmp_path / "saved")
    assert data == [TaggedSentence(["EU", "rejects"], ["B-ORG", "O"]), TaggedSentence(["Peter"], ["B-PER"])]


def test_to_hf_dataset_round_trip(tmp_path):
    tagged = [TaggedSentence(["a", "b"], ["B-X", "I-X"], {"pos": ["DT", "NN"]}), TaggedSentence(["c"], ["O"], {"pos": ["NN"]})]
    ds = to_hf_dataset(tagged)
    assert ds.column_names == ["tokens", "tags", "pos"] and len(ds) == 2
    ds.to_json(str(tmp_path / "t.jsonl"))
    assert read_data("hf", tmp_path / "t.jsonl") == tagged
    labeled = [LabeledSentence(["good"], "pos"), LabeledSentence(["bad", "film"], "neg")]
    ds2 = to_hf_dataset(labeled)
    ds2.to_parquet(str(tmp_path / "l.parquet"))
    assert read_data("hf", tmp_path / "l.parquet") == labeled
    with pytest.raises(TypeError):
        to_hf_dataset([tagged[0], labeled[0]])
    with pytest.raises(ValueError):
        to_hf_dataset([])


def test_missing_columns_and_offline_hub(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text(json.dumps({"body": "x", "stars": 3}) + "\n")
    with pytest.raises(ValueError, match="columns: body, stars"):
        read_data("hf", p)
    assert read_data("hf", p, text_column="body", label_column="stars") == [LabeledSentence(["x"], "3")]
    with pytest.raises(FileNotFoundError):
        read_data("hf", tmp_path / "nope.jsonl")
    with pytest.raises(DataFormatError, match="offline|could not load"):  # a user error: one line, exit 2
        read_data("hf", "surely-not-a-cached-dataset-xyz")

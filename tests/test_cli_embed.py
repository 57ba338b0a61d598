"""``elmo-tasks embed`` end to end on a tiny model: allennlp-compatible output, bad lines, resume."""
import hashlib
import json

import h5py
import numpy as np
import pytest
import torch

from elmo_features import BiLM, BiLMOptions, Embedder, load_bilm, save_bilm
from elmo_features.formats import default_model
from elmo_features.cli_embed import InputError, embed_file
from elmo_features.embedding.embed_input import EmbedInput

TINY = {
    "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8]], "n_highway": 1},
    "lstm": {"dim": 8, "projection_dim": 4, "n_layers": 2, "cell_clip": 3, "proj_clip": 3},
}
LINES = ["The cat sat .", "  Ünïcode  wörds here ", "x", "a b c d e f", "The cat sat .", "last one"]


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture
def model(tmp_path):
    torch.manual_seed(0)
    bilm = BiLM(BiLMOptions.from_dict(TINY))
    with torch.no_grad():
        for p in bilm.parameters():
            p.normal_(0.0, 0.3)
    o, w = tmp_path / "model" / "options.json", tmp_path / "model" / "weights.hdf5"
    save_bilm(bilm, o, w)
    return o, w


@pytest.fixture
def infile(tmp_path):
    p = tmp_path / "in.txt"
    p.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return p


def run(argv):
    """The ``elmo-tasks`` entry point (it reports user errors: one line, exit code 2)."""
    from elmo_tasks.cli import main

    return main(argv)


def read(path):
    with h5py.File(path, "r") as f:
        data = {k: f[k][...] for k in f if k != "sentence_to_index"}
        index = json.loads(f["sentence_to_index"][0]) if "sentence_to_index" in f else None
        attrs = dict(f.attrs)
    return data, index, attrs


def test_embed_all_top_average(tmp_path, model, infile):
    o, w = model
    expected = Embedder(load_bilm(o, w)).embed_sentences([line.split() for line in LINES])
    for flag in ("--all", "--top", "--average"):
        out = tmp_path / f"out{flag}.hdf5"
        assert run(["embed", str(infile), str(out), "--options", str(o), "--weights", str(w), flag,
                    "--batch-size", "2"]) == 0
        data, index, attrs = read(out)
        assert sorted(data, key=int) == [str(i) for i in range(len(LINES))]
        for i, e in enumerate(expected):
            want = {"--all": e, "--top": e[-1], "--average": e.mean(0)}[flag]
            assert data[str(i)].dtype == np.float32 and data[str(i)].shape == want.shape
            assert np.abs(data[str(i)] - want).max() < 1e-6
        # as allennlp: stripped line -> its dataset name; a repeated line maps to its last index
        assert index == {"The cat sat .": "4", "Ünïcode  wörds here": "1", "x": "2", "a b c d e f": "3",
                         "last one": "5"}
        assert attrs == {} and not (tmp_path / f"out{flag}.hdf5.partial").exists()


def test_through_the_elmo_tasks_command(tmp_path, model, infile):
    from elmo_tasks.cli import main

    out = tmp_path / "deep" / "out.hdf5"
    assert main(["embed", str(infile), str(out), "--options", str(model[0]), "--weights", str(model[1]),
                 "--forget-sentences"]) == 0
    data, index, _ = read(out)
    assert data["0"].shape == (3, 4, 8) and index is None


def test_bad_lines_name_file_and_line(tmp_path, model, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\n\nalso fine\nbad \xff byte\n   \n")
    out = tmp_path / "out.hdf5"
    assert run(["embed", str(bad), str(out), "--options", str(model[0]), "--weights", str(model[1])]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2: blank line" in err and f"{bad}:4: not valid UTF-8 (byte 0xff" in err and f"{bad}:5:" in err
    assert not out.exists() and not (tmp_path / "out.hdf5.partial").exists()
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="no sentences"):
        EmbedInput(empty)


def test_model_argument_errors(tmp_path, model, infile, capsys, monkeypatch):
    o, w = model
    out = str(tmp_path / "o.hdf5")
    assert run(["embed", str(infile), out, "--options", str(o)]) == 2
    assert "--options and --weights go together" in capsys.readouterr().err
    monkeypatch.setattr(default_model, "DEFAULT_MODEL_DIR", tmp_path / "no-default")
    assert run(["embed", str(infile), out]) == 2
    assert "default biLM is missing" in capsys.readouterr().err
    assert run(["embed", str(infile), out, "--model", str(o.parent)]) == 0  # a model folder


class Interrupt(Exception):
    pass


def test_resume_after_interruption(tmp_path, model, infile):
    bilm = load_bilm(*model)
    done = []
    emb = Embedder(bilm)
    real = emb.embed_sentences
    emb.embed_sentences = lambda s: done.append(len(s)) or real(s)
    out = tmp_path / "out.hdf5"
    partial = tmp_path / "out.hdf5.partial"

    def stop_after_two(k, n_done):
        if k == 1:
            raise Interrupt

    with pytest.raises(Interrupt):
        embed_file(infile, out, emb, chunk_size=2, on_chunk=stop_after_two)
    assert not out.exists() and partial.exists() and done == [2, 2]
    with h5py.File(partial, "r") as f:
        assert f.attrs["n_done"] == 4 and sorted(f.keys()) == ["0", "1", "2", "3"]
    summary = embed_file(infile, out, emb, chunk_size=2)
    assert summary["resumed_from"] == 4 and done == [2, 2, 2]  # only the last chunk was embedded again
    assert out.exists() and not partial.exists()
    reference = tmp_path / "ref.hdf5"
    embed_file(infile, reference, Embedder(bilm), chunk_size=2)  # same batches: bit-identical
    got, got_index, _ = read(out)
    want, want_index, _ = read(reference)
    assert got.keys() == want.keys() and got_index == want_index
    assert all(np.array_equal(got[k], want[k]) for k in want)


def test_partial_from_other_input_or_settings_is_discarded(tmp_path, model, infile, capsys):
    emb = Embedder(load_bilm(*model))
    out = tmp_path / "out.hdf5"
    with pytest.raises(Interrupt):
        embed_file(infile, out, emb, chunk_size=2, on_chunk=lambda k, n: (_ for _ in ()).throw(Interrupt))
    summary = embed_file(infile, out, emb, output_format="top", chunk_size=2)  # other settings
    assert summary["resumed_from"] == 0 and "starting over" in capsys.readouterr().err
    assert read(out)[0]["0"].shape == (4, 8)
    (tmp_path / "out.hdf5.partial").write_bytes(b"not hdf5")  # e.g. killed mid-write
    assert embed_file(infile, out, emb, chunk_size=2)["resumed_from"] == 0


def test_embed_input_streams_ranges_chunks_and_index(tmp_path):
    p = tmp_path / "in.txt"
    lines = [f"s{i} " + "w " * (i % 4) for i in range(11)] + ["s1 w"]  # the last line repeats line 2
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    src = EmbedInput(p)
    want = [line.split() for line in lines]
    assert len(src) == 12 and list(src.lengths) == [len(t) for t in want] and src.tokens(2, 5) == 3 + 4 + 1
    got = list(src.chunks(3, 10, 3))
    assert [start for start, _ in got] == [3, 6, 9] and sum((c for _, c in got), []) == want[3:10]
    assert json.loads(src.sentence_index())["s1 w"] == "11"  # a repeated line maps to its last occurrence
    assert src.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()

"""Hostile cases, lists thirty-three to thirty-eight: outputs that cannot be written, run folders being written or
removed, download folders that are files, late NaNs from plugins, damaged train-bilm checkpoints, another rank's
allocation failure, Python API arguments of the wrong kind, --set of a whole section, the hf reader's local files,
binary text input, wsd tag's part-of-speech markers, unread TSV fields and a model.pt of another run."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import yaml

from elmo_tasks.cli import main

from test_reliability_outputs_r3 import senses  # noqa: F401  (a module fixture of the tiny WSD inventory)
from test_reliability_r13 import one_layer_wsd
from test_reliability_r15 import _plugin
from test_tasks_helpers import elmo_section, one_line_error, static_config_file

FAST = ["--cache-dir", "none", "--progress", "off"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (a device whose writes fail for room)")
def test_predict_into_a_device_that_is_full_names_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", "R", *FAST]) == 0
    Path("in.txt").write_text("the cat\n")
    capsys.readouterr()
    assert main(["predict", "R", "in.txt", "--out", "/dev/full", *FAST]) == 2
    one_line_error(capsys, "error: /dev/full: No space left on device; free some space or write the output elsewhere")


def test_predict_on_a_run_still_being_written_says_it_is_in_progress(tmp_path, capsys, monkeypatch):
    from elmo_features.util.locking import OutputLock

    monkeypatch.chdir(tmp_path)
    Path("R").mkdir()
    Path("R/config.yaml").write_text("name: x\n")  # (a run writes its files as it goes; model.pt comes later)
    Path("in.txt").write_text("the cat\n")
    with OutputLock(Path("R/run.lock"), "the run folder R"):
        assert main(["predict", "R", "in.txt", *FAST]) == 2
        one_line_error(capsys, "run folder: R is a run still in progress (PID ", "wait until it has finished")
    assert main(["predict", "R", "in.txt", *FAST]) == 2  # (the writer gone: the folder is judged by its files)
    one_line_error(capsys, "run folder: R has no ")


def test_a_download_folder_that_is_a_file_is_named(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("dd").write_text("")
    Path("in.txt").write_text("the cat\n")
    for argv in (["models", "get", "minilm-l6", "--download-cache", "dd"], ["models", "list", "--download-cache", "dd"],
                 ["embed", "in.txt", "o.h5", "--model", "small", "--download-cache", "dd"]):
        assert main(argv) == 2, argv
        one_line_error(capsys, "error: --download-cache: dd is a file, not a folder; choose another path")
    assert not Path("o.h5").exists()


PLUGIN_LATE_NAN = ("from elmo_tasks.registry import FUSIONS\nfrom elmo_tasks.features.fusion import LayerAttention\n"
                   "CALLS = [0]\n@FUSIONS.register('late_nan_r16')\nclass LateNan(LayerAttention):\n"
                   "    def forward(self, layers, mask):\n        out = super().forward(layers, mask)\n"
                   "        if self.training:\n            CALLS[0] += 1\n"
                   "        return out * float('nan') if CALLS[0] > 2 else out\n")


def test_a_nan_loss_after_updates_with_a_plugin_in_play_names_the_plugin_too(tmp_path, capsys, monkeypatch):
    from elmo_tasks.registry import FUSIONS

    with _plugin(tmp_path, monkeypatch, "latenan_r16", PLUGIN_LATE_NAN, FUSIONS, ("late_nan_r16",)):
        env, cfg = static_config_file(tmp_path, training={"max_epochs": 4, "batch_size": 2})
        raw = yaml.safe_load(Path(cfg).read_text())
        raw["features"] = elmo_section(env, mix={"name": "late_nan_r16"})
        Path(cfg).write_text(yaml.safe_dump(raw))
        assert main(["run", cfg, "--out", "R", "--include", "latenan_r16", *FAST]) == 2
    one_line_error(capsys, "training diverged: the loss is nan (training.lr ", "may be too large, or a plugin "
                   "component made it: fusion late_nan_r16 (module latenan_r16); check its forward")


def test_a_dev_layer_row_of_a_one_layer_source_is_said_absent(tmp_path, capsys, monkeypatch, senses):  # noqa: F811
    cfg, _ = one_layer_wsd(tmp_path, monkeypatch, knn=["layers", "dev_layer"])
    assert main(["wsd", "--config", cfg, "--out", "W", "--no-plot", *FAST]) == 0
    assert ("source vec has one layer: no dev_layer row for it (its one layer is the `layers` row of knn)"
            in capsys.readouterr().err)


def test_another_ranks_allocation_failure_is_told_as_out_of_memory():
    from elmo_features.util.distributed import DistributedError
    from elmo_tasks.cli import error_message

    e = DistributedError("rank 0: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
                         "memory: you tried to allocate 1048000000000 bytes. Error code 12 (Cannot allocate memory)")
    assert error_message(e) == ("rank 0: out of memory: an allocation of 976.0 GB failed; lower the sizes in the "
                                "config (layer widths, batch sizes), or run on a machine with more memory")
    assert error_message(DistributedError("rank 0: the input differs")) == "rank 0: the input differs"


def test_a_train_bilm_checkpoint_changed_after_it_was_saved_is_refused(tmp_path):
    from test_reliability_training import SMALL, _text
    from elmo_features.training.config import TrainConfig
    from elmo_features.training.trainer import Trainer
    from elmo_features.util.errors import CheckpointError

    corpus = tmp_path / "a.txt"
    _text(corpus, ["the", "cat", "sat", "on", "mat", "dog"])
    cfg = TrainConfig.from_dict({**SMALL, "train_files": [str(corpus)], "out_dir": str(tmp_path / "o")})
    tr = Trainer(cfg, progress=False)
    tr._stop = True
    tr.run()
    ckpt = tmp_path / "o" / "checkpoint.pt"
    Trainer(cfg, resume=True, progress=False).close()  # (as saved: resumes)
    state = torch.load(ckpt, weights_only=True)
    name = next(k for k, v in state["model"].items() if v.is_floating_point() and v.numel())
    state["model"][name].view(-1)[0] += 1e-3  # one value changed, the file still a valid checkpoint
    torch.save(state, ckpt)
    with pytest.raises(CheckpointError, match="checkpoint.pt: its content does not match the checksum it was saved "
                                              "with \\(the file is damaged, or was edited\\)"):
        Trainer(cfg, resume=True, progress=False)


# ---------------------------------------------------------------- list thirty-four

@pytest.mark.parametrize("replace_with_file", [False, True])
def test_a_run_folder_removed_or_replaced_while_it_trains_is_said_so(tmp_path, capsys, monkeypatch, replace_with_file):
    import shutil

    import elmo_tasks.experiment.run as run_module

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    original = run_module.train

    def train_then_lose_the_folder(*a, **k):
        out = original(*a, **k)
        shutil.rmtree("R")  # the user removes the folder while the run trains
        if replace_with_file:
            Path("R").write_text("mine\n")
        return out

    monkeypatch.setattr(run_module, "train", train_then_lose_the_folder)
    assert main(["run", cfg, "--out", "R", *FAST]) == 2
    one_line_error(capsys, "the run folder R was removed or replaced while the run trained (by another program or by "
                           "hand); the trained model was not saved: rerun the run")
    assert (Path("R").read_text() == "mine\n") if replace_with_file else not Path("R").exists()


def test_predict_reader_says_gold_labels_never_seen_in_training(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", "R", *FAST]) == 0
    text = Path(env["conll_test"]).read_text()
    assert "B-PER" in text
    Path("t.txt").write_text(text.replace("B-PER", "B-ZZZ").replace("I-PER", "I-ZZZ"))
    capsys.readouterr()
    assert main(["predict", "R", "t.txt", "--reader", *FAST]) == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: t.txt: 3 gold labels never seen in training (counted as errors): S-ZZZ 2"), err


def test_api_functions_name_a_wrong_argument_type(tmp_path):
    from elmo_features import TokenCache, bilm_fingerprint, load_bilm
    from test_tasks_helpers import make_bilm

    with pytest.raises(TypeError, match="bilm_fingerprint: expected a BiLM .*, got str 'x'"):
        bilm_fingerprint("x")
    bilm = load_bilm(*make_bilm(tmp_path / "b"))
    with pytest.raises(TypeError, match="TokenCache vocab is a str \\('the cat'\\); pass a list of words"):
        TokenCache(bilm, vocab="the cat")
    with pytest.raises(ValueError, match="TokenCache vocab has an empty or whitespace-only token at position 1"):
        TokenCache(bilm, vocab=["the", " "])
    assert len(TokenCache(bilm, vocab=["the", "cat", "the"])) == 2


# ---------------------------------------------------------------- list thirty-five

def test_api_arguments_of_the_wrong_kind_are_named(tmp_path):
    import numpy as np

    from elmo_features import BiLM, FeatureCache, LazyFeatures, ScalarMix, TokenCache, load_bilm, save_bilm
    from elmo_features.util.errors import DamagedCacheError
    from elmo_tasks.experiment.run import load_run
    from test_tasks_helpers import make_bilm

    x = torch.zeros(1, 2, 4, device="meta")
    with pytest.raises(ValueError, match="ScalarMix: the layers are on the meta device"):
        ScalarMix(2)([x, x])
    bilm = load_bilm(*make_bilm(tmp_path / "b"))
    for extra, kind, says in (({"char_embed": np.zeros(2)}, ValueError, "would replace the biLM's own weight "
                                                                         "'char_embed'"),
                              ({"CNN": np.zeros(2)}, ValueError, "would replace the biLM's own weight 'CNN/"),
                              ({"": np.zeros(2)}, ValueError, "extra_arrays has the name ''"),
                              ([1, 2], TypeError, "extra_arrays must be a dict of dataset name -> NumPy array, got "
                                                  "list"),
                              ({"x": "notarray"}, TypeError, "extra_arrays\\['x'\\] is a str, not a NumPy array")):
        with pytest.raises(kind, match=says):
            save_bilm(bilm, tmp_path / "e" / "o.json", tmp_path / "e" / "w.hdf5", extra_arrays=extra)
        assert not (tmp_path / "e").exists()  # (refused before anything is made)
    save_bilm(bilm, tmp_path / "f" / "o.json", tmp_path / "f" / "w.hdf5", extra_arrays={"mine/x": np.ones(2)})
    load_bilm(tmp_path / "f" / "o.json", tmp_path / "f" / "w.hdf5")  # (a new name is kept beside the weights)
    with pytest.raises(ValueError, match="TokenCache chunk_size must be >= 1, got 0"):
        TokenCache(bilm, vocab=["a"], chunk_size=0)
    with pytest.raises(TypeError, match="TokenCache.lookup: sentences must be tokenized \\(list\\[list\\[str\\]\\]\\), "
                                        "got a str"):
        TokenCache(bilm).lookup("the cat")
    (tmp_path / "g.txt").write_text("the 0.1 0.2\n")
    with pytest.raises(DamagedCacheError, match="g.txt: not a feature cache entry"):
        LazyFeatures(tmp_path / "g.txt")
    with pytest.raises(TypeError, match="expected an embedder \\(elmo_features.Embedder or TransformerEmbedder\\), got "
                                        "str 'x'"):
        FeatureCache(tmp_path / "fc").embed("x", [["a"]])
    with pytest.raises(TypeError, match="BiLM: options must be a BiLMOptions .* got dict"):
        BiLM({})
    with pytest.raises(TypeError, match="load_run: run_dir must be a run folder's path \\(a str or Path\\), got "
                                        "NoneType"):
        load_run(None)


def test_set_of_a_whole_section_says_the_keys_it_drops(tmp_path, capsys):
    from elmo_features.util.config_files import apply_set

    raw = {"training": {"lr": 0.01, "max_epochs": 1, "batch_size": 2}}
    apply_set(raw, "training={lr: 0.5}")
    assert raw["training"] == {"lr": 0.5}
    assert capsys.readouterr().err == ("warning: --set training=... replaces the whole training section: max_epochs, "
                                       "batch_size take their defaults; to change one key, --set training.lr=VALUE\n")
    apply_set(raw, "training={lr: 0.1}")  # (nothing dropped: nothing said)
    raw["head"] = {"name": "crf_tagger", "dropout": 0.5}
    apply_set(raw, "head={name: token_tagger}")  # (another component: its keys are another's)
    assert capsys.readouterr().err == ""
    apply_set(raw, "head={name: token_tagger, hidden_dim: 8}")
    apply_set(raw, "head={hidden_dim: 4}")
    assert capsys.readouterr().err.count("replaces the whole head section: ") == 1


def test_wsd_tag_reads_a_part_of_speech_in_any_letter_case():
    from elmo_tasks.wsd.tagging import _split_pos

    assert _split_pos("bank/noun") == ("bank", "NOUN") and _split_pos("bank/Verb") == ("bank", "VERB")
    assert _split_pos("and/or") == ("and/or", None) and _split_pos("/NOUN") == ("/NOUN", None)


# ---------------------------------------------------------------- list thirty-six

def test_the_hf_reader_names_a_broken_local_line_and_refuses_a_split_of_one_file(tmp_path, capsys):
    from elmo_features.util.errors import ConfigError
    from elmo_tasks.data import read_data
    from elmo_tasks.data.types import DataFormatError

    (tmp_path / "tr.jsonl").write_text('{"text": "good film", "label": "pos"}\n{broken\n')
    with pytest.raises(DataFormatError, match="tr.jsonl:2: not valid JSON \\(Expecting property name enclosed in "
                                              "double quotes, column 2\\); give one JSON object per line"):
        read_data("hf", tmp_path / "tr.jsonl")
    assert "Failed to load JSON" not in capsys.readouterr().err  # (datasets' own report of it is not passed on)
    (tmp_path / "ok.jsonl").write_text('{"text": "good film", "label": "pos"}\n')
    with pytest.raises(ConfigError, match="reader option split 'validation': .*ok.jsonl is one file, read whole"):
        read_data("hf", tmp_path / "ok.jsonl", split="validation")
    assert [ex.label for ex in read_data("hf", tmp_path / "ok.jsonl")] == ["pos"]


def test_api_functions_of_the_data_and_wsd_layers_name_their_arguments(senses):  # noqa: F811 (the fixture)
    from elmo_tasks.data import read_data, tokenize
    from elmo_tasks.wsd.tagging import SenseTagger

    with pytest.raises(TypeError, match="tokenize: text must be a str, got NoneType"):
        tokenize(None)
    with pytest.raises(TypeError, match="read_data: path must be a data file's path \\(a str or Path\\), got "
                                        "NoneType"):
        read_data("tsv", None)
    tagger = SenseTagger(str(senses / "senses.h5"))
    assert tagger.candidates("bank", "noun") == tagger.candidates("bank", "NOUN") != []
    with pytest.raises(ValueError, match="SenseTagger.candidates: pos 'XYZ'; give one of NOUN, VERB, ADJ, ADV"):
        tagger.candidates("bank", "XYZ")


def test_predicts_progress_bar_says_predict_once(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", "R", "--cache-dir", "none", "--progress", "off"]) == 0
    Path("in.txt").write_text("the cat\n")
    capsys.readouterr()
    assert main(["predict", "R", "in.txt", "--cache-dir", "none", "--progress", "on"]) == 0
    err = capsys.readouterr().err
    assert "predict" in err and "predict predict" not in err, err


# ---------------------------------------------------------------- list thirty-seven

def test_a_binary_file_given_as_text_is_told_binary_before_its_carriage_returns(tmp_path):
    from elmo_features.util.text_input import read_sentences

    (tmp_path / "b.bin").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\r\x00\x03\x00>\n")
    with pytest.raises(Exception, match="b.bin:1: NUL byte at byte column 8 \\(a binary file\\?\\)"):
        read_sentences(tmp_path / "b.bin")
    (tmp_path / "mac.txt").write_bytes(b"the cat\rsat\n")
    with pytest.raises(Exception, match="mac.txt:1: a carriage return"):
        read_sentences(tmp_path / "mac.txt")


def test_wsd_tag_says_a_slash_tag_that_is_no_part_of_speech(senses, capsys):  # noqa: F811 (the fixture)
    from elmo_tasks.wsd.tagging import SenseTagger

    tagger = SenseTagger(str(senses / "senses.h5"))
    out = tagger.tag([["the", "bank/NUON", "of", "the", "river"], ["and/or", "bank/NOUN"]])
    assert out[0][1]["token"] == "bank/NUON" and out[0][1]["key"] is None and out[1][1]["key"] is not None
    err = capsys.readouterr().err
    assert err == ("warning: 1 token(s) end in /CAPITALS that are not a part of speech (bank/NUON): they are looked "
                   "up whole; the tags are NOUN, VERB, ADJ, ADV\n"), err
    with pytest.raises(TypeError, match="SenseTagger.candidates: word must be a non-empty str, got NoneType"):
        tagger.candidates(None, "NOUN")


def test_save_bilm_and_find_config_name_a_wrong_argument(tmp_path):
    from elmo_features import save_bilm
    from elmo_tasks.experiment.config import find_config

    for bad in ("notbilm", None, {}):
        with pytest.raises(TypeError, match="save_bilm: bilm must be a BiLM .*, got "):
            save_bilm(bad, tmp_path / "a.json", tmp_path / "a.h5")
    assert not list(tmp_path.iterdir())
    with pytest.raises(TypeError, match="find_config: spec must be a config's path or packaged name \\(a str or "
                                        "Path\\), got NoneType"):
        find_config(None)


# ---------------------------------------------------------------- list thirty-eight

def test_tsv_fields_that_are_not_read_are_said(tmp_path, capsys):
    from elmo_tasks.data import read_data

    (tmp_path / "t.tsv").write_text("pos\tgreat\tfun and moving\nneg\tdull\tand boring\n")
    assert [ex.tokens for ex in read_data("tsv", tmp_path / "t.tsv")] == [["great"], ["dull"]]
    assert capsys.readouterr().err.endswith("t.tsv: its rows have 3 fields; the label is field 1 and the text field 2 "
                                            "(label_column, text_column), field(s) 3 are not read\n")
    (tmp_path / "two.tsv").write_text("pos\tgreat fun\nneg\tdull\n")
    read_data("tsv", tmp_path / "two.tsv")
    assert capsys.readouterr().err == ""


def test_a_model_pt_of_another_run_is_named_as_such(tmp_path, capsys, monkeypatch):
    import shutil

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", "RN", *FAST]) == 0
    env, cfg = static_config_file(tmp_path, kind="sentiment")
    assert main(["run", cfg, "--out", "RS", *FAST]) == 0
    shutil.copytree("RS", "RR")
    shutil.copy("RN/model.pt", "RR/model.pt")
    Path("in.txt").write_text("the cat\n")
    capsys.readouterr()
    assert main(["predict", "RR", "in.txt", *FAST]) == 2
    one_line_error(capsys, "RR/config.yaml and RR/model.pt disagree on ", "model.pt copied from another run")


def test_lazy_features_compare_arrays_and_token_cache_names_a_non_bilm(tmp_path):
    from elmo_features import Embedder, FeatureCache, TokenCache, load_bilm
    from test_tasks_helpers import make_bilm

    with pytest.raises(TypeError, match="TokenCache: bilm must be a BiLM .*, got NoneType"):
        TokenCache(None)
    bilm = load_bilm(*make_bilm(tmp_path / "b"))
    lf = FeatureCache(tmp_path / "fc").embed_lazy(Embedder(bilm, progress=False), [["a"], ["b", "c"], ["a"]])
    assert lf.index(lf[1]) == 1 and lf.count(lf[0]) == 2 and lf[2] in lf
    assert lf[1][:, :1] not in lf
    with pytest.raises(ValueError, match="not one of the sentences"):
        lf.index(lf[1][:, :1])

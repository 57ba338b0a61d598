"""Round six (docs/reliability.md, "Round six"): a sense file replaced by a trial build, gold keys that are not
WordNet's, a plugin file shadowed by a module of the same name, switch variables, untokenized text given as
tokenized, a plugin that changes torch's default dtype, and the heads' API on empty rows and tag ids out of range;
on the tiny sense file of test_wsd_tag_text."""
from __future__ import annotations

import json
import shutil
import sys

import h5py
import pytest
import torch

import elmo_tasks.data  # noqa: F401 (first: elmo_tasks.wsd.data.reader cannot be imported first)
from elmo_tasks import plugins
from elmo_tasks.cli import main

from test_tasks_helpers import one_line_error
from test_wsd_tag_text import senses  # noqa: F401 (the module's sense file fixture)


def _keys(path) -> list[str]:
    with h5py.File(path, "r") as f:
        return [k.decode() if isinstance(k, bytes) else k for k in f["keys"][()]]


def _senses_cmd(root, *extra: str, out) -> list[str]:
    return ["wsd", "senses", "--config", str(root / "c.yaml"), "--source", "elmo", "--cache-dir", "none",
            "--progress", "off", "--out", str(out), *extra]


# ---------------------------------------------------------------- D12: a sense file replaced by a trial build

def test_d12_wsd_senses_keeps_an_existing_sense_file_unless_force(senses, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "senses.h5"
    shutil.copy(senses / "senses.h5", out)
    before, keys = out.read_bytes(), _keys(out)
    lemmas = {k.partition("%")[0] for k in keys}
    capsys.readouterr()
    assert main(_senses_cmd(senses, "--lemmas", "river", out=out)) == 2
    err = one_line_error(capsys, f"--out {out} holds a sense file ({len(keys)} senses of {len(lemmas)} lemmas",
                         "--force")
    assert err.split(": ", 2)[-1].rsplit("--force: ", 1)[1].endswith("--lemmas river --force")
    assert out.read_bytes() == before
    assert main(_senses_cmd(senses, "--lemmas", "river", "--force", out=out)) == 0
    assert _keys(out) == ["river%1:17:00::"]
    assert f"wrote {out}: 1 sense (" in capsys.readouterr().out  # (one sense, not "1 senses")


def test_d12_force_never_replaces_a_file_of_another_kind(senses, tmp_path, capsys):  # noqa: F811
    notes = tmp_path / "notes.h5"
    notes.write_text("my notes\n")
    capsys.readouterr()
    assert main(_senses_cmd(senses, "--lemmas", "river", "--force", out=notes)) == 2
    one_line_error(capsys, str(notes), "is not a sense file")
    assert notes.read_text() == "my notes\n"


def test_d12_a_new_output_needs_no_force_and_fullwidth_lemmas_are_folded(senses, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "new.h5"
    assert main(_senses_cmd(senses, "--lemmas", "\uff52\uff49\uff56\uff45\uff52", out=out)) == 0  # ｒｉｖｅｒ
    assert _keys(out) == ["river%1:17:00::"]


def test_d12_the_make_it_again_hint_of_a_sense_file_replaces_it(senses, tmp_path):  # noqa: F811
    from elmo_tasks.wsd.pos_head import _remake

    with h5py.File(senses / "senses.h5", "r") as f:
        meta = json.loads(f.attrs["meta"])
    hint = _remake(tmp_path / "s.h5", meta)
    assert hint.startswith("make it again: ") and hint.endswith(" --force") and f"--out {tmp_path / 's.h5'}" in hint


# ---------------------------------------------------------------- C04: gold keys that are not WordNet's

def _bad_key_test(root):
    from wsd_toy import ToyInstance as I
    from wsd_toy import write_dataset

    return write_dataset(root / "t", "test", [["I", I("deposited", "deposit", "VERB", ["deposit%2:40:00::"]), "money",
                                               "at", "the", I("bank", "bank", "NOUN", ["bank%9:99:99::"]), "."]])


def test_c04_raw_eval_says_gold_keys_that_are_not_wordnets_as_wsd_does(senses, tmp_path, capsys):  # noqa: F811
    t = _bad_key_test(tmp_path)
    capsys.readouterr()
    assert main(["wsd", "raw-eval", "--senses", str(senses / "senses.h5"), "--test", str(t), "--out",
                 str(tmp_path / "re"), "--progress", "off"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "not WordNet" in line]
    assert len(warnings) == 1 and f"{t / 'test.gold.key.txt'}:2: bank%9:99:99::" in warnings[0], warnings
    result = json.loads((tmp_path / "re" / "raw_eval.json").read_text())
    assert result["tests"][0]["gold_keys_not_in_wordnet"] == 1
    assert "Gold keys that are not sense keys of its WordNet: test 1" in (tmp_path / "re" / "raw_eval.md").read_text()
    # the wsd evaluation says the same of the same folder
    assert main(["wsd", "--config", str(senses / "c.yaml"), "--test", str(t), "--out", str(tmp_path / "W"),
                 "--no-plot", "--cache-dir", "none"]) == 0
    assert [line for line in capsys.readouterr().err.splitlines() if "not WordNet" in line] == warnings


def test_c09_a_key_file_that_disagrees_names_only_the_side_that_differs(tmp_path):
    from elmo_tasks.wsd.data.reader import WsdFormatError, load_dataset

    t = _bad_key_test(tmp_path)
    key = t / "test.gold.key.txt"
    key.write_text(key.read_text().splitlines()[0] + "\n")
    with pytest.raises(WsdFormatError) as e:
        load_dataset(t)
    msg = str(e.value)
    assert "disagree: 1 instance without a gold key (d000.s000.t001)" in msg and "[]" not in msg and "0 " not in msg


# ---------------------------------------------------------------- G10: a plugin file shadowed by another module

@pytest.fixture
def here(tmp_path, monkeypatch):
    """The current folder (a fresh one); the plugin modules imported from it are forgotten afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(plugins, "_INCLUDED", list(plugins._INCLUDED))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("r20_"):
            sys.modules.pop(name, None)


@pytest.mark.parametrize("name, mine", [("pprint", "pprint.py"), ("json", "json/__init__.py"),
                                        ("json.extra", "json/__init__.py")])
def test_g10_a_plugin_file_named_like_an_imported_module_is_refused_naming_both(here, capsys, name, mine):
    import json as stdlib_json

    (here / mine).parent.mkdir(exist_ok=True)
    (here / mine).write_text("import sys\nprint('my plugin loaded', file=sys.stderr)\n")
    top = name.split(".")[0]
    capsys.readouterr()
    assert main(["components", "--include", name]) == 2
    err = one_line_error(capsys, f"--include {name}: the name {top} is the ",
                         f"{here / (top + '.py' if mine.endswith('pprint.py') else top)} in the current folder was "
                         "not loaded", f"--include my_{name}")
    assert "my plugin loaded" not in err
    assert (str(__import__("pprint").__file__) if top == "pprint" else str(stdlib_json.__path__[0])) in err


def test_g10_a_plugin_that_registers_nothing_is_said_once_and_a_package_registering_in_a_submodule_is_not(
        here, capsys):
    (here / "r20_empty.py").write_text("x = 1\n")
    (here / "r20_pkg").mkdir()
    (here / "r20_pkg" / "__init__.py").write_text("")
    (here / "r20_pkg" / "readers.py").write_text(
        "from elmo_tasks.registry import READERS\n\n\n@READERS.register('r20_lines', path_kind='file')\n"
        "def read_lines(path):\n    return []\n")
    capsys.readouterr()
    assert main(["components", "--include", "r20_empty", "--include", "r20_pkg"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["warning: --include r20_empty: it registered no component (head, feature source, fusion, char "
                   "encoder or reader), so a config can name nothing from it; is it the module you meant?"], err


# ---------------------------------------------------------------- K07/K15: switch variables

@pytest.mark.parametrize("value, on", [("0", False), ("off", False), ("False", False), ("no", False), ("1", True),
                                       ("ON", True), ("", True), ("banana", True)])
def test_k07_onednn_reads_its_switch_as_the_debug_switch_does(monkeypatch, capsys, value, on):
    from elmo_features.model import onednn
    from elmo_features.util.once import new_command

    new_command()
    monkeypatch.setenv("ELMO_TASKS_ONEDNN", value)
    assert onednn._probe() is (on and _onednn_here())
    err = capsys.readouterr().err.strip()
    assert err == ("" if value != "banana" else "warning: ELMO_TASKS_ONEDNN='banana' is not one of 1/true/yes/on or "
                   "0/false/no/off; oneDNN's linear layers stay on")


def _onednn_here() -> bool:
    """Whether oneDNN's linear layers work on this machine (the switch left unset)."""
    import os

    from elmo_features.model import onednn

    saved = os.environ.pop("ELMO_TASKS_ONEDNN", None)
    try:
        return onednn._probe()
    finally:
        if saved is not None:
            os.environ["ELMO_TASKS_ONEDNN"] = saved


@pytest.mark.parametrize("name, read", [("ELMO_TASKS_BF16_EMULATE", "elmo_features.model.precision:emulation_requested"),
                                        ("ELMO_TASKS_DEBUG", None),
                                        ("ELMO_TASKS_IGNORE_INSTALLED_ENCODERS", None)])
def test_k15_every_switch_reads_off_words_as_off_and_says_an_unknown_value_once(monkeypatch, capsys, name, read):
    import importlib

    from elmo_features.util.env import switch
    from elmo_features.util.once import new_command

    def value() -> bool:
        if read:
            module, fn = read.split(":")
            return getattr(importlib.import_module(module), fn)()
        return switch(name, False, "it stays off")

    new_command()
    for word in ("false", "OFF", "no", "0"):
        monkeypatch.setenv(name, word)
        assert value() is False, word
    for word in ("true", "Yes", "on", "1"):
        monkeypatch.setenv(name, word)
        assert value() is True, word
    monkeypatch.setenv(name, "maybe")
    capsys.readouterr()
    assert value() is False and value() is False
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"warning: {name}='maybe' is not one of 1/true/yes/on or 0/false/no/off; ")


def test_k15_the_bf16_emulation_switch_set_to_false_does_not_emulate(monkeypatch, capsys):
    from elmo_features.model.precision import emulation_requested

    monkeypatch.setenv("ELMO_TASKS_BF16_EMULATE", "false")
    assert emulation_requested() is False


# ---------------------------------------------------------------- B38: untokenized text given as tokenized

@pytest.mark.parametrize("line, flags, said", [("bank, river.", ["--pretokenized"], True),
                                               ("the bank , by the river .", ["--pretokenized"], False),
                                               ("bank, river.", [], False)])
def test_b38_pretokenized_text_with_punctuation_glued_to_words_is_said_once(senses, tmp_path, capsys,  # noqa: F811
                                                                           line, flags, said):
    (tmp_path / "in.txt").write_text(f"{line}\n{line}\n")
    capsys.readouterr()
    assert main(["wsd", "tag", str(tmp_path / "in.txt"), "--senses", str(senses / "senses.h5"), "--format", "tsv",
                 *flags]) == 0
    err = [e for e in capsys.readouterr().err.splitlines() if "tokenized" in e]
    if said:
        assert len(err) == 1 and err[0].startswith("warning: 4 of the 4 words split on whitespace alone keep "
                                                   "punctuation at their edge ('bank,', 'river.')"), err
        assert "drop --pretokenized" in err[0]
    else:
        assert err == []


# ---------------------------------------------------------------- G09: a plugin that changes torch's default dtype

@pytest.fixture
def float64_default():
    """torch's default dtype float64 inside the test (as a plugin may set it), float32 again after."""
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(torch.float32)


def test_g09_a_bilm_loaded_under_a_float64_default_is_the_float32_model(senses, float64_default):  # noqa: F811
    from elmo_features import load_bilm
    from elmo_features.embedding.feature_cache import bilm_fingerprint

    opts, weights = senses / "bilm" / "options.json", senses / "bilm" / "weights.hdf5"
    wide = load_bilm(opts, weights)
    torch.set_default_dtype(torch.float32)
    plain = load_bilm(opts, weights)
    assert {p.dtype for p in wide.parameters()} == {torch.float32}
    assert bilm_fingerprint(wide) == bilm_fingerprint(plain)


def test_g09_a_plugin_that_sets_a_float64_default_is_named_and_the_default_put_back(senses, here, capsys):  # noqa: F811
    (here / "r20_dtype.py").write_text("import torch\ntorch.set_default_dtype(torch.float64)\n")
    (here / "in.txt").write_text("we sat on the bank of the river\n")
    capsys.readouterr()
    try:
        assert main(["wsd", "tag", "in.txt", "--senses", str(senses / "senses.h5"), "--include", "r20_dtype"]) == 2
    finally:
        now = torch.get_default_dtype()
        torch.set_default_dtype(torch.float32)
    assert now == torch.float32
    err = one_line_error(capsys, "--include r20_dtype: it set torch's default dtype to torch.float64 (put back to "
                                 "torch.float32)", "must not change the default dtype")
    assert "changed since" not in err and "biLM" not in err


def test_g09_an_encoder_loaded_under_a_float64_default_is_float32_and_embeds_alike(tmp_path):
    """(transformers loads a checkpoint's float32 whatever the default: this guards that it stays so)"""
    import numpy as np

    from elmo_features.encoders.embedder import TransformerEmbedder

    from encoder_helpers import make_bert

    folder = make_bert(tmp_path / "bert")  # (float32 weights, as published models have)
    sentences = [["the", "bank", "by", "the", "river"]]
    want = list(TransformerEmbedder(str(folder)).embed_batches(sentences))[0][1][0]
    torch.set_default_dtype(torch.float64)
    try:
        wide = TransformerEmbedder(str(folder))
        got = list(wide.embed_batches(sentences))[0][1][0]
    finally:
        torch.set_default_dtype(torch.float32)
    assert {p.dtype for p in wide.encoder.model.parameters()} == {torch.float32}
    assert got.dtype == np.float32 and np.array_equal(got, want)


# ---------------------------------------------------------------- H07/H08/H10: the heads' API

@pytest.mark.parametrize("variational", [False, True])
def test_h07_an_encoder_gives_zeros_for_a_row_of_padding_only_and_the_other_rows_as_alone(variational):
    from elmo_tasks.heads.variational import make_encoder

    torch.manual_seed(0)
    enc = make_encoder(4, 3, 2, 0.0, variational).eval()
    x = torch.randn(3, 5, 4, requires_grad=True)
    mask = torch.tensor([[0, 0, 0, 0, 0], [1, 1, 1, 0, 0], [0, 0, 0, 0, 0]])
    out = enc(x, mask)  # (3, 5, 6)
    assert out.shape == (3, 5, 6) and not out[0].any() and not out[2].any()
    alone = enc(x[1:2, :3], torch.ones(1, 3))  # (1, 3, 6)
    torch.testing.assert_close(out[1, :3], alone[0])
    assert not out[1, 3:].any()
    out.sum().backward()  # gradients reach the real tokens only
    assert x.grad[1, :3].any() and not x.grad[0].any() and not x.grad[1, 3:].any()


@pytest.mark.parametrize("variational", [False, True])
def test_h08_an_encoder_given_a_batch_of_zero_rows_gives_an_empty_output(variational):
    from elmo_tasks.heads.variational import make_encoder

    enc = make_encoder(4, 3, 1, 0.0, variational)
    out = enc(torch.randn(0, 5, 4), torch.zeros(0, 5))
    assert out.shape == (0, 5, 6)


def test_h10_crf_tags_out_of_range_are_a_usage_error_naming_row_and_position():
    from elmo_features.util.errors import UsageError
    from elmo_tasks.heads.crf import ConditionalRandomField

    crf = ConditionalRandomField(3)
    em, mask = torch.randn(2, 3, 3), torch.tensor([[1, 1, 0], [1, 1, 1]])
    for tags, said in ((torch.tensor([[0, 1, 0], [0, 5, 1]]), "row 1 holds 5 at position 1"),
                       (torch.tensor([[0, -1, 0], [0, 2, 1]]), "row 0 holds -1 at position 1")):
        with pytest.raises(UsageError, match="CRF tags must be tag ids 0 to 2 \\(the CRF has 3 tags\\) where the "
                                             f"mask is true; {said}"):
            crf.neg_log_likelihood(em, tags, mask)
    with pytest.raises(UsageError, match="CRF tags must be an integer tensor"):
        crf.neg_log_likelihood(em, torch.zeros(2, 3), mask)
    assert torch.isfinite(crf.neg_log_likelihood(em, torch.tensor([[0, 1, 7], [0, 2, 1]]), mask))  # (padding: unread)

"""Round seven (docs/reliability.md, "Round seven: the Python API, plugins and predict"): masks of the wrong shape or
type, a CRF of no time steps, plugins that change torch's default device or take an installed package's name, bf16
on a model converted to another dtype, and predict over an existing file; each case replayed as a user meets it."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import elmo_tasks.data  # noqa: F401 (first: elmo_tasks.wsd.data.reader cannot be imported first)
from elmo_features.util.errors import UsageError
from elmo_tasks import plugins
from elmo_tasks.cli import main

from test_tasks_helpers import one_line_error
from test_wsd_tag_text import senses  # noqa: F401 (the module's sense file fixture)


# ---------------------------------------------------------------- F03/F04/F05/F08: masks of the wrong shape or type

def _encoders():
    from elmo_tasks.heads.base import BiLSTMEncoder
    from elmo_tasks.heads.variational import VariationalBiLSTMEncoder

    return [BiLSTMEncoder(4, 3).eval(), VariationalBiLSTMEncoder(4, 3).eval()]


@pytest.mark.parametrize("mask, got", [(torch.ones(2, 5), "(2, 5)"), (torch.ones(3, 3), "(3, 3)"),
                                       (torch.ones(2, 2), "(2, 2)"), (torch.ones(2), "(2,)"),
                                       ([[1, 1, 0], [1, 0, 0]], "a list (give a tensor: torch.tensor(mask))")])
@pytest.mark.parametrize("encoder", [0, 1], ids=["plain", "variational"])
def test_f03_an_encoder_mask_of_another_shape_or_type_is_one_usage_error_naming_both(mask, got, encoder):
    enc = _encoders()[encoder]
    name = type(enc).__name__
    with pytest.raises(UsageError) as e:
        enc(torch.randn(2, 3, 4), mask)
    assert str(e.value) == f"{name} mask must be a (B, T) tensor matching x's (B, T) = (2, 3), got {got}"


def test_f05_a_mask_of_the_right_shape_is_still_read_as_before():
    for enc in _encoders():
        x = torch.randn(2, 3, 4)
        out = enc(x, torch.tensor([[1, 1, 0], [1, 1, 1]]))  # (2, 3, 6)
        assert out.shape == (2, 3, 6) and not out[0, 2].any() and out[1, 2].any()


def test_f08_the_crf_and_scalar_mix_say_a_list_mask_and_a_mask_of_another_shape_alike():
    from elmo_features.model.scalar_mix import ScalarMix
    from elmo_tasks.heads.crf import ConditionalRandomField

    crf = ConditionalRandomField(3)
    with pytest.raises(UsageError, match=r"^CRF mask must be a \(B, T\) tensor matching the emissions' \(B, T\) = "
                                         r"\(2, 4\), got \(2, 3\)$"):
        crf.viterbi(torch.randn(2, 4, 3), torch.ones(2, 3))
    with pytest.raises(UsageError, match=r"^CRF mask must be a \(B, T\) tensor .* got a list"):
        crf.neg_log_likelihood(torch.randn(1, 2, 3), torch.zeros(1, 2, dtype=torch.long), [[1, 1]])
    with pytest.raises(UsageError, match=r"^ScalarMix mask must be a \(B, T\) tensor matching the layers' \(B, T\) = "
                                         r"\(2, 4\), got a list"):
        ScalarMix(2)(torch.randn(2, 2, 4, 5), [[1] * 4] * 2)


# ---------------------------------------------------------------- F11: a CRF of no time steps

@pytest.mark.parametrize("rows", [2, 0])
def test_f11_a_crf_of_no_time_steps_says_its_own_rule(rows):
    from elmo_tasks.heads.crf import ConditionalRandomField

    crf = ConditionalRandomField(3)
    em, mask = torch.randn(rows, 0, 3), torch.zeros(rows, 0)
    rule = r"^CRF: every sequence needs at least one token \(mask\[:, 0\] must be true\)$"
    with pytest.raises(ValueError, match=rule):
        crf.viterbi(em, mask)
    with pytest.raises(ValueError, match=rule):
        crf.neg_log_likelihood(em, torch.zeros(rows, 0, dtype=torch.long), mask)


# ---------------------------------------------------------------- P06/E03: a plugin that sets torch's default device

@pytest.fixture
def here(tmp_path, monkeypatch):
    """The current folder (a fresh one, on sys.path for fake installed distributions); the plugins are loaded again
    by the next command, the modules imported from it are forgotten and torch's default device is cpu afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_INCLUDED", list(plugins._INCLUDED))
    monkeypatch.setattr(plugins, "_ENTRY_POINTS_LOADED", [False])
    before = set(sys.modules)
    yield tmp_path
    torch.set_default_device(None)
    for name in set(sys.modules) - before:
        if name.startswith("r21_"):
            sys.modules.pop(name, None)


META = "import torch\ntorch.set_default_device('meta')\n"


def test_p06_an_include_that_sets_the_default_device_is_named_and_the_device_put_back(senses, here,  # noqa: F811
                                                                                      capsys):
    (here / "r21_dev.py").write_text(META)
    (here / "in.txt").write_text("we sat on the bank of the river\n")
    capsys.readouterr()
    assert main(["wsd", "tag", "in.txt", "--senses", str(senses / "senses.h5"), "--include", "r21_dev"]) == 2
    assert torch.get_default_device() == torch.device("cpu") and torch.empty(1).device.type == "cpu"
    one_line_error(capsys, "--include r21_dev: it set torch's default device to meta (put back to cpu)",
                   "must not change the default device (give device= to its own tensors instead)")


def test_e03_an_installed_plugin_that_sets_the_default_device_is_skipped_and_the_command_goes_on(
        senses, here, capsys):  # noqa: F811
    info = here / "r21dist-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: r21dist\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[elmo_tasks.plugins]\nr21_epdev = r21_epdev\n")
    (here / "r21_epdev.py").write_text(META)
    (here / "in.txt").write_text("we sat on the bank of the river\n")
    capsys.readouterr()
    assert main(["wsd", "tag", "in.txt", "--senses", str(senses / "senses.h5"), "--format", "tsv"]) == 0
    out, err = capsys.readouterr()
    assert "bank%" in out
    assert err.strip().splitlines() == [
        "warning: plugin r21_epdev (entry point of distribution r21dist, module r21_epdev) was not loaded: "
        "PluginError: it set torch's default device to meta (put back to cpu); the toolkit puts its models and "
        "features on the device it is given (--device, cpu by default), and models built on another device fail on "
        "them: a plugin module must not change the default device (give device= to its own tensors instead); its "
        "components are unavailable (fix or uninstall r21dist: pip uninstall r21dist)"], err


# ---------------------------------------------------------------- P05: a plugin named like an installed package

def test_p05_an_include_named_like_an_installed_package_not_imported_yet_is_refused_naming_both(here, capsys):
    import importlib

    site = here / "lib" / "site-packages"  # (an installed package the toolkit would import later, as transformers)
    (site / "r21_hf").mkdir(parents=True)
    (site / "r21_hf" / "__init__.py").write_text("AutoModel = object\n")
    (here / "r21_hf.py").write_text("import sys\nprint('my plugin loaded', file=sys.stderr)\n")
    sys.path.insert(1, str(site))  # (after the current folder: here's file is found first; the fixture restores it)
    importlib.invalidate_caches()
    capsys.readouterr()
    assert main(["components", "--include", "r21_hf"]) == 2
    err = one_line_error(capsys, f"--include r21_hf: {here / 'r21_hf.py'} in the current folder has the name of the "
                                 f"installed package r21_hf ({site / 'r21_hf'}), which it would hide for the whole "
                                 "command", "rename it (e.g. to my_r21_hf.py) and give --include my_r21_hf")
    assert "my plugin loaded" not in err and "r21_hf" not in sys.modules


def test_p05_a_plugin_named_like_no_installed_package_is_still_loaded(here, capsys):
    (here / "r21_mine.py").write_text("from elmo_tasks.registry import READERS\n\n\n@READERS.register('r21_lines', "
                                      "path_kind='file')\ndef read(path):\n    return []\n")
    assert main(["components", "--include", "r21_mine"]) == 0
    assert "r21_mine" in sys.modules


def test_p05_a_file_that_hides_transformers_is_named_by_the_encoder_error(here, monkeypatch):
    import types

    from elmo_features.encoders.loading import EncoderError, load_encoder

    import transformers as installed  # (the real package: where it lies)

    (here / "transformers.py").write_text("x = 1\n")
    fake = types.ModuleType("transformers")
    fake.__file__ = str(here / "transformers.py")
    monkeypatch.setitem(sys.modules, "transformers", fake)  # (as `python my_script.py` beside it imports it)
    (here / "m").mkdir()
    (here / "m" / "config.json").write_text("{}")
    with pytest.raises(EncoderError) as e:
        load_encoder(str(here / "m"))
    assert str(e.value) == (f"Transformer encoders need the 'transformers' package, but {here / 'transformers.py'} in "
                            f"the current folder has the name of the installed package transformers "
                            f"({Path(installed.__path__[0]).resolve()}) and is imported in its "
                            "place; rename it (e.g. to my_transformers.py)")


# ---------------------------------------------------------------- G01: predict --out over an existing file

FAST = ["--cache-dir", "none", "--progress", "off"]


def test_g01_predict_keeps_an_existing_out_file_unless_force(tmp_path, capsys, monkeypatch):
    from test_tasks_helpers import static_config_file

    monkeypatch.chdir(tmp_path)
    _, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", "R", *FAST]) == 0
    (tmp_path / "in.txt").write_text("John lives in Paris\n")
    notes = tmp_path / "notes.txt"
    notes.write_text("my precious notes\n")
    capsys.readouterr()
    assert main(["predict", "R", "in.txt", "--out", "notes.txt", *FAST]) == 2
    one_line_error(capsys, "--out notes.txt exists; give another file, or replace it with --force: elmo-tasks predict "
                           "R in.txt --out notes.txt --cache-dir none --progress off --force")
    assert notes.read_text() == "my precious notes\n"
    assert main(["predict", "R", "in.txt", "--out", "new.txt", *FAST]) == 0  # (a new file needs no --force)
    assert main(["predict", "R", "in.txt", "--out", "new.txt", *FAST]) == 2  # (nor is its own earlier output replaced)
    assert main(["predict", "R", "in.txt", "--out", "notes.txt", "--force", *FAST]) == 0
    assert notes.read_text() == (tmp_path / "new.txt").read_text() and "Paris" in notes.read_text()


def test_g01_configs_show_says_the_command_with_force_as_predict_does(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text("my: config\n")
    assert main(["configs", "show", "sentiment_polarity", "--out", "mine.yaml"]) == 2
    one_line_error(capsys, "--out mine.yaml exists; give another file, or replace it with --force: elmo-tasks configs "
                           "show sentiment_polarity --out mine.yaml --force")
    assert (tmp_path / "mine.yaml").read_text() == "my: config\n"


# ---------------------------------------------------------------- X03: bf16 on a model the caller converted

@pytest.mark.parametrize("conversion", ["half", "double"])
def test_x03_bf16_on_a_converted_model_gives_the_float32_models_vectors_its_weights_round_to(tmp_path, monkeypatch,
                                                                                           conversion):
    import numpy as np

    from elmo_features.encoders import TransformerEmbedder
    from elmo_features.model import precision as P

    from encoder_helpers import make_bert

    monkeypatch.setattr(P, "bf16_cpu_support", lambda: (True, "Test CPU: has avx512_bf16, no amx_bf16"))
    folder = make_bert(tmp_path / "bert", hidden=32)
    sentences = [["the", "bank", "of", "the", "river"], ["John", "lives", "in", "Paris"]]
    converted = TransformerEmbedder(str(folder), progress=False, precision="bf16")
    converted.embed_sentences(sentences)  # (the bf16 copies made once; the conversion below makes them again)
    getattr(converted.encoder.model, conversion)()
    got = converted.embed_sentences(sentences)
    same = TransformerEmbedder(str(folder), progress=False, precision="bf16")
    getattr(same.encoder.model, conversion)().float()  # (the float32 model of the converted weights)
    want = same.embed_sentences(sentences)
    for a, b in zip(got, want):
        assert a.dtype == np.float32 and np.isfinite(a).all() and np.array_equal(a, b)

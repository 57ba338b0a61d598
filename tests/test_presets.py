"""Presets, downloads (from a local file:// mirror: there is no internet here), the default model, resolve_bilm."""
import json

import h5py
import numpy as np
import pytest
import torch

from elmo_features import PRESETS, BiLM, BiLMOptions, fetch_preset, get_preset, resolve_bilm, save_bilm
from elmo_features.formats import default_model
from elmo_features.formats import download
from elmo_features.formats.download import DownloadError

TINY = {
    "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8]], "n_highway": 1},
    "lstm": {"dim": 8, "projection_dim": 4, "n_layers": 2},
}


def test_presets_have_the_published_shapes():
    assert list(PRESETS) == ["small", "medium", "original", "original-5.5B"]
    dims = {}
    for name, p in PRESETS.items():
        opts = BiLMOptions.from_dict(p.options)
        assert opts.char_cnn.n_filters == 2048 and opts.lstm.n_layers == 2 and opts.lstm.cell_clip == 3
        dims[name] = (opts.lstm.dim, opts.lstm.projection_dim, opts.char_cnn.n_highway, opts.output_dim)
        assert p.stem == f"2x{opts.lstm.dim}_{opts.lstm.projection_dim}_2048cnn_{opts.char_cnn.n_highway}xhighway" + (
            "_5.5B" if name == "original-5.5B" else "")
        assert p.weights_url() == (f"https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/{p.stem}/"
                                   f"elmo_{p.stem}_weights.hdf5")
        assert p.options_url().endswith(f"/{p.stem}/elmo_{p.stem}_options.json")
    assert dims == {"small": (1024, 128, 1, 256), "medium": (2048, 256, 1, 512),
                    "original": (4096, 512, 2, 1024), "original-5.5B": (4096, 512, 2, 1024)}
    with pytest.raises(ValueError, match="small, medium, original, original-5.5B"):
        get_preset("large")


@pytest.fixture
def mirror(tmp_path):
    """A file:// mirror holding the 'small' preset's options and a (fake, tiny) HDF5 weight file."""
    p = get_preset("small")
    folder = tmp_path / "mirror" / p.stem
    folder.mkdir(parents=True)
    (folder / p.options_filename).write_text(json.dumps(p.options))
    with h5py.File(folder / p.weights_filename, "w") as f:
        f.create_dataset("char_embed", data=np.arange(12, dtype=np.float32).reshape(3, 4))
    return tmp_path / "mirror"


def test_fetch_downloads_once_atomically(tmp_path, mirror):
    cache = tmp_path / "cache"
    o, w = fetch_preset("small", cache_dir=cache, base_url=mirror.as_uri())
    assert json.loads(o.read_text()) == get_preset("small").options
    with h5py.File(w, "r") as f:
        assert f["char_embed"][2, 3] == 11
    import shutil

    shutil.rmtree(mirror)  # cached files are not downloaded again
    assert fetch_preset("small", cache_dir=cache, base_url=mirror.as_uri()) == (o, w)
    assert sorted(x.name for x in o.parent.iterdir()) == sorted([o.name, w.name])  # no temp files


def test_fetch_errors_leave_nothing_behind(tmp_path, mirror, monkeypatch):
    p = get_preset("small")
    cache = tmp_path / "cache"
    with pytest.raises(DownloadError, match="elmo_2x1024_128_2048cnn_1xhighway_options.json"):
        fetch_preset("small", cache_dir=cache, base_url=(tmp_path / "nowhere").as_uri())
    (mirror / p.stem / p.weights_filename).write_text("<html>not found</html>")
    monkeypatch.setenv("ELMO_TASKS_PRESET_BASE_URL", mirror.as_uri())  # the base URL from the environment
    with pytest.raises(DownloadError, match="not HDF5"):
        fetch_preset("small", cache_dir=cache)
    assert [x.name for x in (cache / p.stem).iterdir()] == [p.options_filename]
    opts = p.options
    opts["lstm"]["dim"] = 99
    (mirror / get_preset("medium").stem).mkdir()
    (mirror / get_preset("medium").stem / get_preset("medium").options_filename).write_text(json.dumps(opts))
    with pytest.raises(DownloadError, match="lstm.dim is 99"):
        fetch_preset("medium", cache_dir=cache)
    with pytest.raises(ValueError, match="valid presets"):
        fetch_preset("huge", cache_dir=cache)


def _tiny_model_folder(folder):
    torch.manual_seed(0)
    save_bilm(BiLM(BiLMOptions.from_dict(TINY)), folder / "options.json", folder / "weights.hdf5")
    return folder


def test_default_model_and_resolve(tmp_path, monkeypatch):
    monkeypatch.setattr(default_model, "DEFAULT_MODEL_DIR", tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="default biLM is missing.*train-bilm"):
        resolve_bilm("default")
    folder = _tiny_model_folder(tmp_path / "default")
    monkeypatch.setattr(default_model, "DEFAULT_MODEL_DIR", folder)
    bilm = resolve_bilm("default")
    assert bilm.output_dim == 8 and not bilm.training
    assert resolve_bilm("default", stateful=True).stateful
    assert resolve_bilm(str(folder)).output_dim == 8
    assert resolve_bilm({"options": folder / "options.json", "weights": folder / "weights.hdf5"}).output_dim == 8
    assert resolve_bilm(bilm) is bilm
    with pytest.raises(ValueError, match="unknown: weight; missing: weights"):
        resolve_bilm({"options": "o", "weight": "w"})
    with pytest.raises(ValueError, match="an embedded model \\(default\\), a preset \\(small, medium"):
        resolve_bilm("bert")
    with pytest.raises(FileNotFoundError, match="must hold options.json"):
        resolve_bilm(str(tmp_path))


def test_resolve_preset_fetches_then_loads(tmp_path, monkeypatch):
    folder = _tiny_model_folder(tmp_path / "m")
    seen = []

    def fake_fetch(name, cache_dir=None, **kw):
        seen.append((name, cache_dir))
        return folder / "options.json", folder / "weights.hdf5"

    monkeypatch.setattr(download, "fetch_preset", fake_fetch)
    assert resolve_bilm("medium", cache_dir=tmp_path / "c").output_dim == 8
    assert seen == [("medium", tmp_path / "c")]

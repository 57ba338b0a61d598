"""Hostile cases, round three, the short pass on the newest fixes: predict --out judged against the files a run read
(where it ran, not where predict runs), saved runs with a fixed penalised mix, the biLM fingerprint under a
sum-preserving edit, gloss caches from before checksums, damaged exports and an export path taken by a file."""
from __future__ import annotations

import os
from pathlib import Path

import yaml

from elmo_tasks.cli import main

from test_reliability_outputs_r3 import senses  # noqa: F401  (a module fixture: a tiny sense file)
from test_reliability_training import finished_bilm_run
from test_tasks_helpers import one_line_error, static_config_file

FAST = ["--cache-dir", "none", "--progress", "off"]


def _relative_run(tmp_path: Path, monkeypatch) -> dict:
    """A finished run R whose config names its data by paths relative to tmp_path (the folder it ran in)."""
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    raw = yaml.safe_load(Path(cfg).read_text())
    for k in ("train", "dev", "test"):
        raw["data"][k] = os.path.relpath(raw["data"][k], tmp_path)
    Path(cfg).write_text(yaml.safe_dump(raw))
    assert main(["run", cfg, "--out", "R", *FAST]) == 0
    (tmp_path / "in.txt").write_text("John lives in Paris\n")
    (tmp_path / "sub").mkdir()
    return raw["data"]


def test_predict_from_another_folder_never_writes_onto_the_runs_data_named_relatively(tmp_path, capsys, monkeypatch):
    data = _relative_run(tmp_path, monkeypatch)
    test_file = tmp_path / data["test"]
    before = test_file.read_bytes()
    monkeypatch.chdir(tmp_path / "sub")
    capsys.readouterr()
    assert main(["predict", "../R", "../in.txt", "--out", str(test_file)]) == 2
    one_line_error(capsys, "--out", "would destroy the input")
    os.symlink(test_file, tmp_path / "sub" / "lnk")
    assert main(["predict", "../R", "../in.txt", "--out", "lnk"]) == 2
    one_line_error(capsys, "would destroy the input")
    assert test_file.read_bytes() == before


def test_predict_from_another_folder_writes_a_file_that_only_shares_the_runs_relative_data_name(tmp_path, capsys,
                                                                                                 monkeypatch):
    data = _relative_run(tmp_path, monkeypatch)
    mine = tmp_path / "sub" / data["test"]
    mine.parent.mkdir(parents=True, exist_ok=True)
    mine.write_text("my own file\n")
    monkeypatch.chdir(tmp_path / "sub")
    assert main(["predict", "../R", "../in.txt", "--out", data["test"], "--force"]) == 0  # (the user's: --force)
    assert "Paris" in mine.read_text()
    assert (tmp_path / data["test"]).read_text() != mine.read_text()


def test_a_run_saved_with_a_penalised_fixed_mix_still_predicts_with_a_warning(tmp_path, capsys, monkeypatch):
    import elmo_tasks.features.mix as mix
    from test_tasks_helpers import elmo_section

    env, cfg = static_config_file(tmp_path)
    raw = yaml.safe_load(Path(cfg).read_text())
    raw["features"] = elmo_section(env, mix={"name": "scalar", "trainable": False, "l2_coef": 0.001})
    Path(cfg).write_text(yaml.safe_dump(raw))
    assert main(["run", cfg, "--out", str(tmp_path / "new"), *FAST]) == 2  # a new run is refused
    one_line_error(capsys, "l2_coef: 0.001 penalises the mix weights, but trainable is false")
    with monkeypatch.context() as m:  # a run made before the rule existed
        m.setattr(mix, "settings_rule", lambda message: None)
        assert main(["run", cfg, "--out", str(tmp_path / "R"), *FAST]) == 0
    (tmp_path / "in.txt").write_text("John lives in Paris\n")
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "R"), str(tmp_path / "in.txt"), "--progress", "off"]) == 0
    captured = capsys.readouterr()
    assert "Paris" in captured.out
    assert "warning:" in captured.err and "l2_coef: 0.001 penalises" in captured.err


def test_the_fingerprint_changes_when_rows_are_swapped_through_data():
    import torch

    from elmo_features import BiLM, BiLMOptions
    from elmo_features.embedding.feature_cache import bilm_fingerprint
    from test_tasks_helpers import TINY_OPTIONS

    torch.manual_seed(0)
    bilm = BiLM(BiLMOptions.from_dict(TINY_OPTIONS))
    first = bilm_fingerprint(bilm)
    w = bilm.char_cnn.char_embedding.weight
    w.data[[1, 2]] = w.data[[2, 1]]  # the same values, moved: the sum and the version counter stay
    swapped = bilm_fingerprint(bilm)
    assert swapped != first
    fresh = BiLM(BiLMOptions.from_dict(TINY_OPTIONS))
    fresh.load_state_dict(bilm.state_dict())
    assert bilm_fingerprint(fresh) == swapped  # what a freshly loaded biLM with those weights gets


def test_a_gloss_cache_from_before_checksums_is_kept_and_a_verified_one_is_not_read_again(tmp_path, capsys,
                                                                                          monkeypatch):
    import json

    import numpy as np

    from elmo_tasks.wsd import gloss_cache, senses
    from elmo_tasks.wsd.data.wordnet import WordNet
    from elmo_tasks.wsd.senses import Graph
    from test_wsd_senses import _Glosses, write_wordnet

    graph = Graph(WordNet(write_wordnet(tmp_path / "wn")))
    whole = senses.gloss_layers(graph, _Glosses(), "fp", tmp_path, progress=False)
    store = gloss_cache.GlossStore(tmp_path, "fp", senses.POOLINGS, len(graph.keys), senses.GLOSS_CHUNK)
    progress = store.folder / gloss_cache.PROGRESS
    old = json.loads(progress.read_text())
    for k in ("crc32", "verified"):
        del old[k]  # as every cache finished before checksums were recorded
    progress.write_text(json.dumps(old))
    capsys.readouterr()
    source = _Glosses()
    kept = senses.gloss_layers(graph, source, "fp", tmp_path, progress=False)
    assert source.calls == 0 and "written before checksums were recorded" in capsys.readouterr().err
    np.testing.assert_array_equal(kept["lemma"], whole["lemma"])
    assert "crc32" in json.loads(progress.read_text())
    reads = []
    monkeypatch.setattr(gloss_cache.GlossStore, "_checksums", lambda self: reads.append(1) or {})
    senses.gloss_layers(graph, _Glosses(), "fp", tmp_path, progress=False)
    assert reads == []  # unchanged since verified: not read in full again


def test_resume_rewrites_an_export_whose_vocab_or_weights_are_not_the_models(tmp_path, capsys):
    import h5py

    args = finished_bilm_run(tmp_path)
    export = tmp_path / "run" / "export"
    vocab = (export / "vocab.txt").read_bytes()
    (export / "vocab.txt").write_bytes(b"")  # emptied
    capsys.readouterr()
    assert main(args + ["--resume"]) == 0
    assert "vocab.txt is not the trained model's vocabulary; written again" in capsys.readouterr().err
    assert (export / "vocab.txt").read_bytes() == vocab
    with h5py.File(export / "weights.hdf5", "a") as f:  # a group deleted: the file still opens
        del f[next(n for n in f if n != "softmax")]
    assert main(args + ["--resume"]) == 0
    assert "weights.hdf5 does not hold the trained model's weights" in capsys.readouterr().err
    assert main(["eval-bilm", "--options", str(export / "options.json"), "--weights", str(export / "weights.hdf5"),
                 "--vocab", str(export / "vocab.txt"), str(tmp_path / "held.txt")]) == 0
    assert main(args + ["--resume"]) == 0
    assert "written again" not in capsys.readouterr().err  # whole: left as it is


def test_an_export_path_taken_by_a_file_is_one_clear_error(tmp_path, capsys):
    import shutil

    args = finished_bilm_run(tmp_path)
    export = tmp_path / "run" / "export"
    shutil.rmtree(export)
    export.write_text("my notes\n")
    capsys.readouterr()
    assert main(args + ["--resume"]) == 2
    one_line_error(capsys, "a file is in the way of the export folder")
    assert export.read_text() == "my notes\n"


def test_predict_in_a_moved_project_never_writes_onto_the_runs_data(tmp_path, capsys, monkeypatch):
    import json
    import shutil

    project = tmp_path / "proj"
    project.mkdir()
    data = _relative_run(project, monkeypatch)
    moved = tmp_path / "proj2"
    shutil.move(project, moved)
    monkeypatch.chdir(moved)
    before = {k: (moved / data[k]).read_bytes() for k in ("train", "test")}
    capsys.readouterr()
    for k in ("train", "test"):
        assert main(["predict", "R", "in.txt", "--out", data[k]]) == 2
        one_line_error(capsys, "would destroy the input")
    record = json.loads((moved / "R" / "metrics.json").read_text())
    del record["data_files"]  # as a run recorded before it stored paths from the run folder
    (moved / "R" / "metrics.json").write_text(json.dumps(record))
    assert main(["predict", "R", "in.txt", "--out", data["test"]]) == 2  # the config's path, where it ran is gone
    one_line_error(capsys, "would destroy the input")
    assert {k: (moved / data[k]).read_bytes() for k in ("train", "test")} == before


def test_the_fingerprint_follows_the_stateful_flag_set_after_a_cached_embed():
    import torch

    from elmo_features import BiLM, BiLMOptions
    from elmo_features.embedding.feature_cache import bilm_fingerprint
    from test_tasks_helpers import TINY_OPTIONS

    torch.manual_seed(0)
    bilm = BiLM(BiLMOptions.from_dict(TINY_OPTIONS))
    first = bilm_fingerprint(bilm)
    bilm.stateful = True  # the memo must not answer for the stateless biLM
    stateful = bilm_fingerprint(bilm)
    assert stateful != first
    assert bilm_fingerprint(BiLM(BiLMOptions.from_dict(TINY_OPTIONS), stateful=True)) != first


def test_recorded_commands_are_the_commands_typed(tmp_path, capsys, monkeypatch):
    import json
    import shlex

    from elmo_features.util.cli_types import rebuild_command

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", "R", *FAST]) == 0
    command = json.loads((tmp_path / "R" / "metrics.json").read_text())["command"]
    assert "interrupt" not in command
    assert shlex.split(command)[1:] == ["run", cfg, "--out", "R", "--cache-dir", "none", "--progress", "off"]
    import argparse
    args = argparse.Namespace(command="x", out="o", interrupt_hint="the run was interrupted", debug=True)
    assert rebuild_command(["elmo-tasks", "x"], args, {}, skip=("command",)) == "elmo-tasks x --out o"


def test_a_stray_i_tag_in_a_bio_file_is_the_tag_named(tmp_path):
    import pytest

    from elmo_tasks.data.tag_schemes import TagSchemeError, convert_data, detect_scheme

    bio = [["B-PER", "O"], ["O", "I-PER", "O"], ["B-LOC"], ["O", "B-LOC", "I-LOC"]]
    assert detect_scheme(bio) == "BIO"  # most chunks start with B-: one stray I- does not make it IOB1
    with pytest.raises(TagSchemeError) as e:
        convert_data(bio, "auto", "BIOES")
    assert (e.value.sentence, e.value.index, e.value.scheme) == (1, 1, "BIO") and "'I-PER'" in str(e.value)
    assert detect_scheme([["I-PER", "I-PER", "B-PER", "O"], ["I-LOC"]]) == "IOB1"


def test_a_token_in_decomposed_unicode_finds_its_vector():
    import unicodedata

    import numpy as np

    from elmo_tasks.data.static_vectors import StaticVectors

    v = StaticVectors(["josé", "paris"], np.eye(2, dtype=np.float32), lowercase=False)
    nfd = unicodedata.normalize("NFD", "José")
    assert nfd != "José"
    vectors, oov = v.lookup([nfd, "Paris", "nowhere"])
    np.testing.assert_array_equal(vectors[0], [1.0, 0.0])
    assert oov == 1


def test_resume_with_another_runs_dir_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path, compare={"sources": {"g": {"name": "static", "path": "x"}}})
    args = ["compare", cfg, "--set", f"compare.sources={{g: {{name: static, path: {env['glove']}}}}}",
            "--results-dir", "RES", *FAST, "--seeds", "1"]
    assert main(args + ["--runs-dir", "RR"]) == 0
    grid = next((tmp_path / "RR").glob("*/compare-*"))
    capsys.readouterr()
    assert main(args + ["--runs-dir", "OTHER", "--resume", str(grid)]) == 2
    one_line_error(capsys, "--runs-dir OTHER: --resume continues in", "drop --runs-dir")
    assert not (tmp_path / "OTHER").exists()
    assert main(args + ["--runs-dir", "RR", "--resume", str(grid)]) == 0  # the folder that holds it: fine
    assert main(args + ["--resume", str(grid)]) == 0  # --runs-dir left at its default ("runs"): not a request
    assert not (tmp_path / "runs").exists()


def test_a_comparison_saved_with_a_penalised_fixed_mix_resumes_with_a_warning(tmp_path, capsys, monkeypatch):
    import elmo_tasks.features.mix as mix
    from test_tasks_helpers import elmo_section

    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    raw = yaml.safe_load(Path(cfg).read_text())
    raw["compare"] = {"sources": {"e": elmo_section(env, mix={"name": "scalar", "trainable": False, "l2_coef": 0.001})}}
    Path(cfg).write_text(yaml.safe_dump(raw))
    args = ["compare", cfg, "--runs-dir", "RR", "--results-dir", "RES", *FAST]
    with monkeypatch.context() as m:  # a comparison made before the rule existed
        m.setattr(mix, "settings_rule", lambda message: None)
        assert main(args + ["--seeds", "1"]) == 0
    grid = next((tmp_path / "RR").glob("*/compare-*"))
    capsys.readouterr()
    assert main(args + ["--seeds", "1,2", "--resume", str(grid)]) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "l2_coef: 0.001 penalises" in err
    assert main(args + ["--seeds", "1"]) == 2  # a new comparison with it is still refused
    one_line_error(capsys, "l2_coef: 0.001 penalises the mix weights")


def test_pool_workers_end_when_their_parent_is_killed(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "pool.py"
    script.write_text(
        "import os, sys, time\n"
        "from elmo_tasks.experiment.parallel import run_jobs\n"
        "def job(i):\n"
        "    open(os.path.join(sys.argv[1], f'w{os.getpid()}'), 'w').close()\n"
        "    time.sleep(60)\n"
        "if __name__ == '__main__':\n"
        "    run_jobs(job, [(i,) for i in range(6)], jobs=2, threads=1)\n")
    env = {**os.environ, "PYTHONPATH": f"{Path(__file__).resolve().parents[1]}:{tmp_path}"}
    parent = subprocess.Popen([sys.executable, str(script), str(tmp_path)], env=env)
    try:
        deadline = time.time() + 60
        while len(list(tmp_path.glob("w*"))) < 2 and time.time() < deadline:
            time.sleep(0.2)
        workers = [int(p.name[1:]) for p in tmp_path.glob("w*")]
        assert len(workers) == 2
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.time() + 15
        alive = workers
        while alive and time.time() < deadline:
            time.sleep(0.2)
            alive = [w for w in workers if Path(f"/proc/{w}").exists()
                     and Path(f"/proc/{w}/stat").read_text().split()[2] != "Z"]
        assert alive == []  # (were: running their queued jobs, then idle, for good)
    finally:
        for w in [int(p.name[1:]) for p in tmp_path.glob("w*")]:
            try:
                os.kill(w, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_an_export_that_is_a_link_is_never_written_through(tmp_path, capsys):
    import shutil

    args = finished_bilm_run(tmp_path)
    export = tmp_path / "run" / "export"
    other = tmp_path / "other_export"
    shutil.copytree(export, other)
    (other / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nanother\n")  # another run's export
    before = {p.name: p.read_bytes() for p in other.iterdir()}
    shutil.rmtree(export)
    os.symlink(other, export)
    capsys.readouterr()
    assert main(args + ["--resume"]) == 2
    one_line_error(capsys, "is a link", "remove the link")
    os.unlink(export)
    shutil.copytree(other, export)
    mine = tmp_path / "my_words.txt"
    mine.write_text("my own list\n")
    (export / "vocab.txt").unlink()
    os.symlink(mine, export / "vocab.txt")
    assert main(args + ["--resume"]) == 2
    one_line_error(capsys, "vocab.txt: is a link")
    assert mine.read_text() == "my own list\n"
    assert {p.name: p.read_bytes() for p in other.iterdir()} == before


def test_predict_never_writes_onto_the_files_a_fold_run_was_cut_from(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path, compare={"sources": {"g": {"name": "static", "path": "x"}}})
    raw = yaml.safe_load(Path(cfg).read_text())
    for k in ("train", "dev", "test"):
        raw["data"][k] = os.path.relpath(raw["data"][k], tmp_path)
    raw["compare"]["sources"]["g"]["path"] = str(env["glove"])
    Path(cfg).write_text(yaml.safe_dump(raw))
    assert main(["compare", cfg, "--folds", "3", "--seeds", "1", "--runs-dir", "RR", "--results-dir", "RES", *FAST]) == 0
    fold = next((tmp_path / "RR").glob("*/compare-*/g-seed1/fold0"))
    (tmp_path / "in.txt").write_text("John lives in Paris\n")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    before = (tmp_path / raw["data"]["train"]).read_bytes()
    capsys.readouterr()
    assert main(["predict", str(fold), "../in.txt", "--out", "../" + raw["data"]["train"]]) == 2
    one_line_error(capsys, "would destroy the input")
    assert (tmp_path / raw["data"]["train"]).read_bytes() == before


def test_run_with_out_refuses_a_runs_dir_it_would_ignore(tmp_path, capsys):
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", str(tmp_path / "R"), "--runs-dir", str(tmp_path / "RR"), *FAST]) == 2
    one_line_error(capsys, "--runs-dir", "does not apply with --out")


def test_a_stray_s_tag_in_a_bio_file_is_the_tag_named():
    import pytest

    from elmo_tasks.data.tag_schemes import TagSchemeError, convert_data, detect_scheme

    bio = [["B-PER", "I-PER", "O"], ["O", "S-LOC", "O"], ["B-LOC"], ["O", "B-ORG", "I-ORG"]]
    assert detect_scheme(bio) == "BIO"
    with pytest.raises(TagSchemeError) as e:
        convert_data(bio, "auto", "BIOES")
    assert (e.value.sentence, e.value.index) == (1, 1) and "S-LOC" in str(e.value)
    assert detect_scheme([["B-PER", "E-PER", "O"], ["S-LOC"], ["B-ORG", "I-ORG", "E-ORG"]]) == "BIOES"


def test_a_value_that_starts_with_a_dash_is_recorded_so_it_reads_back():
    import argparse
    import shlex

    from elmo_features.util.cli_types import rebuild_command

    command = rebuild_command(["elmo-tasks", "run", "c.yaml"], argparse.Namespace(out="-R", command="run"), {},
                              skip=("command",))
    assert shlex.split(command)[3:] == ["--out=-R"]
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    assert parser.parse_args(shlex.split(command)[3:]).out == "-R"


def test_static_vectors_check_their_arguments_and_find_decomposed_words(tmp_path):
    import unicodedata

    import numpy as np
    import pytest

    from elmo_tasks.data.static_vectors import StaticVectors, load_static_vectors

    path = tmp_path / "v.txt"
    path.write_text(f"Paris 1 1\nparis 2 2\n{unicodedata.normalize('NFD', 'josé')} 3 3\n", encoding="utf-8")
    with pytest.raises(TypeError, match="lowercase must be True, False or None"):
        load_static_vectors(path, lowercase="no", progress=False)
    with pytest.raises(TypeError, match="max_vectors must be an integer"):
        load_static_vectors(path, max_vectors=2.5, progress=False)
    v = load_static_vectors(path, lowercase=False, progress=False)
    with pytest.raises(TypeError, match="tokens is a str"):
        v.lookup("paris")
    with pytest.raises(TypeError, match="has a token of type NoneType"):
        v.lookup([None])
    with pytest.raises(TypeError):
        v.coverage("john lives")
    vectors, oov = v.lookup(["paris", "josé"])  # the file's word is decomposed, the token composed
    np.testing.assert_array_equal(vectors, [[2, 2], [3, 3]])
    assert oov == 0 and isinstance(v, StaticVectors)


def test_an_options_file_with_a_byte_order_mark_loads(tmp_path):
    from elmo_features import BiLMOptions
    from test_tasks_helpers import TINY_OPTIONS

    import json
    path = tmp_path / "options.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(TINY_OPTIONS).encode())
    assert BiLMOptions.from_file(path).to_dict() == BiLMOptions.from_dict(TINY_OPTIONS).to_dict()


def test_include_given_a_file_name_says_to_give_the_module_name(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "myfeat.py").write_text("X = 1\n")
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--include", "myfeat.py", "--out", "R", *FAST]) == 2
    one_line_error(capsys, "--include myfeat.py: give the module name, 'myfeat'")


def test_lr_reduction_without_a_dev_set_is_warned_about(tmp_path, capsys):
    env, cfg = static_config_file(tmp_path, data={"dev": None}, training={"lr_reduce_factor": 0.5})
    assert main(["run", cfg, "--out", str(tmp_path / "R"), *FAST]) == 0
    assert "lr_reduce_factor 0.5 lowers the rate when the dev score stops improving" in capsys.readouterr().err


def test_the_tables_suggested_command_runs_the_papers_bilm_whatever_sources_ran():
    import shlex

    from elmo_tasks.wsd.table import original_command

    cmd = original_command("elmo-tasks wsd --config wsd_senses --features mpnet minilm --out runs/w --threads 2")
    args = shlex.split(cmd)
    assert "mpnet" not in args and "minilm" not in args and "runs/w" not in args
    assert args[-6:] == ["--features", "elmo", "--bilm", "original", "--out", "results/wsd_original"]
    assert "--threads" in args


def test_resume_with_another_fold_cut_is_refused_and_a_lost_data_record_warned_about(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path, compare={"sources": {"g": {"name": "static", "path": "x"}}})
    args = ["compare", cfg, "--set", f"compare.sources={{g: {{name: static, path: {env['glove']}}}}}",
            "--runs-dir", "RR", "--results-dir", "RES", *FAST, "--seeds", "1"]
    assert main(args + ["--folds", "3"]) == 0
    grid = next((tmp_path / "RR").glob("*/compare-*"))
    capsys.readouterr()
    for extra in (["--folds", "4"], ["--folds", "3", "--set", "compare.fold_seed=5"]):
        assert main(args + extra + ["--resume", str(grid), "--results-dir", "RES2"]) == 2
        one_line_error(capsys, "its runs were made on 3 folds (fold_seed 0)", "their folds would not match")
    (grid / ".data_sha256.json").unlink()  # lost: its fold runs' cut cannot be vouched for
    assert main(args + ["--folds", "3", "--resume", str(grid)]) == 2
    one_line_error(capsys, "is missing, damaged or from an older version", "cannot be reused for 3 folds")


def test_recorded_positionals_and_list_items_that_start_with_a_dash_read_back(tmp_path, monkeypatch):
    import argparse
    import shlex

    from elmo_features.util.cli_types import rebuild_command

    monkeypatch.chdir(tmp_path)
    (tmp_path / "-c.yaml").write_text("x\n")
    (tmp_path / "-T").mkdir()
    args = argparse.Namespace(command="wsd", test=["-T", "t2"], overrides=["-x=1"])
    command = rebuild_command(["elmo-tasks", "run", "-c.yaml", "-"], args, {}, skip=("command",),
                              repeated={"overrides": "--set"})
    assert shlex.split(command) == ["elmo-tasks", "run", "./-c.yaml", "-", "--test", "./-T", "t2", "--set=-x=1"]


def test_a_runs_dir_typed_as_its_default_is_still_a_request(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env, cfg = static_config_file(tmp_path)
    assert main(["run", cfg, "--out", "R", "--runs-dir", "runs", *FAST]) == 2
    one_line_error(capsys, "--runs-dir runs: does not apply with --out R")


def test_inert_training_settings_are_warned_about(tmp_path, capsys):
    env, cfg = static_config_file(tmp_path, data={"dev": None}, training={"patience": 5, "lr_reduce_patience": 2})
    assert main(["run", cfg, "--out", str(tmp_path / "R"), *FAST]) == 0
    err = capsys.readouterr().err
    assert "training.patience 5 counts epochs without dev improvement, and this run has no dev set" in err
    assert "training.lr_reduce_patience 2 waits before a reduction, and lr_reduce_factor is 1" in err


def test_a_text_file_given_as_the_wordnet_index_is_named(tmp_path):
    import pytest

    from elmo_tasks.wsd.data.inventory import InventoryError, find_index_sense

    (tmp_path / "in.txt").write_text("I sat on the bank of the river\n")
    with pytest.raises(InventoryError, match="in.txt: not a WordNet index.sense"):
        find_index_sense(tmp_path / "in.txt")
    (tmp_path / "my.sense").write_text("bank%1:14:00:: 08420278 1 20\n")
    assert find_index_sense(tmp_path / "my.sense") == tmp_path / "my.sense"


def test_include_of_an_importable_module_named_like_a_file_imports_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "py.py").write_text("LOADED = True\n")
    (tmp_path / "myfeat.py").write_text("X = 1\n")
    import pytest

    from elmo_features.util.errors import ElmoTasksError
    from elmo_tasks import plugins
    from elmo_tasks.plugins import load_plugins

    monkeypatch.setattr(plugins, "_INCLUDED", list(plugins._INCLUDED))  # (no later test's workers load it)
    monkeypatch.syspath_prepend(str(tmp_path))
    import sys
    for name in ("myfeat", "mypkg", "mypkg.py"):  # (an earlier test's modules of these names, from its own folder)
        monkeypatch.delitem(sys.modules, name, raising=False)
    load_plugins(["mypkg.py"])  # a package's submodule called py: a module name, imported
    import sys
    assert sys.modules["mypkg.py"].LOADED
    with pytest.raises(ElmoTasksError, match="give the module name, 'myfeat'"):
        load_plugins(["myfeat.py"])


def test_a_sense_file_whose_keys_were_reordered_is_refused(tmp_path, capsys, senses):
    import h5py

    path = tmp_path / "s.h5"
    path.write_bytes((senses / "senses.h5").read_bytes())
    with h5py.File(path, "a") as f:
        keys = list(f["keys"][()])
        del f["keys"]
        f.create_dataset("keys", data=keys[::-1], dtype=h5py.string_dtype("utf-8"))  # the same keys, reversed
    (tmp_path / "in.txt").write_text("the bank of the river\n")
    assert main(["wsd", "tag", str(tmp_path / "in.txt"), "--senses", str(path)]) == 2
    one_line_error(capsys, "do not match the checksum written with them")

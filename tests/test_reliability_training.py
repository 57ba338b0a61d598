"""train-bilm: the keyed corpus cache, one writer per out_dir, damaged checkpoints, the resume command."""
from __future__ import annotations

import json
import os
import shlex

import pytest
import torch
import yaml

from elmo_features.util.errors import CheckpointError, LockError, StaleCacheError
from elmo_features.util.locking import OutputLock
from elmo_features.training.config import TrainConfig
from elmo_features.training.trainer import Trainer
from elmo_tasks.cli import main

SMALL = dict(char_embedding_dim=4, filters=[[1, 4], [2, 8]], n_highway=1, lstm_dim=8, projection_dim=4,
             vocab_size=20, n_negative_samples=4, batch_tokens=200, max_train_tokens=400, eval_every_tokens=10_000,
             warmup_steps=2, threads=1)


def _text(path, words, n=40):
    path.write_text("".join(" ".join(words[(i + k) % len(words)] for k in range(6)) + "\n" for i in range(n)))
    return path


def finished_bilm_run(tmp_path) -> list[str]:
    """A finished ``train-bilm`` run in tmp_path/run (SMALL, with held-out evaluations); -> its command line."""
    from elmo_tasks.cli import main

    corpus = _text(tmp_path / "a.txt", "the cat sat on a mat".split())
    (tmp_path / "held.txt").write_text("the cat sat\n")
    config = tmp_path / "bilm.yaml"
    config.write_text(yaml.safe_dump({**SMALL, "train_files": [str(corpus)], "heldout_file": str(tmp_path / "held.txt"),
                                      "out_dir": str(tmp_path / "run")}))
    args = ["train-bilm", "--config", str(config), "--progress", "off"]
    assert main(args) == 0
    return args


@pytest.fixture
def files(tmp_path):
    torch.set_num_threads(1)
    return {"a": _text(tmp_path / "a.txt", "the cat sat on a mat".split()),
            "b": _text(tmp_path / "b.txt", "dogs run fast in big parks".split()), "out": tmp_path / "run"}


def _cfg(files, corpus="a", **kw) -> TrainConfig:
    return TrainConfig.from_dict({**SMALL, "train_files": [str(files[corpus])], "out_dir": str(files["out"]), **kw})


def _prepare(cfg):
    """What a run killed before its first checkpoint leaves behind: the corpus cache, no checkpoint."""
    Trainer(cfg, progress=False).close()


def test_rerun_with_other_train_files_is_refused(files):
    _prepare(_cfg(files, "a"))
    assert (files["out"] / "prep.json").exists() and not (files["out"] / "checkpoint.pt").exists()
    with pytest.raises(StaleCacheError, match=r"prep.npz was built from other training data \(train_files .*a.txt"
                                              r".*b.txt.*choose another out_dir, or delete prep.npz"):
        Trainer(_cfg(files, "b"), progress=False)
    with pytest.raises(StaleCacheError, match="max_sentence_length 100 -> 7"):
        Trainer(_cfg(files, "a", max_sentence_length=7), progress=False)
    with pytest.raises(StaleCacheError, match="built with vocab_size 20, the config says 30"):
        Trainer(_cfg(files, "a", vocab_size=30), progress=False)


def test_changed_content_is_refused_touch_is_not(files):
    cfg = _cfg(files, "a")
    _prepare(cfg)
    st = files["a"].stat()
    os.utime(files["a"], ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched: same bytes
    Trainer(cfg, progress=False).close()
    data = files["a"].read_bytes()
    files["a"].write_bytes(data.replace(b"cat", b"cow"))  # same size, new content
    with pytest.raises(StaleCacheError, match="a.txt changed \\(new content\\)"):
        Trainer(cfg, progress=False)
    files["a"].write_bytes(data + b"more words\n")
    with pytest.raises(StaleCacheError, match="a.txt changed \\(size"):
        Trainer(cfg, progress=False)


def test_out_dir_of_an_older_version_is_adopted_or_refused(files):
    cfg = _cfg(files, "a")
    tr = Trainer(cfg, progress=False)
    tr._stop = True
    tr.run()  # a checkpoint to resume
    (files["out"] / "prep.json").unlink()  # as written before the key existed
    with pytest.raises(StaleCacheError, match="built from other training data"):
        Trainer(_cfg(files, "b"), resume=True, progress=False)  # config.yaml names a.txt
    Trainer(cfg, resume=True, progress=False).close()  # same data: adopted, key recorded
    assert json.loads((files["out"] / "prep.json").read_text())["vocab_size"] == 20


def test_keyless_cache_without_a_checkpoint_is_prepared_again(files, capsys):
    """Nothing records what a keyless prep.npz holds: a fresh start prepares the corpus again (a touched or an
    edited file, even one whose mtime was put back, then cannot matter)."""
    _prepare(_cfg(files, "a"))
    (files["out"] / "prep.json").unlink()
    data = files["a"].read_bytes()
    st = files["a"].stat()
    files["a"].write_bytes(data.replace(b"cat", b"cow"))  # same size, old mtime put back
    os.utime(files["a"], ns=(st.st_atime_ns, st.st_mtime_ns))
    capsys.readouterr()
    tr = Trainer(_cfg(files, "a"), progress=False)
    tr.close()
    assert "has no key (prep.json), so nothing says what it holds; preparing the corpus again" in capsys.readouterr().err
    assert "cow" in tr.corpus.types and "cat" not in tr.corpus.types
    assert json.loads((files["out"] / "prep.json").read_text())["files"][0]["size"] == len(data)


def test_one_trainer_per_out_dir(files):
    cfg = _cfg(files, "a")
    first = Trainer(cfg, progress=False)
    with pytest.raises(LockError, match=f"training run in {files['out']} is being written by another process "
                                        f"\\(PID {os.getpid()}"):
        Trainer(cfg, progress=False)
    first.close()
    Trainer(cfg, progress=False).close()


def test_damaged_checkpoint_and_changed_architecture_on_resume(files):
    cfg = _cfg(files, "a")
    tr = Trainer(cfg, progress=False)
    tr._stop = True
    tr.run()
    with pytest.raises(CheckpointError, match="the config changed since this run started \\(lstm_dim 8 -> 16\\)"):
        Trainer(_cfg(files, "a", lstm_dim=16), resume=True, progress=False)
    ckpt = files["out"] / "checkpoint.pt"
    ckpt.write_bytes(ckpt.read_bytes()[:500])
    with pytest.raises(CheckpointError, match="checkpoint.pt: not a readable checkpoint"):
        Trainer(cfg, resume=True, progress=False)
    with OutputLock(files["out"] / "train.lock", "x"):
        pass  # every failed Trainer released the out_dir lock


def test_stopped_run_prints_the_full_resume_command(files, tmp_path, monkeypatch, capsys):
    config = tmp_path / "bilm.yaml"
    config.write_text(yaml.safe_dump({**SMALL, "train_files": [str(files["a"])], "out_dir": str(files["out"])}))
    original = Trainer.train_step

    def stop_after_2(self, idx):
        out = original(self, idx)
        self._stop = self.state["step"] >= 1
        return out

    monkeypatch.setattr(Trainer, "train_step", stop_after_2)
    sets = ["lr=0.01", "seed=3"]
    assert main(["train-bilm", "--config", str(config), "--set", sets[0], "--set", sets[1], "--progress", "off"]) == 0
    out = capsys.readouterr().out
    hint = out.split("stopped; continue with: ")[1].strip()
    assert hint == shlex.join(["elmo-tasks", "train-bilm", "--config", str(config), "--resume", "--set", sets[0],
                               "--set", sets[1], "--progress", "off"])
    # without --resume the refusal names the same command
    assert main(["train-bilm", "--config", str(config), "--set", sets[0], "--set", sets[1], "--no-progress"]) == 2
    assert f"to continue it: {hint}" in capsys.readouterr().err
    # a config that changes what a run cannot change is not sent to --resume (which would refuse it)
    assert main(["train-bilm", "--config", str(config), "--set", "lstm_dim=16", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "to continue it" not in err and "lstm_dim" in err and "choose another out_dir" in err
    monkeypatch.setattr(Trainer, "train_step", original)
    assert main(shlex.split(hint)[1:]) == 0  # the printed command resumes and finishes the run
    assert json.loads(capsys.readouterr().out.splitlines()[0])["finished"]
    saved = yaml.safe_load((files["out"] / "config.yaml").read_text())
    assert saved["lr"] == 0.01 and saved["seed"] == 3


def test_a_duplicate_vocabulary_word_is_named_with_its_lines(tmp_path):
    from elmo_features.training.data import read_vocab

    path = tmp_path / "vocab.txt"
    path.write_text("<S>\n</S>\n<UNK>\nthe\ncat\nthe\n")
    with pytest.raises(CheckpointError, match="vocab.txt:6: the word 'the' is listed twice \\(first on line 4\\)"):
        read_vocab(path)

"""A run's folder as the run writes it: config.yaml and vocab.json first, model.pt, then predictions.json and
metrics.json (written last: a folder without it is an unfinished run); and the JSON writer of run records."""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elmo_features.util.errors import PathError
from elmo_features.util.once import first_time
from elmo_features.util.provenance import write_text_atomic

from elmo_tasks.experiment.checkpoint import save_state
from elmo_tasks.experiment.config import RunConfig, dump_yaml
from elmo_tasks.experiment.preflight import UNFINISHED, config_digests

if TYPE_CHECKING:
    from elmo_tasks.experiment.training import TaskModel


def save_json(obj: Any, path: Path) -> None:
    write_text_atomic(path, json.dumps(obj, indent=1, ensure_ascii=False) + "\n")


@dataclass
class RunFolder:
    """What a run writes, by the process that writes it (the only one, or rank 0 of a torchrun launch): on the other
    ranks (``writes=False``) every method does nothing, so the run's code has no rank branches."""

    path: Path
    writes: bool = True
    config_sha256: dict | None = None
    identity: tuple[int, int] | None = None  # the folder's (device, inode) when the run began writing it

    def start(self, cfg: RunConfig, vocab: dict) -> None:
        self.config_sha256 = config_digests(cfg.to_dict())
        if self.writes:
            dump_yaml(cfg.to_dict(), self.path / "config.yaml")  # creates the folder
            save_json(vocab, self.path / "vocab.json")
            st = os.stat(self.path)
            self.identity = (st.st_dev, st.st_ino)

    def check_still_ours(self) -> None:
        """The folder the run began is still there, with its config.yaml: a folder removed or replaced while the run
        trained (``rm -rf``, a file put in its place) is said so, not written anew with half of a run's files."""
        try:
            st = os.stat(self.path)
            same = (st.st_dev, st.st_ino) == self.identity and (self.path / "config.yaml").is_file()
        except OSError:
            same = False
        if not same:
            raise PathError(f"the run folder {self.path} was removed or replaced while the run trained (by another "
                            "program or by hand); the trained model was not saved: rerun the run")

    def save_model(self, model: TaskModel) -> None:
        if self.writes:
            self.check_still_ours()
            save_state(model, self.path / "model.pt", self.config_sha256)

    def note(self, message: str) -> None:
        if self.writes and first_time(("run note", message)):  # (once per command: each run of a comparison says it)
            print(message, file=sys.stderr)

    def finish(self, predictions: dict, metrics: dict) -> None:
        if self.writes:
            self.check_still_ours()
            save_json(predictions, self.path / "predictions.json")
            save_json(metrics, self.path / "metrics.json")
            (self.path / UNFINISHED).unlink(missing_ok=True)

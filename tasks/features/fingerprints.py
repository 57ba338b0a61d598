"""Which frozen models (biLMs, Transformer encoders) a features section or a run's report uses, by fingerprint."""
from __future__ import annotations

from elmo_features import bilm_fingerprint

from ..components import component_config
from ..registry import FEATURES
from .base import Memo
from .elmo import load_frozen_bilm
from .transformer import build_embedder

REPORT_KEYS = ("bilm_fingerprint", "encoder_fingerprint")


def section_fingerprints(section: dict, memo: Memo) -> list[str]:
    """The fingerprints of the frozen models a resolved features section uses, in report order (a concat's parts
    in turn): what a run's ``report()`` records, without building the sources."""
    if section.get("name") in ("elmo", "transformer"):
        config = component_config(FEATURES, section)
        config.check("features")
        if section["name"] == "elmo":
            return [bilm_fingerprint(load_frozen_bilm(config, memo))]
        return [build_embedder(config, memo).fingerprint]
    return [fp for sub in section.get("sources") or [] for fp in section_fingerprints(sub, memo)]


def report_fingerprints(report: dict) -> list[str]:
    """The frozen models' fingerprints in a (possibly nested, concat) features report, in order."""
    own = [report[k] for k in REPORT_KEYS if report.get(k)]
    return own + [fp for sub in report.get("sources") or [] for fp in report_fingerprints(sub)]

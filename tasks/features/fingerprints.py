"""Which frozen models (biLMs, Transformer encoders, a plugin's own) a features section or a run's report uses,
by fingerprint. Each source class declares its own (``FeatureSource.frozen_fingerprints`` and the report key
``fingerprint_key``); nothing here knows a source by name."""
from __future__ import annotations


def is_fingerprint_key(key: str) -> bool:
    """Report keys that hold a frozen model's fingerprint (``bilm_fingerprint``, ``encoder_fingerprint``,
    ``model_fingerprint``, ...: a source's ``fingerprint_key``)."""
    return key.endswith("_fingerprint")


def report_fingerprints(report: dict) -> list[str]:
    """The frozen models' fingerprints in a (possibly nested, concat) features report, in order."""
    own: list[str] = []
    for k, v in report.items():
        if is_fingerprint_key(k) and v:
            own.extend([v] if isinstance(v, str) else list(v))
    return own + [fp for sub in report.get("sources") or [] for fp in report_fingerprints(sub)]

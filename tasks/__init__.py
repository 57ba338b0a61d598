"""elmo_tasks: pluggable heads (NER, sentiment, WSD) on frozen biLM / static features."""


def __getattr__(name: str):
    """``elmo_tasks.__version__``: the installed package's version (its metadata, as ``elmo_features.__version__``),
    looked up when asked for, so importing ``elmo_tasks`` stays light (the command installs its signal handlers
    before torch loads)."""
    if name == "__version__":
        from elmo_features.util.provenance import package_version

        return package_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Import hook: stand-in modules for AllenNLP's heavy optional imports (never called in the benchmark)."""
import importlib.abc
import importlib.machinery
import sys
import types

STUBBED = ("transformers", "spacy", "fairscale", "torchvision", "huggingface_hub")


class _Dummy:
    """A class that any stubbed attribute resolves to: it can be subclassed, called and indexed."""

    def __init__(self, *a, **k):
        pass

    def __class_getitem__(cls, item):
        return cls


def _make_module(name):
    mod = types.ModuleType(name)
    mod.__path__ = []  # a package, so submodules import too

    def __getattr__(attr, _name=name):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return type(attr, (_Dummy,), {"__module__": _name})

    mod.__getattr__ = __getattr__
    return mod


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _make_module(spec.name)

    def exec_module(self, module):
        pass


def install():
    sys.meta_path.insert(0, _Finder())

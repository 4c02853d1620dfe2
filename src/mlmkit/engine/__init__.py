"""The machinery the tasks share above the models: token-budget batching of jobs through the
masked-LM primitive, and the torchrun process group."""

import importlib

_MODULES = ("process_group",)


def __getattr__(name: str):
    """The module, imported on first use: it imports torch, and the CLI names them at its
    top (`mlmkit.engine.process_group.init(...)`) without starting torch for `--help`."""
    if name in _MODULES:
        return importlib.import_module(f"mlmkit.engine.{name}")
    raise AttributeError(f"module 'mlmkit.engine' has no attribute {name!r}")

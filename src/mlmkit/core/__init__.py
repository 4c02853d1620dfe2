"""The bottom floor every feature stands on: argument checks, devices and threads, progress,
reading records, writing outputs atomically, results, YAML values, the hub and the cache,
bootstrap statistics. Nothing here imports a model or a task; find the helper here before
writing another."""

import importlib

# The module that imports torch, reached by attribute on first use (`mlmkit.core.devices`), so
# that the CLI can name them at its top and still start without torch.
_LAZY = ("devices",)


def __getattr__(name: str):
    if name in _LAZY:
        return importlib.import_module(f"mlmkit.core.{name}")
    raise AttributeError(f"module 'mlmkit.core' has no attribute {name!r}")

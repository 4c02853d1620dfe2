"""Pretraining: the config, the run (`build_run` -> `Run`), the loop, checkpoints and
resume, logging and plots.

Imported lazily, so `mlmkit --help` (which reads the config's fields) needs no torch.
"""

from __future__ import annotations

import importlib

_PUBLIC = {
    "PretrainConfig": "mlmkit.pretraining.config",
    "load_config": "mlmkit.pretraining.config",
    "PretrainResult": "mlmkit.pretraining.loop",
    "pretrain": "mlmkit.pretraining.loop",
    "Run": "mlmkit.pretraining.run",
    "build_run": "mlmkit.pretraining.run",
}

__all__ = sorted(_PUBLIC)


# Modules the CLI reaches by attribute (`mlmkit.pretraining.recipes.load_recipe`), imported
# on first use like the names above.
_MODULES = ("budget", "recipes", "run_state")


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    if name in _MODULES:
        return importlib.import_module(f"mlmkit.pretraining.{name}")
    raise AttributeError(f"module 'mlmkit.pretraining' has no attribute {name!r}")

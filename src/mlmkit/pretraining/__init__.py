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


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'mlmkit.pretraining' has no attribute {name!r}")

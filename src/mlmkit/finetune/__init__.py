"""Fine-tuning: a classification head or a cloze prompt (PET / LM-BFF), few-shot over seeds,
LoRA adapters; the GLUE tasks with their official metrics, AG News, any table.

`mlmkit.finetune(model, task, ...)` is the entry point. The package shares its name with
the function, like `mlmkit.generate`: the package is callable and calls the function.
"""

from __future__ import annotations

import sys
import types

from mlmkit.finetune.api import FinetuneResult, finetune
from mlmkit.finetune.metrics import METRICS
from mlmkit.finetune.run import Recipe, RunResult
from mlmkit.finetune.tasks import TASKS, Task, get_task

__all__ = ["METRICS", "TASKS", "FinetuneResult", "Recipe", "RunResult", "Task", "finetune",
           "get_task"]


class _CallablePackage(types.ModuleType):
    """`mlmkit.finetune(...)` calls `finetune(...)` (the package and the function share the
    name, as `mlmkit.generate` does)."""

    def __call__(self, *args, **kwargs):
        return finetune(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage

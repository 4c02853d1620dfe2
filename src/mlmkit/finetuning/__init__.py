"""Fine-tuning: a classification head or a cloze prompt (PET / LM-BFF), few-shot over seeds,
LoRA adapters; the GLUE tasks with their official metrics, AG News, any table.

`mlmkit.finetune(model, task, ...)` (`mlmkit.finetuning.finetune`) is the entry point.
"""

from __future__ import annotations

from mlmkit.finetuning.api import FinetuneResult, finetune
from mlmkit.finetuning.metrics import METRICS
from mlmkit.finetuning.tasks import TASKS, Task, get_task
from mlmkit.finetuning.trainer import Recipe, RunResult

__all__ = ["METRICS", "TASKS", "FinetuneResult", "Recipe", "RunResult", "Task", "finetune",
           "get_task"]


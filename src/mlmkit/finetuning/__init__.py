"""Fine-tuning: a classification head or a cloze prompt (PET / LM-BFF), few-shot over seeds,
LoRA adapters; the GLUE tasks with their official metrics, AG News, any table.

`mlmkit.finetune(model, task, ...)` (`mlmkit.finetuning.finetune`) is the entry point; the
classifier it saves is used with `predict`, `evaluate_classifier` or `load_classifier`.
`mlmkit.train_embeddings(model, train, ...)` trains a sentence encoder (contrastive losses,
saved as a sentence-transformers folder).
"""

from __future__ import annotations

from mlmkit.finetuning.api import FinetuneResult, finetune
from mlmkit.finetuning.classifier import (
    Classifier,
    ClassifierEvaluation,
    Prediction,
    evaluate_classifier,
    load_classifier,
    predict,
)
from mlmkit.finetuning.embedding_api import train_embeddings
from mlmkit.finetuning.embedding_run import EmbeddingTrainResult
from mlmkit.finetuning.metrics import METRICS
from mlmkit.finetuning.run_dir import default_run_dir
from mlmkit.finetuning.tasks import TASKS, Task, get_task
from mlmkit.finetuning.trainer import Recipe, RunResult

__all__ = ["METRICS", "TASKS", "Classifier", "ClassifierEvaluation", "EmbeddingTrainResult",
           "FinetuneResult", "Prediction", "Recipe", "RunResult", "Task", "default_run_dir",
           "evaluate_classifier", "finetune", "get_task", "load_classifier", "predict",
           "train_embeddings"]


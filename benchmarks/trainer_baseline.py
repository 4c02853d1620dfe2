"""The Hugging Face Trainer side of the fine-tuning benchmarks (finetune.py, finetune_speed.py):
one place that reads the TSV rows, tokenizes them as the Trainer's users do, and runs
`transformers.Trainer` with the recipe both sides share.

The recipe (`RECIPES`): batch 16, 10% linear warm-up, weight decay 0.01, or the Trainer's
defaults (batch 8, neither); max length 128, clipping at 1.0, the Trainer's default AdamW,
`DataCollatorWithPadding`; `group_by_length` picks the Trainer's length-grouped sampler
(its fastest CPU setting) and `bf16` its bf16 autocast. The time is
the Trainer's own `train_runtime` (training only), the examples/s the training rows times the
epochs over it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import torch

from mlmkit.finetuning.data import label_index, read_split
from mlmkit.finetuning.tasks import get_task

# the recipe both sides of the benchmarks share, besides the learning rate (the issue's:
# BERT's fine-tuning; mlmkit's and the Trainer's defaults are lr 5e-5, batch 8, no warm-up,
# no weight decay, and `finetune.py --sides mlmkit-trainer-recipe` compares the two)
SHARED_RECIPE = {"batch_size": 16, "warmup": 0.1, "weight_decay": 0.01}
# `--recipe` of the benchmarks: the shared one above, or both sides' own defaults (the same
# hyper-parameters: mlmkit's defaults are the Trainer's)
RECIPES = {"shared": SHARED_RECIPE,
           "defaults": {"batch_size": 8, "warmup": 0.0, "weight_decay": 0.0}}


def add_recipe_argument(parser) -> None:
    parser.add_argument("--recipe", choices=tuple(RECIPES), default="shared",
                        help="hyper-parameters of both sides besides --lr: 'shared' (batch "
                        "16, 10%% warm-up, weight decay 0.01) or 'defaults' (batch 8, no "
                        "warm-up, no weight decay: the Trainer's defaults, and mlmkit's; "
                        "--lr is set apart: 5e-5 is their default)")


def tokenized_rows(tokenizer, path: str | Path, task: str = "sst2",
                   max_length: int = 128) -> list[dict]:
    """The rows of `task`'s TSV file at `path`, read by mlmkit's own reader (so both sides
    see the same texts: quoting undone, labels numbered alike), tokenized (truncated at
    `max_length`), as dicts of the tokenizer's fields and `labels`."""
    spec = get_task(task)
    texts, raw, _ = read_split(spec, "train", path=path)
    labels = label_index(spec, raw, list(spec.labels))
    encoded = tokenizer([text[0] for text in texts], truncation=True, max_length=max_length)
    return [{**{key: encoded[key][i] for key in encoded}, "labels": int(label)}
            for i, label in enumerate(labels)]


def run_trainer(model_dir, train, scored, *, lr: float, epochs: int, seed: int,
                group_by_length: bool = True, bf16: bool = False, task: str = "sst2",
                recipe: dict = SHARED_RECIPE) -> dict:
    """Fine-tune `model_dir` on the `train` TSV with `transformers.Trainer`, then predict the
    `scored` TSV with the last epoch's model: examples/s, training seconds, accuracy and each
    scored row's correctness."""
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        PrinterCallback,
        Trainer,
        TrainingArguments,
    )
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    train_rows = tokenized_rows(tokenizer, train, task)
    scored_rows = tokenized_rows(tokenizer, scored, task)
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(
        model_dir, num_labels=len(get_task(task).labels))
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out, per_device_train_batch_size=recipe["batch_size"],
            per_device_eval_batch_size=64, learning_rate=lr, num_train_epochs=epochs,
            warmup_steps=recipe["warmup"], weight_decay=recipe["weight_decay"],
            max_grad_norm=1.0, lr_scheduler_type="linear", seed=seed, eval_strategy="no",
            save_strategy="no", report_to="none", logging_strategy="no", use_cpu=True,
            dataloader_num_workers=0, bf16=bf16, disable_tqdm=True,
            train_sampling_strategy="group_by_length" if group_by_length else "random")
        trainer = Trainer(model=model, args=args, train_dataset=train_rows,
                          data_collator=DataCollatorWithPadding(tokenizer))
        trainer.remove_callback(PrinterCallback)
        metrics = trainer.train().metrics
        predictions = trainer.predict(scored_rows)
    correct = predictions.predictions.argmax(-1) == predictions.label_ids
    return {"examples_per_s": len(train_rows) * epochs / metrics["train_runtime"],
            "train_seconds": metrics["train_runtime"], "accuracy": float(np.mean(correct)),
            "correct": correct.tolist()}

"""`mlmkit finetune`: fine-tune a masked LM on a task (head or prompt, few-shot, LoRA)."""

from __future__ import annotations

import signal
import sys

import typer

import mlmkit
from mlmkit.cli.options import JSON, Runtime, command, trusting
from mlmkit.core.progress import status
from mlmkit.core.results import dumps
from mlmkit.options import as_keywords
from mlmkit.options.finetuning import FinetuneData, Finetuning

SHORT_HELP = "Fine-tune on a task (GLUE, AG News, any table): a head or a cloze prompt."
EXAMPLE = """
Examples:

  mlmkit finetune ./tiny-bert --task sst2 --train ../shared/data/sst2/train.tsv --validation ../shared/data/sst2/validation.tsv --run-dir runs/sst2

  mlmkit finetune ./tiny-bert --task sst2 --method prompt --shots 16 --seeds 3 --train ../shared/data/sst2/train.tsv --validation ../shared/data/sst2/validation.tsv --json

  mlmkit finetune ./tiny-bert --task topics --train data.jsonl --text-field text --label-field topic --lora
"""


def finetune_command(
    model: str = typer.Argument(..., help="Model directory or hub name (a masked LM)."),
    *, data: FinetuneData, training: Finetuning, runtime: Runtime, as_json: bool = JSON,
) -> None:
    """Fine-tune a masked LM on a task: a classification (or regression) head, or a cloze prompt
    through the MLM head; few-shot over seeds; LoRA. Keeps the last epoch (--select best: the
    best on the validation split) in --run-dir (default runs/finetune/TASK, or TASK-2, ...
    when taken): use it with mlmkit predict and mlmkit eval classify."""
    keywords = as_keywords(data)
    if keywords["run_dir"] is None:  # keep the work: runs/finetune/<task> (or -2, -3, ...)
        keywords["run_dir"] = str(mlmkit.finetuning.default_run_dir(
            mlmkit.finetuning.get_task(data.task, data.text_field, data.label_field,
                                       data.regression).name, resume=data.resume))
    with trusting(runtime.trust_remote_code):
        result = mlmkit.finetuning.finetune(model, **keywords, **as_keywords(training),
                                           **runtime.run_keywords())
    if as_json:
        print(dumps(result), flush=True)
        _exit_if_signalled(result)
        return
    print(result.summary())
    if result.test_metrics:
        print("test: " + ", ".join(f"{k} {v:.4f}" for k, v in result.test_metrics.items()))
    for run in result.runs:
        if run.best_dir:
            print(f"kept model (epoch {run.best_epoch}): {run.best_dir}")
    if result.runs and result.runs[0].best_dir \
            and not (result.runs[0].lora and not training.merge_lora):
        best = result.runs[0].best_dir
        status(f"use it: mlmkit predict {best} TEXTS.txt; mlmkit eval classify {best} "
               f"--task {result.task} FILE (the run's README.md says more)")
    stopped = next((run for run in result.runs if run.status != "finished"), None)
    if stopped is not None:  # the run's own folder: a seed's is resumed through it
        print(f"interrupted at step {stopped.steps}: continue with --resume --run-dir "
              f"{keywords['run_dir']}")
    _exit_if_signalled(result)


def _exit_if_signalled(result) -> None:
    """A run stopped by SIGINT/SIGTERM exits 128 + the signal (130, 143), as pretrain does:
    its state is saved, but the fine-tuning did not finish."""
    reason = next((r.stop_reason for r in result.runs
                   if r.stop_reason in ("SIGINT", "SIGTERM")), None)
    if reason is not None:
        sys.stdout.flush()
        sys.exit(128 + int(getattr(signal, reason)))


def register(app: typer.Typer) -> None:
    command(app, "finetune", finetune_command, short_help=SHORT_HELP, epilog=EXAMPLE)

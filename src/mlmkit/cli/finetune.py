"""`mlmkit finetune`: fine-tune a masked LM on a task (head or prompt, few-shot, LoRA)."""

from __future__ import annotations

import signal
import sys

import typer

import mlmkit
from mlmkit.cli.options import JSON, Runtime, command, trusting
from mlmkit.core.results import dumps
from mlmkit.options import as_keywords
from mlmkit.options.finetuning import Finetuning

SHORT_HELP = "Fine-tune on a task (GLUE, AG News, any table): a head or a cloze prompt."
EXAMPLE = """
Examples:

  mlmkit finetune ./tiny-bert --task sst2 --train ../shared/data/sst2/train.tsv --validation ../shared/data/sst2/validation.tsv --run-dir runs/sst2

  mlmkit finetune ./tiny-bert --task sst2 --method prompt --shots 16 --seeds 3 --train ../shared/data/sst2/train.tsv --validation ../shared/data/sst2/validation.tsv --json

  mlmkit finetune ./tiny-bert --task topics --train data.jsonl --text-cols text --label-col topic --lora
"""


def finetune_command(
    model: str = typer.Argument(..., help="Model directory or hub name (a masked LM)."),
    task: str = typer.Option("sst2", "--task", help="cola, sst2, mrpc, stsb, qqp, mnli, qnli, "
                             "rte, wnli, agnews, or a name of your own with --text-cols."),
    train: str = typer.Option(None, "--train", help="Training file (JSONL, TSV or CSV; - is "
                              "standard input)."),
    validation: str = typer.Option(None, "--validation", help="Validation file (default: the "
                                   "dataset's, else 10% of train carved with a fixed seed)."),
    test: str = typer.Option(None, "--test", help="Test file: the best epoch is evaluated on it."),
    dataset: str = typer.Option(None, "--dataset", help="A Hugging Face datasets name "
                                "NAME[:CONFIG] (downloaded if needed; see --offline)."),
    offline: bool = typer.Option(False, "--offline", help="Read --dataset names and hub models "
                                 "from the local Hugging Face caches only, never the network."),
    text_cols: str = typer.Option(None, "--text-cols", help="The text column, or two "
                                  "comma-separated (sentence pairs)."),
    label_col: str = typer.Option(None, "--label-col", help="The label column (default: label)."),
    regression: bool = typer.Option(None, "--regression/--classification", help="A custom "
                                    "task's kind (default: classification)."),
    run_dir: str = typer.Option(None, "--run-dir", help="Where the best model (best/), "
                                "metrics.json and checkpoints go."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --run-dir."),
    *, training: Finetuning, runtime: Runtime, as_json: bool = JSON,
) -> None:
    """Fine-tune a masked LM on a task: a classification (or regression) head, or a cloze prompt
    through the MLM head; few-shot over seeds; LoRA. Evaluates each epoch, keeps the best."""
    with trusting(runtime.trust_remote_code):
        result = mlmkit.finetuning.finetune(
            model, task, train=train, validation=validation, test=test, dataset=dataset,
            offline=offline, text_cols=text_cols, label_col=label_col, regression=regression,
            run_dir=run_dir, resume=resume, **runtime.run_keywords(), **as_keywords(training))
    if as_json:
        print(dumps(result), flush=True)
        _exit_if_signalled(result)
        return
    print(result.summary())
    if result.test_metrics:
        print("test: " + ", ".join(f"{k} {v:.4f}" for k, v in result.test_metrics.items()))
    for run in result.runs:
        if run.best_dir:
            print(f"best model (epoch {run.best_epoch}): {run.best_dir}")
        if run.status != "finished":
            print(f"interrupted at step {run.steps}: continue with --resume --run-dir "
                  f"{run.run_dir}")
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

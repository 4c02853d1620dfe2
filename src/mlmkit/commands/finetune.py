"""`mlmkit finetune`: fine-tune a masked LM on a task (head or prompt, few-shot, LoRA)."""

from __future__ import annotations

import typer

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
    method: str = typer.Option("head", "--method", help="head (a classification head) or prompt "
                               "(PET / LM-BFF: a cloze template through the MLM head)."),
    epochs: int = typer.Option(None, "--epochs", help="Epochs (default 3; few-shot 20)."),
    lr: float = typer.Option(None, "--lr", help="Peak learning rate (default 4e-5; few-shot "
                             "1e-4)."),
    batch_size: int = typer.Option(None, "--batch-size", help="Examples per optimizer step "
                                   "(default 16; few-shot 8)."),
    max_length: int = typer.Option(128, "--max-length", help="Longest input in tokens; longer "
                                   "ones are truncated and counted in metrics.json."),
    warmup: float = typer.Option(0.1, "--warmup", help="Share of the steps of linear warm-up."),
    weight_decay: float = typer.Option(0.01, "--weight-decay", help="AdamW weight decay."),
    bucket: bool = typer.Option(True, "--bucket/--no-bucket", help="Length-bucketed batches "
                                "(less padding)."),
    shots: int = typer.Option(None, "--shots", help="Few-shot: K training examples per class."),
    seeds: int = typer.Option(1, "--seeds", help="Runs with seeds seed..seed+N-1; mean ± std."),
    template: str = typer.Option(None, "--template", help="Prompt method: a cloze template with "
                                 "{text} (or {text1} and {text2}) and one [MASK]."),
    verbalizer: str = typer.Option(None, "--verbalizer", help="Prompt method: JSON {label: "
                                   "word} or a file holding it."),
    lora: bool = typer.Option(False, "--lora", help="Train LoRA adapters (peft) only."),
    lora_rank: int = typer.Option(8, "--lora-rank", help="LoRA rank."),
    lora_alpha: float = typer.Option(16.0, "--lora-alpha", help="LoRA alpha (scaling)."),
    lora_targets: str = typer.Option(None, "--lora-targets", help="Modules that get adapters, "
                                     "comma-separated (default: the attention query and value)."),
    merge_lora: bool = typer.Option(False, "--merge-lora", help="Save the LoRA model merged into "
                                    "a full model instead of an adapter."),
    train_limit: int = typer.Option(None, "--train-limit", help="Use at most N training "
                                    "examples (a fixed sample)."),
    eval_limit: int = typer.Option(None, "--eval-limit", help="Evaluate on at most N examples "
                                   "(a fixed sample)."),
    run_dir: str = typer.Option(None, "--run-dir", help="Where the best model (best/), "
                                "metrics.json and checkpoints go."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --run-dir."),
    save_every: int = typer.Option(0, "--save-every", help="Also save the training state every "
                                   "N steps (always: each epoch's end and on Ctrl-C)."),
    halt_after: int = typer.Option(None, "--halt-after", help="Stop (resumably) after N steps."),
    *, device, precision, threads, batch_tokens, seed, as_json,
) -> None:
    """Fine-tune a masked LM on a task: a classification (or regression) head, or a cloze prompt
    through the MLM head; few-shot over seeds; LoRA. Evaluates each epoch, keeps the best."""
    from mlmkit.core.results import dumps
    from mlmkit.finetuning import finetune

    result = finetune(model, task, train=train, validation=validation, test=test,
                      dataset=dataset, offline=offline, text_cols=text_cols, label_col=label_col,
                      regression=regression, method=method, epochs=epochs, lr=lr,
                      batch_size=batch_size, max_length=max_length, warmup=warmup,
                      weight_decay=weight_decay, bucket=bucket, shots=shots, seeds=seeds,
                      template=template, verbalizer=verbalizer, lora=lora,
                      lora_rank=lora_rank, lora_alpha=lora_alpha, lora_targets=lora_targets,
                      merge_lora=merge_lora, train_limit=train_limit, eval_limit=eval_limit,
                      run_dir=run_dir, resume=resume, save_every=save_every,
                      halt_after=halt_after, batch_tokens=batch_tokens, precision=precision,
                      device=device, threads=threads, seed=seed)
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
    import signal
    import sys

    reason = next((r.stop_reason for r in result.runs
                   if r.stop_reason in ("SIGINT", "SIGTERM")), None)
    if reason is not None:
        sys.stdout.flush()
        sys.exit(128 + int(getattr(signal, reason)))


def register(app: typer.Typer) -> None:
    from mlmkit.cli_options import shared_options

    app.command("finetune", short_help=SHORT_HELP, epilog=EXAMPLE)(
        shared_options(finetune_command))

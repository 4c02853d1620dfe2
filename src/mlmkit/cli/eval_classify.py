"""`mlmkit eval classify`: a fine-tuned classifier's metrics on a split of its task."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

import mlmkit
from mlmkit.cli.eval import eval_app
from mlmkit.cli.options import JSON, Runtime, command, trusting
from mlmkit.cli.predict import MAX_LENGTH
from mlmkit.core.output import check_output_path, write_text
from mlmkit.core.records import check_input_file

SHORT_HELP = "A fine-tuned classifier's metrics (accuracy, F1, ...) on a split of its task."
EXAMPLE = """
Examples:

  mlmkit eval classify runs/finetune/sst2/best --task sst2 ../shared/data/sst2/validation.tsv

  mlmkit eval classify runs/finetune/topics/best --text-field text --label-field topic test.jsonl --json

  mlmkit eval classify runs/finetune/rte/best --task rte --dataset nyu-mll/glue:rte --split validation
"""


def classify_command(
    model: str = typer.Argument(..., metavar="MODEL", help="A fine-tuned classifier folder "
                                "(mlmkit finetune writes RUN_DIR/best)."),
    task: str = typer.Option(None, "--task", help="The task it was fine-tuned on (its metrics "
                             "and columns): cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli, "
                             "agnews, or a name of your own with --text-field."),
    data: str = typer.Argument(None, metavar="[FILE]", help="The examples: JSONL, TSV or CSV "
                               "with the text and label columns (- reads standard input)."),
    dataset: str = typer.Option(None, "--dataset", metavar="NAME[:CONFIG]", help="A Hugging "
                                "Face datasets name instead of a FILE (default: the task's "
                                "own)."),
    split: str = typer.Option("validation", "--split", help="The split of --dataset."),
    offline: bool = typer.Option(False, "--offline", help="Read --dataset from the local "
                                 "cache only."),
    text_field: str = typer.Option(None, "--text-field", metavar="COLUMN[,COLUMN]",
                                   help="The text column, or two comma-separated (pairs); "
                                   "default: the task's."),
    label_field: str = typer.Option(None, "--label-field", metavar="COLUMN",
                                    help="The label column (default: label)."),
    limit: int = typer.Option(None, "--limit", min=1, help="Evaluate on at most N examples "
                              "(a fixed sample)."),
    max_length: int | None = MAX_LENGTH,
    output: str = typer.Option(None, "-o", "--output", help="Also write the result as JSON "
                               "here (- for standard output)."),
    *, runtime: Runtime, as_json: bool = JSON,
) -> None:
    """A fine-tuned classifier's metrics (the task's official ones: accuracy, F1, Matthews,
    Pearson/Spearman) on a labelled file or a dataset split, with its confusion table."""
    with trusting(runtime.trust_remote_code):
        if data is not None:
            check_input_file(data, "data file")
        check_output_path(output, inputs=[data] if data else [])
        runtime.seed_everything()
        result = mlmkit.finetuning.evaluate_classifier(
            model, data, task=task, text_field=text_field, label_field=label_field,
            dataset=dataset, split=split, offline=offline, limit=limit,
            max_length=max_length, device=runtime.device, precision=runtime.precision,
            threads=runtime.threads, batch_tokens=runtime.batch_tokens,
            tokenizer=runtime.tokenizer)
        if output:
            write_text(output, result.to_json(indent=1) + "\n", inputs=[data] if data else [])
        if as_json:
            if output != "-":
                print(result.to_json(), flush=True)
            return
        out = Console(highlight=False, soft_wrap=True, stderr=output == "-")
        out.print(result.summary(), markup=False)
        if result.truncated:
            out.print(f"{result.truncated} input(s) longer than --max-length {result.max_length} "
                      "tokens were cut", markup=False)
        if result.confusion is not None:
            table = Table(title="confusion (rows: true label, columns: predicted)")
            table.add_column("")
            for name in result.labels:
                table.add_column(name, justify="right")
            for name, row in zip(result.labels, result.confusion, strict=True):
                table.add_row(name, *map(str, row))
            out.print(table)


def register(app: typer.Typer) -> None:
    command(eval_app, "classify", classify_command, short_help=SHORT_HELP, epilog=EXAMPLE)

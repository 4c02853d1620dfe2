"""`mlmkit fill`: the likeliest tokens at the masks of one or many texts."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mlmkit.errors import MlmkitError

EXAMPLE = """
Example:

  mlmkit fill ./tiny-bert "The capital of France is [MASK]." --top-k 5

  mlmkit fill ./tiny-bert "A [MASK] of the [MASK] module." --joint --json

  mlmkit fill ./tiny-bert --file inputs.txt --json > predictions.json
"""


def fill_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    texts: list[str] = typer.Argument(None, help="Texts with [MASK] or <mask> (either spelling "
                                                 "works with any model)."),
    file: Path = typer.Option(None, "--file", help="Read inputs from a file, one per line "
                                                   "(blank lines are skipped)."),
    top_k: int = typer.Option(5, "--top-k", help="Candidates per mask."),
    joint: bool = typer.Option(False, "--joint", help="Fill masks one at a time, most confident "
                                                      "first, each seeing the ones filled."),
    batch_size: int = typer.Option(32, "--batch-size", help="Texts per model call."),
    device: str = typer.Option("auto", help="cpu, cuda, ... (auto: cuda when available)."),
    as_json: bool = typer.Option(False, "--json", help="Print the predictions as JSON."),
) -> None:
    from mlmkit.generate.fill_mask import fill_mask, read_fill_inputs
    from mlmkit.models import load_mlm

    if file is not None and texts:
        raise MlmkitError("give texts or --file, not both")
    if file is None and not texts:
        raise MlmkitError('give a text with a mask, e.g. "The capital of France is [MASK].", '
                          "or --file with one per line")
    mlm = load_mlm(model, device=device)
    inputs = read_fill_inputs(file, mlm.tokenizer) if file is not None else list(texts)
    results = fill_mask(mlm, inputs, top_k=top_k, mode="joint" if joint else "independent",
                        batch_size=batch_size, progress=len(inputs) > batch_size)
    if as_json:
        typer.echo(json.dumps([asdict(result) for result in results], ensure_ascii=False,
                              indent=2))
        return
    console = Console()
    for result in results:
        console.print(f"[bold]{escape(result.text)}[/bold]")
        table = Table(show_header=True, header_style="bold")
        table.add_column("mask", justify="right")
        if joint:
            table.add_column("step", justify="right")
        table.add_column("rank", justify="right")
        table.add_column("token")
        table.add_column("id", justify="right")
        table.add_column("probability", justify="right")
        for mask in result.masks:
            for rank, candidate in enumerate(mask.candidates, start=1):
                cells = [str(mask.index + 1) if rank == 1 else ""]
                if joint:
                    cells.append(str(mask.step + 1) if rank == 1 else "")
                cells += [str(rank), escape(repr(candidate.token)), str(candidate.token_id),
                          f"{candidate.score:.4f}"]
                table.add_row(*cells)
        console.print(table)
        console.print(f"filled: {escape(result.filled)}  (log-prob {result.log_prob:.3f})\n")


def register(app: typer.Typer) -> None:
    app.command(
        "fill",
        short_help='Top-k tokens at each [MASK] / <mask>, e.g. mlmkit fill ./tiny-bert '
                   '"The capital of France is [MASK]." --top-k 5',
        help="Predict the likeliest tokens at each [MASK] / <mask>, independently (as "
             "FillMaskPipeline) or jointly (--joint).\n" + EXAMPLE,
    )(fill_command)

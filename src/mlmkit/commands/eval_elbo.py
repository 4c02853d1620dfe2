"""`mlmkit eval elbo`: the masked-diffusion likelihood bound of texts under any MLM."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

EXAMPLE = """
Example:

  mlmkit eval elbo ./tiny-bert texts.txt --samples 128
"""


def elbo_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    file: Path = typer.Argument(..., help="Text file, one text per line."),
    samples: int = typer.Option(128, help="Monte-Carlo samples per text."),
    method: str = typer.Option("count", help="count (LLaDA: over the number of masks) or "
                               "time (MDLM: over t); both stratified."),
    seed: int = typer.Option(0, help="Random seed."),
    batch_rows: int = typer.Option(64, "--batch-rows", help="Masked copies per model call."),
    device: str = typer.Option("auto", help="cpu, cuda, ... (auto: cuda when available)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object per text."),
) -> None:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from mlmkit.commands.generate import read_lines
    from mlmkit.generate import elbo
    from mlmkit.models import load_mlm

    lines = read_lines(file, "texts")
    numbered = [(number, line) for number, line in enumerate(lines, 1) if line.strip()]
    mlm = load_mlm(model, device=device)
    err = Console(stderr=True)
    results = []
    columns = (TextColumn("elbo"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rate]} texts/s"), TimeRemainingColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task("elbo", total=len(numbered), rate="-")
        for done, (number, line) in enumerate(numbered, 1):
            results.append((number, elbo(mlm, line, samples=samples, method=method,
                                         seed=seed + number)))
            elapsed = progress.tasks[0].elapsed or 1e-9
            progress.update(task, advance=1, rate=f"{done / elapsed:.1f}")
    skipped = len(lines) - len(numbered)
    if skipped:
        err.print(f"[yellow]{skipped} blank line(s) of {file} skipped[/yellow]")
    if as_json:
        for number, result in results:
            record = dict(asdict(result), line=number, nats_per_token=result.nats_per_token,
                          perplexity_bound=result.perplexity_bound)
            typer.echo(json.dumps(record, ensure_ascii=False))
        return
    table = Table(title=f"masked-diffusion ELBO ({method}, {samples} samples)")
    for column in ("line", "tokens", "NELBO nats", "± s.e.", "nats/token", "ppl bound"):
        table.add_column(column, justify="right")
    for number, r in results:
        table.add_row(str(number), str(r.n_tokens), f"{r.nats:.2f}", f"{r.stderr:.2f}",
                      f"{r.nats_per_token:.4f}", f"{r.perplexity_bound:.2f}")
    tokens = sum(r.n_tokens for _, r in results)
    nats = math.fsum(r.nats for _, r in results)
    table.add_row("all", str(tokens), f"{nats:.2f}",
                  f"{math.sqrt(math.fsum(r.stderr ** 2 for _, r in results)):.2f}",
                  f"{nats / tokens:.4f}", f"{math.exp(nats / tokens):.2f}", style="bold")
    Console().print(table)


def register(app: typer.Typer) -> None:
    from mlmkit.commands.eval import eval_app

    eval_app.command(
        "elbo",
        help="The masked-diffusion ELBO per text (nats/token and a perplexity bound), "
        "Monte-Carlo over masks, stratified, float64; works with any MLM." + EXAMPLE,
    )(elbo_command)

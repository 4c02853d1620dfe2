"""`mlmkit eval blimp`: minimal-pair accuracy (good sentence scored above the bad one)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from mlmkit.cache import atomic_write_text

EXAMPLE = """
Example:

  mlmkit eval blimp ./tiny-bert --data ../shared/data/blimp --limit 50 --json-out blimp.json
"""


def blimp_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    data: Path = typer.Option(..., help="A jsonl file or a folder of them "
                              "(sentence_good, sentence_bad, UID, field)."),
    metric: str = typer.Option("pll", help="pll or pll_word_l2r."),
    limit: int = typer.Option(None, help="At most this many pairs per paradigm."),
    paradigm: list[str] = typer.Option([], "--paradigm", help="Only these paradigms (UIDs)."),
    precision: str = typer.Option("fp32", help="fp32 or bf16 (autocast)."),
    batch_tokens: int = typer.Option(None, "--batch-tokens", help="Padded tokens per batch."),
    device: str = typer.Option("auto", help="cpu, cuda, ... (auto: cuda when available)."),
    json_out: Path = typer.Option(None, "--json-out", help="Also write the results as JSON."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
) -> None:
    from mlmkit.models import load_mlm
    from mlmkit.scoring import evaluate_pairs, read_pairs

    pairs = read_pairs(data, limit=limit, paradigms=paradigm or None)
    mlm = load_mlm(model, device=device)
    result = evaluate_pairs(mlm, pairs, metric=metric, precision=precision,
                            batch_tokens=batch_tokens, progress=True)
    if json_out:
        atomic_write_text(json_out, json.dumps(result.to_dict(), indent=1) + "\n")
    if as_json:
        typer.echo(json.dumps(result.to_dict()))
        return
    console = Console()
    table = Table(title=f"minimal pairs: {result.n_pairs} pairs, metric {metric}")
    for column in ("paradigm", "field", "pairs", "accuracy"):
        table.add_column(column, justify="right" if column in ("pairs", "accuracy") else "left")
    for name, row in result.by_paradigm.items():
        table.add_row(name, row["field"], str(row["n"]), f"{100 * row['accuracy']:.1f}%")
    console.print(table)
    fields = Table(title="by field")
    for column in ("field", "pairs", "accuracy"):
        fields.add_column(column)
    for name, row in result.by_field.items():
        fields.add_row(name, str(row["n"]), f"{100 * row['accuracy']:.1f}%")
    fields.add_row("overall", str(result.n_pairs), f"{100 * result.overall:.1f}%", style="bold")
    console.print(fields)


def register(app: typer.Typer) -> None:
    from mlmkit.commands.eval import eval_app

    eval_app.command(
        "blimp",
        help="Minimal-pair accuracy (BLiMP or any jsonl with sentence_good/sentence_bad): per "
        "paradigm, per field and overall; a pair is right when score(good) > score(bad)."
        + EXAMPLE,
    )(blimp_command)

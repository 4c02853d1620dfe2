"""`mlmkit eval blimp`: minimal-pair accuracy (good sentence scored above the bad one)."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

import mlmkit
from mlmkit.cli.eval import eval_app
from mlmkit.cli.options import ENCODING, ENCODING_ERRORS, JSON, Runtime, command, trusting
from mlmkit.cli.score import ALLOW_UNTRAINED_HEAD, METRIC, SKIP_UNK
from mlmkit.core.output import check_output_path, write_text
from mlmkit.core.progress import console

SHORT_HELP = "Minimal-pair accuracy (BLiMP): per paradigm, per field and overall."
EXAMPLE = """
Examples:

  mlmkit eval blimp ./tiny-bert ../shared/data/blimp --limit 50 -o blimp.json

  mlmkit eval blimp ./tiny-bert ../shared/data/blimp --paradigm passive_1 --json
"""


def blimp_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    data: str = typer.Argument(..., help="A jsonl file or a folder of them (sentence_good, "
                               "sentence_bad, UID, field); - reads standard input."),
    metric: str = METRIC,
    limit: int = typer.Option(None, help="At most this many pairs per paradigm (≥ 1)."),
    paradigm: list[str] = typer.Option([], "--paradigm", help="Only these paradigms (UIDs)."),
    skip_unk: bool = SKIP_UNK,
    output: str = typer.Option(None, "-o", "--output", help="Also write the results as JSON "
                               "here (- for standard output)."),
    allow_untrained_head: bool = ALLOW_UNTRAINED_HEAD,
    *, encoding: str = ENCODING, encoding_errors: str = ENCODING_ERRORS, runtime: Runtime,
    as_json: bool = JSON,
) -> None:
    """Minimal-pair accuracy (BLiMP or any jsonl with sentence_good/sentence_bad): per
    paradigm, per field and overall; a pair is right when score(good) > score(bad)."""
    with trusting(runtime.trust_remote_code):
        unk = "skip" if skip_unk else "score"
        mlmkit.scoring.text_scores.check_score_options(metric, unk, 1, runtime.batch_tokens)
        check_output_path(output, inputs=[data])
        runtime.seed_everything()
        mlm = mlmkit.load(model, **runtime.load_keywords(),
                          allow_untrained_head=allow_untrained_head)
        pairs = mlmkit.scoring.read_pairs(
            data, limit=limit, paradigms=paradigm or None, encoding=encoding,
            errors=encoding_errors)
        result = mlm.evaluate_pairs(pairs, metric=metric, unk=unk)
        if output:
            write_text(output, result.to_json(indent=1) + "\n", inputs=[data])
        if as_json:
            if output != "-":
                print(result.to_json(), flush=True)
            return

        out = console() if output == "-" else Console(highlight=False, soft_wrap=True)
        table = Table(title=f"minimal pairs: {result.n_pairs} pairs, metric {metric}")
        for column in ("paradigm", "field", "pairs", "accuracy"):
            table.add_column(column, justify="right" if column in ("pairs", "accuracy") else "left")
        for name, row in result.by_paradigm.items():
            table.add_row(name, row["field"], str(row["n"]), f"{100 * row['accuracy']:.1f}%")
        out.print(table)
        fields = Table(title="by field")
        for column in ("field", "pairs", "accuracy"):
            fields.add_column(column)
        for name, row in result.by_field.items():
            fields.add_row(name, str(row["n"]), f"{100 * row['accuracy']:.1f}%")
        fields.add_row("overall", str(result.n_pairs), f"{100 * result.overall:.1f}%", style="bold")
        out.print(fields)


def register(app: typer.Typer) -> None:
    command(eval_app, "blimp", blimp_command, short_help=SHORT_HELP, epilog=EXAMPLE)

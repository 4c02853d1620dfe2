"""`mlmkit eval`: the group of evaluation commands; others add theirs to `eval_app`."""

from __future__ import annotations

import typer

EVAL_HELP = ("Evaluate a masked LM: minimal pairs (BLiMP), likelihood bounds (ELBO), the "
             "downstream suite and comparisons.")
EXAMPLE = """
Examples:

  mlmkit eval blimp ./tiny-bert --data ../shared/data/blimp --limit 20

  mlmkit eval elbo ./tiny-bert texts.txt --samples 32 --json
"""

eval_app = typer.Typer(help=EVAL_HELP, epilog=EXAMPLE, no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(eval_app, name="eval", short_help=EVAL_HELP)

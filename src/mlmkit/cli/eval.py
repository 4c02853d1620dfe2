"""`mlmkit eval`: the group of evaluation commands; others add theirs to `eval_app`."""

from __future__ import annotations

import typer

from mlmkit.cli.options import command_group

EVAL_HELP = ("Evaluate a masked LM: minimal pairs (BLiMP), likelihood bounds (ELBO), the "
             "downstream suite and comparisons.")
EXAMPLE = """
Examples:

  mlmkit eval blimp ./tiny-bert ../shared/data/blimp --limit 20

  mlmkit eval elbo ./tiny-bert texts.txt --samples 32 --json
"""

eval_app = command_group(EVAL_HELP, epilog=EXAMPLE)


def register(app: typer.Typer) -> None:
    app.add_typer(eval_app, name="eval", short_help=EVAL_HELP)

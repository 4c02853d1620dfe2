"""`mlmkit eval`: the group of evaluation commands; others add theirs to `eval_app`."""

from __future__ import annotations

import typer

eval_app = typer.Typer(
    help="Evaluate a masked LM (minimal pairs, likelihood bounds, ...).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(eval_app, name="eval")

"""The `mlmkit` command line: a typer app whose commands live in `mlmkit.commands`.

Each module there defines `register(app)`; they are discovered, so adding a command
never edits this file. Commands parse arguments, call the library, and print.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys

import typer

from mlmkit.errors import MlmkitError

app = typer.Typer(
    name="mlmkit",
    help="Masked language models: pretrain, score, fill, generate, probe and audit.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _register_commands() -> None:
    import mlmkit.commands as commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"mlmkit.commands.{info.name}")
        module.register(app)


_register_commands()


def _quiet_transformers() -> None:
    """Hide transformers' per-load progress bars: the commands print their own progress.

    Set through the environment (read when transformers is imported), so `--help` stays
    free of the import.
    """
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def main() -> None:
    """Entry point: run the app; bad input prints one clear line and exits 2.

    Usage errors (unknown option, bad value) are typer's own: a short message, exit 2.
    """
    _quiet_transformers()
    try:
        app()
    except (MlmkitError, FileNotFoundError) as error:
        typer.secho(f"error: {error}", err=True, fg="red")
        sys.exit(2)

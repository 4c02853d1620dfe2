"""`mlmkit data fetch NAME`: download a data set of the evaluation suite from the Hugging
Face hub into the folder the suite reads by default."""

from __future__ import annotations

import json

import typer

import mlmkit
from mlmkit.cli.options import JSON, subcommand
from mlmkit.core.progress import status

EXAMPLE = """
Examples:

  mlmkit data fetch blimp

  mlmkit data fetch sst2 --data-dir ./suite-data

  mlmkit eval suite ./tiny-bert --data ./suite-data --parts cloze --quick
"""

data_app = typer.Typer(help="The evaluation suite's data sets: fetch them from the Hugging "
                            "Face hub.\n" + EXAMPLE, no_args_is_help=True)


@subcommand(data_app, "fetch", epilog=EXAMPLE,
            short_help="Download blimp, sst2 or agnews for the evaluation suite.")
def fetch_command(
    name: str = typer.Argument(..., metavar="NAME", help="blimp, sst2 or agnews."),
    data_dir: str = typer.Option(None, "--data-dir", metavar="DIR", help="Folder to write "
                                 "NAME/ into (default: $MLMKIT_DATA, else "
                                 "~/.cache/mlmkit/data: where eval suite looks)."),
    as_json: bool = JSON,
) -> None:
    """Download a data set of the evaluation suite (BLiMP, SST-2, AG News) from the Hugging
    Face hub into the layout `mlmkit eval suite` reads."""
    folder = mlmkit.evaluation.suite_data.fetch(name, data_dir)
    if as_json:
        print(json.dumps({"name": name, "folder": str(folder)}))
    else:
        status(f"{name} → {folder}")


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data", short_help="Fetch the evaluation suite's data sets, "
                  "e.g. mlmkit data fetch blimp")

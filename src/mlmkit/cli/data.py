"""`mlmkit data fetch NAME`: download a data set of the evaluation suite or of the embedding
evaluations from the Hugging Face hub into the folder they read by default."""

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

  mlmkit data fetch stsb        (then: mlmkit eval sts MODEL stsb)

  mlmkit data fetch nanobeir    (then: mlmkit eval retrieval MODEL --data nanobeir/scifact)

  mlmkit eval suite ./tiny-bert --data ./suite-data --parts cloze --quick
"""

data_app = typer.Typer(help="The evaluation data sets: fetch them from the Hugging "
                            "Face hub.\n" + EXAMPLE, no_args_is_help=True)


@subcommand(data_app, "fetch", epilog=EXAMPLE,
            short_help="Download blimp, sst2, agnews, stsb, scifact or nanobeir.")
def fetch_command(
    name: str = typer.Argument(..., metavar="NAME", help="blimp, sst2, agnews (the suite); stsb "
                              "(mteb/stsbenchmark-sts: train/validation/test.tsv); scifact "
                              "(BeIR/scifact) or nanobeir (all 13 NanoBEIR sets) or "
                              "nanobeir/SET (BEIR folders)."),
    data_dir: str = typer.Option(None, "--data-dir", metavar="DIR", help="Folder to write "
                                 "NAME/ into (default: $MLMKIT_DATA, else "
                                 "~/.cache/mlmkit/data: where eval suite looks)."),
    as_json: bool = JSON,
) -> None:
    """Download a data set of the evaluation suite (BLiMP, SST-2, AG News) or of the
    embedding evaluations (STS-B, SciFact, NanoBEIR) from the Hugging Face hub into the
    layout `mlmkit eval suite`, `eval sts` and `eval retrieval` read."""
    folder = mlmkit.evaluation.suite_data.fetch(name, data_dir)
    if as_json:
        print(json.dumps({"name": name, "folder": str(folder)}))
    else:
        status(f"{name} → {folder}")


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data", short_help="Fetch the evaluation data sets, "
                  "e.g. mlmkit data fetch blimp")

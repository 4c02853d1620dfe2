"""`mlmkit fill`: the likeliest tokens at the masks of one or many texts."""

from __future__ import annotations

import re
import warnings

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import mlmkit
from mlmkit.cli.options import ENCODING, ENCODING_ERRORS, JSON, OUTPUT, Runtime, command, trusting
from mlmkit.core import checks
from mlmkit.core.output import check_output_path, open_output
from mlmkit.core.progress import warn
from mlmkit.core.records import check_input_file, names_a_file
from mlmkit.core.results import dumps
from mlmkit.errors import InvalidArgument

SHORT_HELP = "Top-k tokens at each [MASK] / <mask>, independently or jointly."
EXAMPLE = """
Examples:

  mlmkit fill ./tiny-bert "The capital of France is [MASK]." --top-k 5

  mlmkit fill ./tiny-bert "A [MASK] of the [MASK] module." --joint --json

  mlmkit fill ./tiny-bert "The [MASK] sat on the mat." --targets cat,dog

  mlmkit fill ./tiny-bert --file - --json < inputs.txt > predictions.jsonl
"""


def _table(result, joint: bool):
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
    return table


def _hint_file_given_as_text(texts: list[str], spellings) -> None:
    """A text without a mask that names a file (`mlmkit fill MODEL masked.txt`) is a file
    meant as input: say so before the model loads, not "the input has no mask"."""
    pattern = re.compile("|".join(re.escape(s) for s in spellings))
    for text in texts:
        if not pattern.search(text) and "\n" not in text and names_a_file(text):
            raise InvalidArgument(f"{text!r} is a file, taken here as a text to fill (it has "
                                  f"no mask): read inputs from it with --file {text}")


def fill_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    texts: list[str] = typer.Argument(None, help="Texts with [MASK] or <mask> (either spelling "
                                                 "works with any model)."),
    file: str = typer.Option(None, "--file", help="Read inputs from a file, one per line "
                             "(blank lines skipped; JSONL/TSV/CSV: the text field); - reads "
                             "standard input."),
    top_k: int = typer.Option(5, "--top-k", help="Candidates per mask."),
    joint: bool = typer.Option(False, "--joint", help="Fill masks one at a time, most confident "
                                                      "first, each seeing the ones filled."),
    targets: list[str] = typer.Option(None, "--targets", metavar="WORDS",
                                      help="Only these tokens as candidates (comma-separated "
                                      "or repeated), scored over the whole vocabulary."),
    *, output: str = OUTPUT, as_json: bool = JSON, encoding: str = ENCODING,
    encoding_errors: str = ENCODING_ERRORS, runtime: Runtime,
) -> None:
    with trusting(runtime.trust_remote_code):
        from mlmkit.generation.fill_mask import MASK_SPELLINGS, read_fill_inputs

        checks.count("top_k", top_k, 1)
        if file is not None and texts:
            raise InvalidArgument("give texts or --file, not both")
        if file is None and not texts:
            raise InvalidArgument('give a text with a mask, e.g. "The capital of France is '
                                  '[MASK].", or --file with one per line')
        if file is None:
            _hint_file_given_as_text(texts, MASK_SPELLINGS)
        inputs = [file] if file is not None else []
        if file is not None:
            check_input_file(file, "inputs file")
        check_output_path(output, inputs=inputs)
        runtime.seed_everything()
        mlm = mlmkit.load(model, **runtime.load_keywords())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            items = read_fill_inputs(file, mlm.tokenizer, encoding, encoding_errors) \
                if file is not None else list(texts)
        for warning in caught:
            warn(str(warning.message))
        words = [w.strip() for item in targets or [] for w in item.split(",") if w.strip()]
        results = mlm.fill(items, top_k=top_k, mode="joint" if joint else "independent",
                           targets=words or None)
        with open_output(output, inputs=inputs) as handle:
            if as_json:
                for result in results:
                    handle.write(dumps(result) + "\n")
                return

            console = Console(file=handle, highlight=False, soft_wrap=True)
            for result in results:
                console.print(result.text, markup=False, style="bold")
                console.print(_table(result, joint))
                console.print(f"filled: {result.filled}  (log-prob {result.log_prob:.3f})\n",
                              markup=False)


def register(app: typer.Typer) -> None:
    command(
        app, "fill", fill_command,
        short_help=SHORT_HELP,
        help=SHORT_HELP + "\n\nIndependent (default): every mask predicted from the input as "
        "given, as FillMaskPipeline. --joint: the masks filled one at a time, the most "
        "confident first. Prints a table per text (--json: one JSON object per text)."
        + EXAMPLE,
    )

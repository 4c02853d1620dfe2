"""`mlmkit eval elbo`: the masked-diffusion likelihood bound of texts under any MLM."""

from __future__ import annotations

import math

import typer
from rich.console import Console
from rich.table import Table

import mlmkit
from mlmkit.cli.eval import eval_app
from mlmkit.cli.options import ENCODING, ENCODING_ERRORS, JSON, OUTPUT, Runtime, command, trusting
from mlmkit.core import checks
from mlmkit.core.output import check_output_path, open_output
from mlmkit.core.progress import warn
from mlmkit.core.records import check_input_file, display_name, read_texts
from mlmkit.core.results import dumps
from mlmkit.errors import InvalidArgument, InvalidData

SHORT_HELP = "The masked-diffusion ELBO per text: nats/token and a perplexity bound."
EXAMPLE = """
Examples:

  mlmkit eval elbo ./tiny-bert texts.txt --samples 128

  mlmkit eval elbo ./tiny-bert - --json < texts.txt

  mlmkit eval elbo ./tiny-bert --text "Return the number of items." --samples 16
"""


def elbo_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    file: str = typer.Argument(None, help="Text file, one text per line (blank lines "
                               "skipped; JSONL/TSV/CSV: the text field); - reads standard "
                               "input."),
    text: list[str] = typer.Option([], "--text", help="This text instead of a file "
                                   "(repeatable: one row each, in order)."),
    samples: int = typer.Option(128, help="Monte-Carlo samples per text."),
    method: str = typer.Option("count", help="count (LLaDA: over the number of masks) or "
                               "time (MDLM: over t); both stratified."),
    parameterization: str = typer.Option("subs", help="subs (MDLM: [MASK] never predicted, "
                                         "the tighter bound) or softmax (the plain softmax)."),
    *, output: str = OUTPUT, as_json: bool = JSON, encoding: str = ENCODING,
    encoding_errors: str = ENCODING_ERRORS, runtime: Runtime,
) -> None:
    with trusting(runtime.trust_remote_code):
        from mlmkit.generation.elbo import MAX_SAMPLES, METHODS, PARAMETERIZATIONS

        checks.count("samples", samples, 1, MAX_SAMPLES)
        checks.choice("method", method, METHODS)
        checks.choice("parameterization", parameterization, PARAMETERIZATIONS)
        checks.count("seed", runtime.seed, 0, 2**63 - 1)
        if text and file is not None:
            raise InvalidArgument(f"give --text or a texts file ({file!r}), not both")
        if not text and file is None:
            raise InvalidArgument('give a file of texts (- for standard input) or --text '
                                  '"a sentence"')
        inputs = [file] if file is not None else []
        if file is not None:
            check_input_file(file, "texts file")
        check_output_path(output, inputs=inputs)
        lines = list(enumerate(text, start=1)) if text else list(
            read_texts(file, encoding=encoding, errors=encoding_errors))
        numbered = [(number, text) for number, text in lines if text.strip()]
        if not numbered:
            raise InvalidData(f"{display_name(file) if file else '--text'} has no text ("
                              f"{'every line is blank' if lines else 'it is empty'}): write one "
                              "text per line")
        mlm = mlmkit.load(model, **runtime.load_keywords())
        results = mlm.elbo([text for _, text in numbered], samples=samples, method=method,
                           parameterization=parameterization, seed=runtime.seed)
        skipped = len(lines) - len(numbered)
        if skipped:
            where = display_name(file) if file else "--text"
            warn(f"{skipped} blank line(s) of {where} skipped")
        with open_output(output, inputs=inputs) as handle:
            if as_json:
                for (number, _), result in zip(numbered, results, strict=True):
                    handle.write(dumps(dict(result.to_dict(), line=number)) + "\n")
                return

            table = Table(title=f"masked-diffusion ELBO ({parameterization}, {method}, {samples} "
                                "samples)")
            for column in ("line", "tokens", "NELBO nats", "± s.e.", "nats/token", "ppl bound"):
                table.add_column(column, justify="right")
            for (number, _), r in zip(numbered, results, strict=True):
                table.add_row(str(number), str(r.n_tokens), f"{r.nats:.2f}", f"{r.stderr:.2f}",
                              f"{r.nats_per_token:.4f}", f"{r.perplexity_bound:.2f}")
            tokens = sum(r.n_tokens for r in results)
            nats = math.fsum(r.nats for r in results)
            stderr = math.sqrt(math.fsum(r.stderr ** 2 for r in results)) if samples > 1 \
                else math.nan
            try:
                bound = f"{math.exp(nats / tokens):.2f}"
            except OverflowError:
                bound = "inf"
            table.add_row("all", str(tokens), f"{nats:.2f}", f"{stderr:.2f}",
                          f"{nats / tokens:.4f}", bound, style="bold")
            Console(file=handle, highlight=False).print(table)


def register(app: typer.Typer) -> None:
    command(
        eval_app, "elbo", elbo_command,
        short_help=SHORT_HELP,
        help=SHORT_HELP + "\n\nMonte-Carlo over masks, stratified, in float64; MDLM's SUBS "
        "parameterisation by default; works with any MLM. Prints a table (--json: one JSON "
        "object per text, with its line number)." + EXAMPLE,
    )

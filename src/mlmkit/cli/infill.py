"""`mlmkit infill`: fill the [MASK] spans of a template by iterative unmasking."""

from __future__ import annotations

import typer

from mlmkit.cli.generate import SHOW, TRACE, run_unmasking
from mlmkit.cli.options import ENCODING, ENCODING_ERRORS, JSON, OUTPUT, Runtime, command
from mlmkit.core import checks
from mlmkit.core.output import open_output
from mlmkit.core.progress import status
from mlmkit.core.results import dumps
from mlmkit.errors import InvalidArgument
from mlmkit.options.sampler import Sampling

SHORT_HELP = "Fill the [MASK] spans of a template by iterative unmasking."
EXAMPLE = """
Examples:

  mlmkit infill ./tiny-bert "Return the [MASK:2] of the [MASK:1-3]." --temperature 0

  mlmkit infill ./tiny-bert --file - --json < templates.txt
"""


def infill_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    template: str = typer.Argument(None, help="Text with [MASK], [MASK:n] or [MASK:a-b] spans."),
    templates_file: str = typer.Option(None, "--file", help="Read the templates from a file, "
                                       "one per line (blank lines skipped); - reads standard "
                                       "input."),
    max_candidates: int = typer.Option(64, "--max-candidates",
                                       help="Most span-length combinations to try."),
    *, sampling: Sampling, show: bool = SHOW,
    trace: str = TRACE, output: str = OUTPUT, as_json: bool = JSON, encoding: str = ENCODING,
    encoding_errors: str = ENCODING_ERRORS, runtime: Runtime,
) -> None:
    def check() -> None:
        checks.count("max_candidates", max_candidates, 1, 10_000)
        if (template is None) == (templates_file is None):
            raise InvalidArgument("give either a TEMPLATE argument or --file, not both or "
                                  "neither")

    results, inputs = run_unmasking(
        "infill", model, texts=[template], texts_file=templates_file, what="templates",
        keep_blank=False, sampling=sampling, check=check, output=output, trace=trace,
        show=show, encoding=encoding, encoding_errors=encoding_errors, runtime=runtime,
        max_candidates=max_candidates)
    with open_output(output, inputs=inputs) as handle:
        for result in results:
            handle.write((dumps(result) if as_json else result.text) + "\n")
    if not as_json:  # the candidates of unknown-length spans, for people (stderr)
        for result in results:
            if len(result.candidates) > 1:
                status(f"{result.template}")
                for candidate in result.candidates:
                    status(f"  lengths {candidate.lengths}: PLL/token {candidate.score:.3f}  "
                           f"{' | '.join(candidate.spans)}")


def register(app: typer.Typer) -> None:
    command(
        app, "infill", infill_command,
        short_help=SHORT_HELP,
        help=SHORT_HELP + "\n\n[MASK] is one token, [MASK:n] n tokens, [MASK:a-b] every "
        "length from a to b (the best by PLL per token wins). Prints one filled text per "
        "template (--json: one JSON object per template, with every candidate)." + EXAMPLE,
    )

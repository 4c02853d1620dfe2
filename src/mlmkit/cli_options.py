"""The options every command shares, defined once so their names, defaults and help are the
same everywhere (docs/CLI.md). A command declares e.g. `device: str = DEVICE`."""

from __future__ import annotations

import typer

DEVICE = typer.Option("auto", "--device", help="auto (the first GPU if any, else cpu), cpu, "
                      "cuda, cuda:N or mps.", rich_help_panel="Runtime")
PRECISION = typer.Option("auto", "--precision", help="auto, fp32 or bf16. auto: fp32 for "
                         "scores and inference; bf16 autocast for training where the hardware "
                         "multiplies bf16 natively.", rich_help_panel="Runtime")
THREADS = typer.Option(None, "--threads", min=1, help="CPU threads (default: $MLMKIT_THREADS, "
                       "else the cores this process may use).", rich_help_panel="Runtime")
BATCH_TOKENS = typer.Option(None, "--batch-tokens", min=1, help="Padded tokens per forward "
                            "batch (default: sized for the model and memory).",
                            rich_help_panel="Runtime")
SEED = typer.Option(0, "--seed", help="Seed of every random choice: same seed, same result.",
                    rich_help_panel="Runtime")
OUTPUT = typer.Option("-", "-o", "--output", help="Where to write the results (- for "
                      "standard output).")
JSON = typer.Option(False, "--json", help="Print machine-readable JSON on standard output.")

ENCODING = typer.Option("utf-8", "--encoding", help="Text encoding of the input file.")
ENCODING_ERRORS = typer.Option("strict", "--encoding-errors", help="strict (stop at the "
                               "first undecodable byte), replace or ignore.")

# name -> (type, option): what `shared_options` gives a command's bare keyword parameters.
SHARED = {
    "device": (str, DEVICE), "precision": (str, PRECISION), "threads": (int, THREADS),
    "batch_tokens": (int, BATCH_TOKENS), "seed": (int, SEED), "output": (str, OUTPUT),
    "as_json": (bool, JSON), "encoding": (str, ENCODING),
    "encoding_errors": (str, ENCODING_ERRORS),
}


def shared_options(command=None, *, extra: dict | None = None):
    """Give a command's bare keyword-only parameters named in SHARED (or `extra`, a table of
    the same form for a family of commands) their shared option, so a command declares
    `*, device, precision, threads, seed` in one line."""
    import inspect

    if command is None:
        return lambda function: shared_options(function, extra=extra)
    table = {**SHARED, **(extra or {})}
    signature = inspect.signature(command)
    parameters = []
    for parameter in signature.parameters.values():
        if (parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.name in table
                and parameter.default is inspect.Parameter.empty):
            kind, option = table[parameter.name]
            parameter = parameter.replace(default=option, annotation=kind)
        parameters.append(parameter)
    command.__signature__ = signature.replace(parameters=parameters)
    return command

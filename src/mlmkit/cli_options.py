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

TRUST_REMOTE_CODE = typer.Option(False, "--trust-remote-code", help="Run the model code a "
                                 "checkpoint ships with (config.json auto_map: NeoBERT, LLaDA, "
                                 "Dream, ...); read it first, it runs on this machine. "
                                 "Default: $MLMKIT_TRUST_REMOTE_CODE=1, else refused.",
                                 rich_help_panel="Model")

ENCODING = typer.Option("utf-8", "--encoding", help="Text encoding of the input file.")
ENCODING_ERRORS = typer.Option("strict", "--encoding-errors", help="strict (stop at the "
                               "first undecodable byte), replace or ignore.")

# name -> (type, option): what `shared_options` gives a command's bare keyword parameters.
SHARED = {
    "device": (str, DEVICE), "precision": (str, PRECISION), "threads": (int, THREADS),
    "batch_tokens": (int, BATCH_TOKENS), "seed": (int, SEED), "output": (str, OUTPUT),
    "as_json": (bool, JSON), "encoding": (str, ENCODING),
    "encoding_errors": (str, ENCODING_ERRORS), "trust_remote_code": (bool, TRUST_REMOTE_CODE),
}

# A command with one of these parameters loads a model: `shared_options` gives it
# --trust-remote-code even when it does not declare it (see `_trusting`).
MODEL_PARAMETERS = ("model", "models", "model_a")


def shared_options(command=None, *, extra: dict | None = None):
    """Give a command's bare keyword-only parameters named in SHARED (or `extra`, a table of
    the same form for a family of commands) their shared option, so a command declares
    `*, device, precision, threads, seed` in one line.

    A command that loads a model (a parameter in MODEL_PARAMETERS) also gets
    --trust-remote-code: declared (`*, trust_remote_code`), it receives the flag; otherwise
    the flag is added here and the command runs inside `trusting_remote_code` when it is
    given, so every model the command loads (`load_mlm`, `as_mlm`, `prepare_mlm`) sees it."""
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
    names = {p.name for p in parameters}
    if "trust_remote_code" not in names and names & set(MODEL_PARAMETERS):
        flag = inspect.Parameter("trust_remote_code", inspect.Parameter.KEYWORD_ONLY,
                                 default=TRUST_REMOTE_CODE, annotation=bool)
        at = next((i for i, p in enumerate(parameters)
                   if p.kind is inspect.Parameter.VAR_KEYWORD), len(parameters))
        parameters.insert(at, flag)
        command = _trusting(command)
    command.__signature__ = signature.replace(parameters=parameters)
    return command


def _trusting(command):
    """`command` without a trust_remote_code parameter, run inside `trusting_remote_code`
    when the flag is given (left to $MLMKIT_TRUST_REMOTE_CODE when it is not)."""
    import contextlib
    import functools

    @functools.wraps(command)
    def run(*args, trust_remote_code: bool = False, **kwargs):
        from mlmkit.models.load import trusting_remote_code

        with trusting_remote_code() if trust_remote_code else contextlib.nullcontext():
            return command(*args, **kwargs)

    return run

"""`mlmkit generate`: continue prompts by iterative unmasking (diffusion samplers).

The sampler flags are the fields of `mlmkit.options.sampler.Sampling`, shared with
`mlmkit infill`; they are checked (as `SamplerOptions`) before the model loads.
"""

from __future__ import annotations

import typer

import mlmkit
from mlmkit.cli.options import ENCODING, ENCODING_ERRORS, JSON, OUTPUT, Runtime, command
from mlmkit.core import checks
from mlmkit.core.output import check_output_path, open_output, same_file
from mlmkit.core.progress import console, stderr_is_terminal, warn
from mlmkit.core.records import check_input_file, display_name, read_texts
from mlmkit.core.results import dumps
from mlmkit.errors import InvalidArgument, InvalidData
from mlmkit.options import as_keywords
from mlmkit.options.sampler import Sampling

SHORT_HELP = "Continue prompts by iterative unmasking (MDLM / LLaDA samplers), any MLM."
EXAMPLE = """
Examples:

  mlmkit generate ./tiny-bert "Return the" --length 16 --steps 16 --sampler confidence

  mlmkit generate ./tiny-bert --file - --length 8 --json < prompts.txt
"""

SHOW = typer.Option(False, "--show", help="Redraw the canvas on stderr at each step (when "
                    "stderr is a terminal; otherwise only the final text is printed).")
TRACE = typer.Option(None, "--trace", help="Write every step's canvas as JSON lines to this "
                     "file.")


def parse_fixes(fixes: list[str]) -> dict[int, str]:
    """`--fix 3=the` pairs as {position: text}."""
    constraints = {}
    for fix in fixes:
        position, sep, text = fix.partition("=")
        if not sep or not position.strip().isdigit() or not text:
            raise InvalidArgument(f"--fix {fix!r} is not POSITION=TEXT: write e.g. --fix 3=the "
                                  f"(position 0 is the first generated token)")
        constraints[int(position)] = text
    return constraints


def read_inputs(path: str, what: str, encoding: str, errors: str,
                keep_blank: bool) -> list[str]:
    """The texts of a prompts/templates file (`-`: standard input): a line each, or the
    `text` field of each row of a .jsonl/.tsv/.csv file (as the file's name says); an empty
    file is an error. Blank ones are kept (an empty prompt) or dropped, and said."""
    texts = [text for _, text in read_texts(path, None, encoding, errors)]
    kept = [text for text in texts if keep_blank or text.strip()]
    if not kept:
        raise InvalidData(f"{what} file {display_name(path)} is empty: write one per line")
    if len(kept) < len(texts):
        warn(f"{len(texts) - len(kept)} blank line(s) of {display_name(path)} skipped: one "
             f"output per {what[:-1]}, not per line")
    return kept


def step_hooks(tokenizer, n_rows: int, show: bool, trace):
    """(the live view or None, the trace recorder or None, one on_step callback or None).

    The live view draws only when stderr is a terminal: no cursor codes in a pipe or log.
    """
    view = recorder = None
    if show and stderr_is_terminal():
        from mlmkit.generation.live import LiveView  # not loaded by the package

        view = LiveView(tokenizer, n_rows, console=console())
    if trace is not None:
        from mlmkit.generation.trace import TraceRecorder  # not loaded by the package

        recorder = TraceRecorder(tokenizer)
    hooks = [hook for hook in (view, recorder) if hook is not None]
    if not hooks:
        return view, recorder, None

    def on_step(event):
        for hook in hooks:
            hook(event)

    return view, recorder, on_step


def run_unmasking(method: str, model: str, *, texts: list[str], texts_file: str | None,
                  what: str,
                  keep_blank: bool, sampling: Sampling, check, output, trace, show, encoding,
                  encoding_errors, runtime: Runtime, **call_kwargs):
    """The body `generate` and `infill` share: check the sampler options, the command's own
    arguments (`check()`), the input and output files, all before the model loads; read the
    texts (TEXT... or one per line of TEXTS_FILE); load the model and run its `method`
    (`mlm.generate(texts, ...)`) under the live view and the trace. Returns (results, the
    input files)."""
    mlmkit.generation.SamplerOptions(**as_keywords(sampling))
    check()
    inputs = [texts_file] if texts_file is not None else []
    if texts_file is not None:
        check_input_file(texts_file, f"{what} file")
    check_output_path(output, inputs=inputs)
    if trace is not None:
        check_output_path(trace, inputs=inputs, what="trace")
        if same_file(trace, output):
            raise InvalidArgument(f"--trace {trace!r} is also the output (-o): the results "
                                  "would overwrite the trace; give the trace another file")
        if str(trace) == "-" and str(output) == "-":
            raise InvalidArgument("--trace - and the results (-o -, the default) would both "
                                  "go to standard output, mixed: give --trace or -o a file")
    texts = read_inputs(texts_file, what, encoding, encoding_errors,
                        keep_blank=keep_blank) if texts_file is not None else list(texts)
    mlm = mlmkit.load(model, **runtime.load_keywords())
    call = getattr(mlm, method)
    view, recorder, on_step = step_hooks(mlm.tokenizer, len(texts), show, trace)
    kwargs = dict(as_keywords(sampling), progress=False if show else None, on_step=on_step,
                  **call_kwargs)
    if view is not None:
        with view:
            results = call(texts, **kwargs)
    else:
        results = call(texts, **kwargs)
    if recorder is not None:
        recorder.save(trace, inputs=inputs)
    return results, inputs


def generate_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    prompts: list[str] = typer.Argument(None, metavar="PROMPT", help="Texts to continue, "
                                        "one output each (none: generate from nothing)."),
    prompts_file: str = typer.Option(None, "--file", help="Read the prompts from a file, one "
                                     "per line (a blank line is the empty prompt); - reads "
                                     "standard input."),
    length: int = typer.Option(64, help="Tokens to generate."),
    fix: list[str] = typer.Option([], "--fix", help="Fix the token at POSITION (0: the "
                                  "first generated one) to TEXT; repeatable."),
    *, sampling: Sampling, show: bool = SHOW,
    trace: str = TRACE, output: str = OUTPUT, as_json: bool = JSON, encoding: str = ENCODING,
    encoding_errors: str = ENCODING_ERRORS, runtime: Runtime,
) -> None:
    constraints = {}

    def check() -> None:
        checks.count("length", length, 1)
        constraints.update(parse_fixes(fix))
        if prompts_file is not None and prompts:
            raise InvalidArgument("give prompts or --file, not both")

    results, inputs = run_unmasking(
        "generate", model, texts=prompts or [""], texts_file=prompts_file, what="prompts",
        keep_blank=True, sampling=sampling, check=check, output=output, trace=trace,
        show=show, encoding=encoding, encoding_errors=encoding_errors, runtime=runtime,
        length=length, constraints=constraints)
    with open_output(output, inputs=inputs) as handle:
        for result in results:
            handle.write((dumps(result) if as_json else result.full_text) + "\n")


def register(app: typer.Typer) -> None:
    command(
        app, "generate", generate_command,
        short_help=SHORT_HELP,
        help=SHORT_HELP + "\n\nA canvas of [MASK] tokens after the prompt is revealed over "
        "--steps steps by the chosen sampler, optionally in blocks, with guidance and fixed "
        "positions; a generated [SEP]/EOS ends the text. Prints one text per prompt (--json: "
        "one JSON object per prompt)." + EXAMPLE,
    )

"""`mlmkit generate`: continue prompts by iterative unmasking (diffusion samplers).

The sampler flags (`STEPS` ... `CACHE`) are shared with `mlmkit infill`; together they are
`mlmkit.generation.options.SamplerOptions`, built (and checked) before the model loads.
"""

from __future__ import annotations

import typer

from mlmkit.cli_options import shared_options
from mlmkit.errors import InvalidArgument

SHORT_HELP = "Continue prompts by iterative unmasking (MDLM / LLaDA samplers), any MLM."
EXAMPLE = """
Examples:

  mlmkit generate ./tiny-bert --prompt "Return the" --length 16 --steps 16 --sampler confidence

  mlmkit generate ./tiny-bert --prompts-file - --length 8 --json < prompts.txt
"""

PANEL = "Sampling"
STEPS = typer.Option(None, "--steps", help="Sampler steps in all (default: one token per "
                     "step). confidence/random: at most one per mask; ancestral: ≤ 10,000.",
                     rich_help_panel=PANEL)
SAMPLER = typer.Option("confidence", "--sampler", help="ancestral (MDLM), confidence (LLaDA) "
                       "or random.", rich_help_panel=PANEL)
CONFIDENCE = typer.Option("prob", "--confidence", help="Confidence sampler: prob, margin or "
                          "entropy.", rich_help_panel=PANEL)
TEMPERATURE = typer.Option(1.0, "--temperature", help="≥ 0: 0 = argmax; 1 = the model's "
                           "distribution; higher is flatter.", rich_help_panel=PANEL)
TOP_K = typer.Option(None, "--top-k", help="Sample among the k likeliest tokens.",
                     rich_help_panel=PANEL)
TOP_P = typer.Option(None, "--top-p", help="Nucleus sampling mass, in (0, 1].",
                     rich_help_panel=PANEL)
BLOCK_LENGTH = typer.Option(None, "--block-length", help="Semi-autoregressive blocks of this "
                            "many masks, left to right; in generate it must divide --length (in infill the last "
                            "block may be shorter).",
                            rich_help_panel=PANEL)
CFG_SCALE = typer.Option(0.0, "--cfg-scale", help="Classifier-free guidance weight ≥ 0 "
                         "(prompt masking).", rich_help_panel=PANEL)
CACHE = typer.Option(True, "--cache/--no-cache", help="Skip the model call when a step "
                     "revealed nothing (exact).", rich_help_panel=PANEL)
FAST = "Fast sampling"
REVEAL = typer.Option("count", "--reveal", help="Masks revealed per step: count (the fixed "
                      "--steps schedule), threshold (every prediction above tau, ≥ 1; "
                      "Fast-dLLM), factor (Fast-dLLM's factor rule) or entropy-bound "
                      "(EB-sampler). Adaptive ones need --sampler confidence.",
                      rich_help_panel=FAST)
THRESHOLD = typer.Option(None, "--threshold", help="tau in (0, 1] of --reveal threshold "
                         "(default 0.9).", rich_help_panel=FAST)
FACTOR = typer.Option(None, "--factor", help="f > 0 of --reveal factor (default 1.0).",
                      rich_help_panel=FAST)
ENTROPY_BOUND = typer.Option(None, "--entropy-bound", help="gamma ≥ 0 (nats) of --reveal "
                             "entropy-bound (default 0.1).", rich_help_panel=FAST)
MIN_GAP = typer.Option(None, "--min-gap", help="With an adaptive --reveal: masks revealed in "
                       "one step lie at least this many positions apart, the likeliest of "
                       "each stretch first (default: no spacing).", rich_help_panel=FAST)
REMASK = typer.Option(None, "--remask", help="ReMDM remasking of revealed tokens: cap, "
                      "rescale or loop.", rich_help_panel=FAST)
SIGMA = typer.Option(None, "--sigma", help="eta in (0, 1] of --remask (defaults: cap 0.04, "
                     "rescale 0.5, loop 0.1).", rich_help_panel=FAST)
REMASK_STEPS = typer.Option(None, "--remask-steps", help="--remask loop: loop steps per "
                            "block (default: half the block's steps).", rich_help_panel=FAST)
EDIT = typer.Option(None, "--edit", help="Replace a revealed token when the model gives "
                    "another more than this probability, in (0, 1).", rich_help_panel=FAST)
MAX_STEPS = typer.Option(None, "--max-steps", help="Cap on all steps with --remask/--edit "
                         "(default: twice the planned steps).", rich_help_panel=FAST)
BLOCK_CACHE = typer.Option(False, "--block-cache/--no-block-cache", help="Reuse keys and "
                           "values outside the active block (approximate; needs "
                           "--block-length; BERT, RoBERTa, ModernBERT).", rich_help_panel=FAST)
SHOW = typer.Option(False, "--show", help="Redraw the canvas on stderr at each step (when "
                    "stderr is a terminal; otherwise only the final text is printed).")
TRACE = typer.Option(None, "--trace", help="Write every step's canvas as JSON lines to this "
                     "file.")

# The sampler's options, shared by generate and infill (see cli_options.shared_options).
SAMPLER_OPTIONS = {
    "steps": (int, STEPS), "sampler": (str, SAMPLER), "confidence": (str, CONFIDENCE),
    "temperature": (float, TEMPERATURE), "top_k": (int, TOP_K), "top_p": (float, TOP_P),
    "block_length": (int, BLOCK_LENGTH), "cfg_scale": (float, CFG_SCALE),
    "cache": (bool, CACHE), "reveal": (str, REVEAL), "threshold": (float, THRESHOLD),
    "factor": (float, FACTOR), "entropy_bound": (float, ENTROPY_BOUND),
    "min_gap": (int, MIN_GAP),
    "remask": (str, REMASK), "sigma": (float, SIGMA), "remask_steps": (int, REMASK_STEPS),
    "edit": (float, EDIT), "max_steps": (int, MAX_STEPS), "block_cache": (bool, BLOCK_CACHE),
    "show": (bool, SHOW), "trace": (str, TRACE),
}

SAMPLING_FIELDS = ("steps", "sampler", "confidence", "temperature", "top_k", "top_p",
                   "block_length", "cfg_scale", "cache", "reveal", "threshold", "factor",
                   "entropy_bound", "min_gap", "remask", "sigma", "remask_steps", "edit",
                   "max_steps", "block_cache")
"""The sampler flags, passed to generate/infill (and SamplerOptions) by name."""


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
    """The lines of a prompts/templates file (`-`: standard input); an empty file is an
    error. Blank lines are kept (an empty prompt) or dropped."""
    from mlmkit.core.records import display_name, read_lines
    from mlmkit.errors import InvalidData

    lines = [line for _, line in read_lines(path, encoding, errors)
             if keep_blank or line.strip()]
    if not lines:
        raise InvalidData(f"{what} file {display_name(path)} is empty: write one per line")
    return lines


def step_hooks(tokenizer, n_rows: int, show: bool, trace):
    """(the live view or None, the trace recorder or None, one on_step callback or None).

    The live view draws only when stderr is a terminal: no cursor codes in a pipe or log.
    """
    from mlmkit.core.progress import console, stderr_is_terminal

    view = recorder = None
    if show and stderr_is_terminal():
        from mlmkit.generation.live import LiveView

        view = LiveView(tokenizer, n_rows, console=console())
    if trace is not None:
        from mlmkit.generation.trace import TraceRecorder

        recorder = TraceRecorder(tokenizer)
    hooks = [hook for hook in (view, recorder) if hook is not None]
    if not hooks:
        return view, recorder, None

    def on_step(event):
        for hook in hooks:
            hook(event)

    return view, recorder, on_step


def run_unmasking(call, model: str, *, text: str, texts_file: str | None, what: str,
                  keep_blank: bool, sampling: dict, check, output, trace, show, encoding,
                  encoding_errors, device, precision, threads, trust_remote_code, batch_tokens,
                  seed, **call_kwargs):
    """The body `generate` and `infill` share: check the sampler options, the command's own
    arguments (`check()`), the input and output files, all before the model loads; read the
    texts (TEXT or one per line of TEXTS_FILE); run `call(mlm, texts, ...)` under the live
    view and the trace. Returns (results, the input files)."""
    from mlmkit.core.output import check_output_path, same_file
    from mlmkit.core.records import check_input_file
    from mlmkit.engine.batching import check_budget
    from mlmkit.generation.options import SamplerOptions
    from mlmkit.generation.setup import open_model

    SamplerOptions(seed=seed, **sampling)
    check()
    check_budget(batch_tokens)
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
                        keep_blank=keep_blank) if texts_file is not None else [text]
    mlm, precision = open_model(model, device=device, precision=precision, threads=threads,
                                trust_remote_code=trust_remote_code or None)
    view, recorder, on_step = step_hooks(mlm.tokenizer, len(texts), show, trace)
    kwargs = dict(sampling, seed=seed, batch_tokens=batch_tokens, precision=precision,
                  progress=False if show else None, on_step=on_step, **call_kwargs)
    if view is not None:
        with view:
            results = call(mlm, texts, **kwargs)
    else:
        results = call(mlm, texts, **kwargs)
    if recorder is not None:
        recorder.save(trace, inputs=inputs)
    return results, inputs


@shared_options(extra=SAMPLER_OPTIONS)
def generate_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    prompt: str = typer.Option("", help="Text to continue (may be empty)."),
    prompts_file: str = typer.Option(None, "--prompts-file", help="One prompt per line "
                                     "(batch generation); - reads standard input."),
    length: int = typer.Option(64, help="Tokens to generate."),
    fix: list[str] = typer.Option([], "--fix", help="POSITION=TEXT: fix generated tokens."),
    *, steps, sampler, confidence, temperature, top_k, top_p, block_length, cfg_scale, cache,
    reveal, threshold, factor, entropy_bound, min_gap, remask, sigma, remask_steps, edit,
    max_steps,
    block_cache, trust_remote_code,
    show, trace, output, as_json, encoding, encoding_errors, device, precision, threads, batch_tokens, seed,
) -> None:
    from mlmkit.core import checks
    from mlmkit.core.output import open_output
    from mlmkit.core.results import dumps
    from mlmkit.generation import generate

    sampling = {name: value for name, value in locals().items() if name in SAMPLING_FIELDS}
    constraints = {}

    def check() -> None:
        checks.count("length", length, 1)
        constraints.update(parse_fixes(fix))
        if prompts_file is not None and prompt:
            raise InvalidArgument("give --prompt or --prompts-file, not both")

    results, inputs = run_unmasking(
        generate, model, text=prompt, texts_file=prompts_file, what="prompts", keep_blank=True,
        sampling=sampling, check=check, output=output, trace=trace, show=show,
        encoding=encoding, encoding_errors=encoding_errors, device=device,
        precision=precision, threads=threads, trust_remote_code=trust_remote_code,
        batch_tokens=batch_tokens, seed=seed, length=length, constraints=constraints)
    with open_output(output, inputs=inputs) as handle:
        for result in results:
            handle.write((dumps(result) if as_json else result.full_text) + "\n")


def register(app: typer.Typer) -> None:
    app.command(
        "generate",
        short_help=SHORT_HELP,
        help=SHORT_HELP + "\n\nA canvas of [MASK] tokens after the prompt is revealed over "
        "--steps steps by the chosen sampler, optionally in blocks, with guidance and fixed "
        "positions; a generated [SEP]/EOS ends the text. Prints one text per prompt (--json: "
        "one JSON object per prompt)." + EXAMPLE,
    )(generate_command)

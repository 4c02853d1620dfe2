"""`mlmkit infill`: fill the [MASK] spans of a template by iterative unmasking."""

from __future__ import annotations

import typer

from mlmkit.cli_options import shared_options
from mlmkit.commands.generate import SAMPLER_OPTIONS, read_inputs, step_hooks

SHORT_HELP = "Fill the [MASK] spans of a template by iterative unmasking."
EXAMPLE = """
Examples:

  mlmkit infill ./tiny-bert "Return the [MASK:2] of the [MASK:1-3]." --temperature 0

  mlmkit infill ./tiny-bert --templates-file - --json < templates.txt
"""


@shared_options(extra=SAMPLER_OPTIONS)
def infill_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    template: str = typer.Argument(None, help="Text with [MASK], [MASK:n] or [MASK:a-b] spans."),
    templates_file: str = typer.Option(None, "--templates-file", help="One template per line "
                                       "(blank lines skipped); - reads standard input."),
    max_candidates: int = typer.Option(64, "--max-candidates",
                                       help="Most span-length combinations to try."),
    *, steps, sampler, confidence, temperature, top_k, top_p, block_length, cfg_scale, cache,
    reveal, threshold, factor, entropy_bound, remask, sigma, remask_steps, edit, max_steps,
    block_cache, trust_remote_code,
    show, trace, output, as_json, encoding, encoding_errors, device, precision, threads, batch_tokens, seed,
) -> None:
    from mlmkit.errors import InvalidArgument
    from mlmkit.generate import infill
    from mlmkit.generate.options import SamplerOptions
    from mlmkit.generate.setup import open_model
    from mlmkit.runtime import checks
    from mlmkit.runtime.batching import check_budget
    from mlmkit.runtime.output import check_output_path, open_output
    from mlmkit.runtime.progress import status
    from mlmkit.runtime.records import check_input_file
    from mlmkit.runtime.results import dumps

    SamplerOptions(steps=steps, sampler=sampler, confidence=confidence, temperature=temperature,
                   top_k=top_k, top_p=top_p, block_length=block_length, cfg_scale=cfg_scale,
                   seed=seed, cache=cache, **(fast := dict(
                       reveal=reveal, threshold=threshold, factor=factor,
                       entropy_bound=entropy_bound, remask=remask, sigma=sigma,
                       remask_steps=remask_steps, edit=edit, max_steps=max_steps,
                       block_cache=block_cache)))
    checks.count("max_candidates", max_candidates, 1, 10_000)
    check_budget(batch_tokens)
    if (template is None) == (templates_file is None):
        raise InvalidArgument("give either a TEMPLATE argument or --templates-file, not both "
                              "or neither")
    inputs = [templates_file] if templates_file is not None else []
    if templates_file is not None:
        check_input_file(templates_file, "templates file")
    check_output_path(output, inputs=inputs)
    if trace is not None:
        check_output_path(trace, inputs=inputs, what="trace")
    templates = read_inputs(templates_file, "templates", encoding, encoding_errors,
                            keep_blank=False) if templates_file is not None else [template]
    mlm, precision = open_model(model, device=device, precision=precision, threads=threads,
                                trust_remote_code=trust_remote_code or None)
    view, recorder, on_step = step_hooks(mlm.tokenizer, len(templates), show, trace)
    kwargs = dict(steps=steps, sampler=sampler, confidence=confidence, temperature=temperature,
                  top_k=top_k, top_p=top_p, block_length=block_length, cfg_scale=cfg_scale,
                  seed=seed, cache=cache, max_candidates=max_candidates,
                  batch_tokens=batch_tokens, precision=precision,
                  progress=False if show else None, on_step=on_step, **fast)
    if view is not None:
        with view:
            results = infill(mlm, templates, **kwargs)
    else:
        results = infill(mlm, templates, **kwargs)
    if recorder is not None:
        recorder.save(trace, inputs=inputs)
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
    app.command(
        "infill",
        short_help=SHORT_HELP,
        help=SHORT_HELP + "\n\n[MASK] is one token, [MASK:n] n tokens, [MASK:a-b] every "
        "length from a to b (the best by PLL per token wins). Prints one filled text per "
        "template (--json: one JSON object per template, with every candidate)." + EXAMPLE,
    )(infill_command)

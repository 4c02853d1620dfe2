"""`mlmkit infill`: fill the [MASK] spans of a template by iterative unmasking."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from mlmkit.commands.generate import read_lines

EXAMPLE = """
Example:

  mlmkit infill ./tiny-bert "Return the [MASK:2] of the [MASK:1-3]." --temperature 0
"""


def infill_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    template: str = typer.Argument(None, help="Text with [MASK], [MASK:n] or [MASK:a-b] spans."),
    templates_file: Path = typer.Option(None, "--templates-file",
                                        help="One template per line."),
    steps: int = typer.Option(None, help="Sampler steps (default: the number of masks)."),
    sampler: str = typer.Option("confidence", help="ancestral, confidence or random."),
    confidence: str = typer.Option("prob", help="Confidence sampler: prob, margin or entropy."),
    temperature: float = typer.Option(1.0, help="0 = argmax; 1 = the model's distribution."),
    top_k: int = typer.Option(None, "--top-k", help="Sample among the k likeliest tokens."),
    top_p: float = typer.Option(None, "--top-p", help="Nucleus sampling mass."),
    block_length: int = typer.Option(None, "--block-length",
                                     help="Semi-autoregressive blocks of this many masks."),
    cfg_scale: float = typer.Option(0.0, "--cfg-scale",
                                    help="Classifier-free guidance weight (context masking)."),
    max_candidates: int = typer.Option(64, "--max-candidates",
                                       help="Most span-length combinations to try."),
    seed: int = typer.Option(0, help="Random seed (same seed, same output)."),
    batch_size: int = typer.Option(16, "--batch-size", help="Candidates per batch."),
    device: str = typer.Option("auto", help="cpu, cuda, ... (auto: cuda when available)."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    show: bool = typer.Option(False, "--show", help="Show the canvas as it is unmasked."),
    trace: Path = typer.Option(None, "--trace", help="Write every step's canvas as JSON lines."),
) -> None:
    from mlmkit.errors import MlmkitError
    from mlmkit.generate import infill
    from mlmkit.generate.live import LiveView
    from mlmkit.generate.trace import TraceRecorder
    from mlmkit.models import load_mlm

    if (template is None) == (templates_file is None):
        raise MlmkitError("give either a TEMPLATE argument or --templates-file, not both "
                          "or neither")
    templates = read_lines(templates_file, "templates") if templates_file else [template]
    mlm = load_mlm(model, device=device)
    hooks = []
    recorder = TraceRecorder(mlm.tokenizer) if trace else None
    view = LiveView(mlm.tokenizer, len(templates)) if show else None
    hooks = [hook for hook in (recorder, view) if hook is not None]

    def on_step(event):
        for hook in hooks:
            hook(event)

    kwargs = dict(steps=steps, sampler=sampler, confidence=confidence, temperature=temperature,
                  top_k=top_k, top_p=top_p, block_length=block_length, cfg_scale=cfg_scale,
                  seed=seed, max_candidates=max_candidates, batch_size=batch_size,
                  on_step=on_step if hooks else None)
    if view:
        with view:
            results = infill(mlm, templates, **kwargs)
    else:
        results = infill(mlm, templates, **kwargs)
    if recorder:
        recorder.save(trace)
    if as_json:
        records = [asdict(r) for r in results]
        typer.echo(json.dumps(records if templates_file else records[0], ensure_ascii=False))
        return
    console = Console()
    for result in results:
        console.print(escape(result.text))
        if len(result.candidates) > 1:
            for candidate in result.candidates:
                console.print(f"  [dim]lengths {candidate.lengths}: PLL/token "
                              f"{candidate.score:.3f}  {escape(' | '.join(candidate.spans))}[/dim]")


def register(app: typer.Typer) -> None:
    app.command(
        "infill",
        help="Fill the [MASK] spans of a template by iterative unmasking; [MASK:a-b] tries "
        "each length and keeps the best by PLL per token." + EXAMPLE,
    )(infill_command)

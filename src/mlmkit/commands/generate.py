"""`mlmkit generate`: continue prompts by iterative unmasking (diffusion samplers)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from mlmkit.errors import MlmkitError

EXAMPLE = """
Example:

  mlmkit generate ./tiny-bert --prompt "Return the" --length 16 --steps 16 --sampler confidence
"""


def read_lines(path: Path, what: str) -> list[str]:
    """The lines of a prompts/templates file (an error when it is missing or empty)."""
    if not path.is_file():
        raise MlmkitError(f"{what} file {str(path)!r} does not exist: give a text file, "
                          f"one per line")
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise MlmkitError(f"{what} file {str(path)!r} is empty: write one per line")
    return lines


def parse_fixes(fixes: list[str]) -> dict[int, str]:
    """`--fix 3=the` pairs as {position: text}."""
    constraints = {}
    for fix in fixes:
        position, sep, text = fix.partition("=")
        if not sep or not position.strip().isdigit() or not text:
            raise MlmkitError(f"--fix {fix!r} is not POSITION=TEXT: write e.g. --fix 3=the "
                              f"(position 0 is the first generated token)")
        constraints[int(position)] = text
    return constraints


def generate_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    prompt: str = typer.Option("", help="Text to continue (may be empty)."),
    prompts_file: Path = typer.Option(None, "--prompts-file",
                                      help="One prompt per line (batch generation)."),
    length: int = typer.Option(64, help="Tokens to generate."),
    steps: int = typer.Option(None, help="Sampler steps (default: --length)."),
    sampler: str = typer.Option("confidence", help="ancestral, confidence or random."),
    confidence: str = typer.Option("prob", help="Confidence sampler: prob, margin or entropy."),
    temperature: float = typer.Option(1.0, help="0 = argmax; 1 = the model's distribution."),
    top_k: int = typer.Option(None, "--top-k", help="Sample among the k likeliest tokens."),
    top_p: float = typer.Option(None, "--top-p", help="Nucleus sampling mass."),
    block_length: int = typer.Option(None, "--block-length",
                                     help="Semi-autoregressive blocks of this many tokens."),
    cfg_scale: float = typer.Option(0.0, "--cfg-scale",
                                    help="Classifier-free guidance weight (prompt masking)."),
    fix: list[str] = typer.Option([], "--fix", help="POSITION=TEXT: fix generated tokens."),
    seed: int = typer.Option(0, help="Random seed (same seed, same output)."),
    cache: bool = typer.Option(True, help="Reuse predictions when a step reveals nothing."),
    batch_size: int = typer.Option(16, "--batch-size", help="Prompts per batch."),
    device: str = typer.Option("auto", help="cpu, cuda, ... (auto: cuda when available)."),
    as_json: bool = typer.Option(False, "--json", help="Print the generations as JSON."),
    show: bool = typer.Option(False, "--show", help="Show the canvas as it is unmasked."),
    trace: Path = typer.Option(None, "--trace", help="Write every step's canvas as JSON lines."),
) -> None:
    from mlmkit.generate import generate
    from mlmkit.generate.live import LiveView
    from mlmkit.generate.trace import TraceRecorder
    from mlmkit.models import load_mlm

    prompts = read_lines(prompts_file, "prompts") if prompts_file else [prompt]
    mlm = load_mlm(model, device=device)
    hooks = []
    recorder = TraceRecorder(mlm.tokenizer) if trace else None
    if recorder:
        hooks.append(recorder)
    view = LiveView(mlm.tokenizer, len(prompts)) if show else None
    if view:
        hooks.append(view)

    def on_step(event):
        for hook in hooks:
            hook(event)

    kwargs = dict(length=length, steps=steps, sampler=sampler, confidence=confidence,
                  temperature=temperature, top_k=top_k, top_p=top_p, block_length=block_length,
                  cfg_scale=cfg_scale, constraints=parse_fixes(fix), seed=seed, cache=cache,
                  batch_size=batch_size, on_step=on_step if hooks else None)
    if view:
        with view:
            results = generate(mlm, prompts, **kwargs)
    else:
        results = generate(mlm, prompts, **kwargs)
    if recorder:
        recorder.save(trace)
    console = Console()
    if as_json:
        records = [asdict(r) for r in results]
        typer.echo(json.dumps(records if prompts_file else records[0], ensure_ascii=False))
        return
    for result in results:
        head, full = result.prompt, result.full_text
        if head and full.startswith(head):
            console.print(f"[bold]{escape(head)}[/bold]{escape(full[len(head):])}")
        else:
            console.print(escape(full))
    if trace:
        Console(stderr=True).print(f"[dim]trace written to {trace}[/dim]")


def register(app: typer.Typer) -> None:
    app.command(
        "generate",
        help="Continue a prompt by iterative unmasking (MDLM / LLaDA samplers) with any "
        "masked LM." + EXAMPLE,
    )(generate_command)

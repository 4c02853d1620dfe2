"""`mlmkit score`: pseudo-log-likelihoods of a file of texts, streamed to jsonl."""

from __future__ import annotations

import warnings
from pathlib import Path

import typer
from rich.console import Console

EXAMPLE = """
Example:

  mlmkit score ./tiny-bert sentences.txt -o scores.jsonl --metric pll_word_l2r --per-word

Under torchrun the lines are split across ranks and merged back in order:

  torchrun --standalone --nproc_per_node 2 -m mlmkit score ./tiny-bert sentences.txt -o scores.jsonl
"""


def score_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    input_file: Path = typer.Argument(..., help="A text per line, or jsonl (see --field)."),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write the jsonl scores."),
    field: str = typer.Option(None, help="jsonl input: the field holding the text."),
    metric: str = typer.Option("pll", help="pll or pll_word_l2r."),
    per_token: bool = typer.Option(False, "--per-token", help="Add each token's score."),
    per_word: bool = typer.Option(False, "--per-word", help="Add each word's score."),
    precision: str = typer.Option("fp32", help="fp32 or bf16 (autocast)."),
    batch_tokens: int = typer.Option(None, "--batch-tokens",
                                     help="Padded tokens per batch (default: fits ~2 GB)."),
    stride: int = typer.Option(1, help="Long texts: windows start at multiples of this."),
    chunk_texts: int = typer.Option(2048, "--chunk-texts", help="Texts read per chunk."),
    device: str = typer.Option("auto", help="cpu, cuda, ... (auto: cuda when available)."),
) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from mlmkit.models import load_mlm
    from mlmkit.scoring.distributed import current_shard, device_for, finish
    from mlmkit.scoring.stream import count_lines, read_texts, score_file

    if not input_file.is_file():
        next(read_texts(input_file, field), None)  # raises the named error
    shard = current_shard()
    try:
        mlm = load_mlm(model, device=device_for(shard, device))
        total = count_lines(input_file)
        err = Console(stderr=True)
        columns = (TextColumn("scoring"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[rate]} texts/s"))
        with Progress(*columns, console=err, transient=True,
                      disable=not shard.is_main) as bar:
            task = bar.add_task("score", total=-(-total // shard.world), rate="-")

            def advance(done: int) -> None:
                elapsed = bar.tasks[0].elapsed or 1e-9
                bar.update(task, completed=done, rate=f"{done / elapsed:,.1f}")

            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                summary = score_file(
                    mlm, input_file, output, field=field, metric=metric, per_token=per_token,
                    per_word=per_word, batch_tokens=batch_tokens, precision=precision,
                    stride=stride, chunk_texts=chunk_texts, shard=shard, on_progress=advance,
                )
        for warning in caught:
            err.print(f"[yellow]warning: {warning.message}[/yellow]")
        if shard.is_main:
            err.print(f"scored {total} line(s) of {input_file} → {output} "
                      f"({summary.texts_per_second:,.1f} texts/s"
                      + (f" per rank, {shard.world} ranks" if shard.world > 1 else "") + ")")
    finally:
        finish(shard)


def register(app: typer.Typer) -> None:
    app.command(
        "score",
        help="Score texts with a masked LM: sentence PLL (or PLL-word-l2r), pseudo-perplexity, "
        "optional token and word scores with character offsets. Streams any file size; long "
        "texts use sliding windows; empty lines get a null score." + EXAMPLE,
    )(score_command)

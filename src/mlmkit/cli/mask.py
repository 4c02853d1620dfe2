"""`mlmkit mask stats` and `mlmkit mask preview`: corpus statistics for informed masking, and
a look at what a masking policy does to a text."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

import mlmkit
from mlmkit.cli.options import SEED, command_group, subcommand
from mlmkit.core import checks
from mlmkit.core.progress import Progress, status
from mlmkit.errors import MlmkitError, PathError

mask_app = command_group(help="""Masking policies: corpus statistics and previews.

Example:

  mlmkit mask preview ./tok "Return the number of items." --policy span --seed 1
""", short_help="Masking policies: corpus statistics and previews.", no_args_is_help=True)

STATS_EXAMPLE = """
Example:

  mlmkit mask stats python-docs ./tok -o ./mask-stats --min-count 5

then use it: build_policy("pmi", tokenizer, stats="./mask-stats")
"""

PREVIEW_EXAMPLE = """
Example:

  mlmkit mask preview ./tok "Return the number of items in a container." --policy span --seed 1

--policy takes a preset (bert, whole_word, span, pmi, diffusion, mask40, upmlm, film, ...),
an inline mapping ('{units: whole_word, rate: 0.4}') or a .yaml/.json file.
"""


def load_tokenizer(name: str):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as error:
        raise MlmkitError(f"cannot load tokenizer {name!r}: {error}. Pass a directory "
                          "written by save_pretrained or `mlmkit tokenizer`.") from error


@subcommand(mask_app, "stats", help="Compute token, document, n-gram PMI and informativeness "
                  "statistics of a corpus for a tokenizer, and save them." + STATS_EXAMPLE,
                  short_help="Corpus statistics for informed masking (pmi, frequency, "
                  "tfidf, bm25 / rom, informask).")
def stats_command(
    corpus: str = typer.Argument(..., help="python-docs, a file, a directory or a glob."),
    tokenizer: str = typer.Argument(..., help="Tokenizer directory or hub name."),
    output: Path = typer.Option(..., "-o", "--output", help="Directory to write the stats to."),
    text_field: str = typer.Option("text", "--text-field", help="jsonl/csv/parquet: the field "
                                   "holding the text."),
    max_n: int = typer.Option(5, "--max-n", help="Longest collocation, in tokens (2..5)."),
    min_count: int = typer.Option(5, "--min-count", help="Fewest occurrences of a collocation."),
    min_pmi: float = typer.Option(0.0, "--min-pmi", help="Lowest PMI of a kept collocation."),
    max_ngrams: int = typer.Option(200_000, "--max-ngrams", help="Collocations kept (best PMI)."),
    window: int = typer.Option(5, help="InforMask: context window on each side, in tokens."),
    show: int = typer.Option(15, help="Print this many top collocations."),
) -> None:
    checks.count("show", show, 0)
    if output.exists() and not output.is_dir():
        raise PathError(f"output {str(output)!r} is a file: mask stats writes a directory; "
                        "choose another path")
    tok = load_tokenizer(tokenizer)
    console = Console()
    with Progress("tokenizing", total=None, unit="docs") as bar:
        documents = mlmkit.corpus.read_corpus(corpus, field=text_field)
        stats = mlmkit.masking.compute_stats(documents, tok, max_n=max_n, min_count=min_count,
                                             min_pmi=min_pmi, max_ngrams=max_ngrams,
                                             window=window, progress=bar.advance)
    mlmkit.masking.stats.save_stats(stats, output)
    status(f"wrote {output}: {stats.n_docs:,} documents, {stats.n_tokens:,} tokens, "
           f"{len(stats.ngram_pmi):,} collocations")
    if show > 0 and len(stats.ngram_pmi):
        table = Table(title="top collocations by PMI")
        for column in ("n-gram", "PMI", "count"):
            table.add_column(column)
        for text, pmi, count in stats.top_collocations(tok, show):
            table.add_row(text, f"{pmi:.2f}", f"{count:,}")
        console.print(table)


@subcommand(mask_app, "preview", help="Mask a text with a policy and show the result and the "
                  "labels." + PREVIEW_EXAMPLE,
                  short_help="Mask a text with a policy and show the result and the labels.")
def preview_command(
    tokenizer: str = typer.Argument(..., help="Tokenizer directory or hub name."),
    text: str = typer.Argument(..., help="The text to mask."),
    policy: str = typer.Option("bert", help="Preset name, inline YAML mapping or a YAML file."),
    seed: int = SEED,
    step: int = typer.Option(0, help="Training step (schedules, per-step randomness)."),
    stats: Path = typer.Option(None, help="Statistics from `mlmkit mask stats` (pmi, "
                               "frequency, tfidf, bm25 / rom, informask need them)."),
) -> None:
    from mlmkit.masking.preview import preview_masking

    tok = load_tokenizer(tokenizer)
    built = mlmkit.masking.build_policy(
        mlmkit.masking.config.parse_masking_option(policy, "--policy"), tok, stats=stats)
    entries, out = preview_masking(built, tok, text, seed=seed, step=step)
    console = Console()
    console.print(f"[bold]policy[/] {escape(built.describe())}")
    styles = {"mask": "bold white on red", "random": "bold black on yellow",
              "keep": "bold black on green"}
    line = Text()
    for entry in entries:
        line.append(entry.shown, style=styles.get(entry.fate, ""))
        line.append(" ")
    console.print(Text("masked  ") + line)
    labels = [f"{k}:{e.original}" + ("" if e.fate == "mask" else f" ({e.fate} {e.shown})")
              for k, e in enumerate(entries) if e.predicted]
    console.print(f"[bold]labels[/] ({len(labels)} of {len(entries)} tokens, rate "
                  f"{float(out.rate[0]):.3f}): " + escape(", ".join(labels) or "none"))
    console.print("[dim]red: [MASK]   yellow: random token   green: kept as is[/]")


def register(app: typer.Typer) -> None:
    app.add_typer(mask_app, name="mask")

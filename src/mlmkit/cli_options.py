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


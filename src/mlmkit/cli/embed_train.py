"""`mlmkit embed train`: fine-tune a masked LM into a sentence encoder (MNRL, cached MNRL,
CoSENT, SimCSE, TSDAE, Matryoshka, SPLADE), saved as a sentence-transformers folder. `mlmkit embed` hands it the arguments
after `train` (see `mlmkit.cli.embed.EmbedCommand`)."""

from __future__ import annotations

import signal
import sys

import typer

import mlmkit
from mlmkit.cli.options import JSON, Runtime, trusting
from mlmkit.core.results import dumps
from mlmkit.options import as_keywords
from mlmkit.options.embedding import EmbeddingTraining

SHORT_HELP = "Train a sentence encoder (MNRL, cached MNRL, CoSENT, SimCSE, TSDAE, SPLADE)."
EXAMPLE = """
Examples:

  mlmkit embed train ./tiny-bert ../shared/data/stsb/train.tsv --loss cosent --validation ../shared/data/stsb/validation.tsv --run-dir runs/stsb

  mlmkit embed train ./tiny-bert pairs.jsonl --loss mnrl --text-field anchor,positive,negative --matryoshka-dims 128,64,32 --run-dir runs/mnrl

  mlmkit embed train ./tiny-bert sentences.txt --loss simcse --dropout 0.1 --run-dir runs/simcse --json

  mlmkit embed train ./tiny-bert pairs.jsonl --loss cached-mnrl --batch-size 1024 --mini-batch-size 32 --run-dir runs/big-batch

  mlmkit embed train ./tiny-bert sentences.txt --loss tsdae --deletion-ratio 0.6 --run-dir runs/tsdae

  mlmkit embed train ./tiny-bert pairs.jsonl --loss splade --query-regularizer 5e-5 --document-regularizer 3e-5 --run-dir runs/splade

The best epoch (by the validation Spearman; the last without --validation) is saved in
RUN_DIR/best, a folder SentenceTransformer(dir) and 'mlmkit embed' load (splade: a
SparseEncoder folder, for 'mlmkit embed --sparse').
"""


def embed_train_command(
    model: str = typer.Argument(..., help="Model directory (a masked LM or a "
                                "sentence-transformers folder) or hub name."),
    train: str = typer.Argument(..., help="Training examples: JSONL, TSV or CSV with a header "
                                "(see --text-field; cosent: --score-field), or for simcse a "
                                "plain text file, one text a line."),
    *, training: EmbeddingTraining, runtime: Runtime, as_json: bool = JSON,
) -> None:
    """Fine-tune a masked LM into a sentence encoder with sentence-transformers' losses; the
    result loads with SentenceTransformer(RUN_DIR/best)."""
    with trusting(runtime.trust_remote_code):
        result = mlmkit.train_embeddings(model, train, **as_keywords(training),
                                         **runtime.run_keywords())
    if as_json:
        print(dumps(result), flush=True)
    else:
        print(result.summary())
        if result.status != "finished":
            print(f"interrupted at step {result.steps}: continue with --resume --run-dir "
                  f"{result.run_dir}")
    if result.stop_reason in ("SIGINT", "SIGTERM"):  # saved, but not finished: 130 / 143
        sys.stdout.flush()
        sys.exit(128 + int(getattr(signal, result.stop_reason)))

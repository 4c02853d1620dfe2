"""`mlmkit embed`: one vector per input line, as JSON lines or one float32 .npy array."""

from __future__ import annotations

import json
import time

import typer

import mlmkit
from mlmkit.cli import embed_train
from mlmkit.cli.options import (
    ENCODING,
    ENCODING_ERRORS,
    JSON,
    OUTPUT,
    Command,
    Runtime,
    command,
    trusting,
)
from mlmkit.core import checks
from mlmkit.core.fasta import fasta_texts, is_fasta
from mlmkit.core.output import check_output_path, open_output
from mlmkit.core.progress import status
from mlmkit.core.records import STDIN, check_input_file, read_texts
from mlmkit.errors import InvalidArgument
from mlmkit.options import as_keywords
from mlmkit.options.embedding import Embedding

SHORT_HELP = "Embed texts: one vector per input line (mean, cls, max, ... pooling)."
DESCRIPTION = ("The encoder runs alone (no MLM head) in token-budget batches; the vectors "
               "equal sentence-transformers' encode for the same model and pooling. A "
               "sentence-transformers folder embeds with its own pooling, normalisation and "
               "prompt unless the flags say otherwise.")
FORMATS = ("jsonl", "npy")
EXAMPLE = """
Examples:

  mlmkit embed ./tiny-bert sentences.txt -o vectors.jsonl --pooling mean --normalize

  mlmkit embed ./tiny-bert - -o vectors.npy < sentences.txt

  mlmkit embed ./tiny-bert --text "A query." --text "A document." --normalize

  mlmkit embed ./tiny-bert sentences.txt --sparse --top-k 32 -o splade.jsonl

  mlmkit embed train ./tiny-bert ../shared/data/stsb/train.tsv --loss cosent --run-dir runs/stsb

Each line of the input is one text (a blank line is the empty text, so line i of the input
is row i of the output); JSONL, TSV and CSV inputs give the --text-field column. 'mlmkit
embed train' trains an embedding model (see 'mlmkit embed train -h').
"""


def embed_command(
    model: str = typer.Argument(..., help="Model directory (a masked LM or a "
                                "sentence-transformers folder) or hub name."),
    input_file: str = typer.Argument(None, help="A text per line, JSONL (see --text-field), "
                                     "TSV/CSV with a header or FASTA (a protein per "
                                     "record); - reads standard input."),
    text: list[str] = typer.Option([], "--text", help="Embed this text instead of a file "
                                   "(repeatable: one vector each, in order)."),
    text_field: str = typer.Option(None, "--text-field", help="JSONL/TSV/CSV input: the "
                                   "field holding the text (default: text)."),
    output_format: str = typer.Option(None, "--format", metavar="jsonl|npy", help="The "
                                      'output\'s format: jsonl, one {"embedding": [...]} per '
                                      "line, in input order; npy, one float32 array (texts × "
                                      "dimensions). Default: npy for an -o ending in .npy, "
                                      "else jsonl."),
    sparse: bool = typer.Option(False, "--sparse", help="SPLADE vectors from the MLM head "
                                "instead: one {\"tokens\", \"token_ids\", \"weights\"} per line, "
                                "the --top-k heaviest (pooling flags do not apply)."),
    top_k: int = typer.Option(64, "--top-k", min=1, help="--sparse: vocabulary entries kept "
                              "per text."),
    *, embedding: Embedding, output: str = OUTPUT, as_json: bool = JSON, encoding: str = ENCODING,
    encoding_errors: str = ENCODING_ERRORS, runtime: Runtime,
) -> None:
    with trusting(runtime.trust_remote_code):
        if output_format is None:
            output_format = "npy" if str(output).lower().endswith(".npy") and not sparse \
                else "jsonl"
        checks.choice("format", output_format, FORMATS)
        if sparse and output_format != "jsonl":
            raise InvalidArgument("--sparse writes JSON lines: leave out --format npy")
        if text and input_file is not None:
            raise InvalidArgument(f"give --text or an input file ({input_file!r}), not both")
        if not text and input_file is None:
            raise InvalidArgument('give a file of texts (- for standard input) or --text '
                                  '"a sentence"')
        inputs = [input_file] if input_file is not None else []
        if input_file is not None:
            check_input_file(input_file)
        check_output_path(output, inputs=inputs)
        runtime.seed_everything()  # embedding draws nothing at random; --seed is accepted for all
        fasta = input_file is not None and str(input_file) != STDIN and is_fasta(input_file)
        if fasta and text_field is not None:
            raise InvalidArgument(f"--text-field {text_field!r}: a FASTA file has no fields "
                                  "(each record's sequence is a text): leave --text-field out")
        if text:
            texts = list(text)
        else:
            texts = [t for _, t in (fasta_texts(input_file, encoding, encoding_errors) if fasta
                                    else read_texts(input_file, text_field, encoding,
                                                    encoding_errors))]
        mlm = mlmkit.load(model, **runtime.load_keywords(), allow_untrained_head=not sparse)
        if sparse:
            vectors = mlm.embed_sparse(texts, top_k=top_k)
            with open_output(output, inputs=inputs) as handle:
                for vector in vectors:
                    handle.write(json.dumps(vector.to_dict()) + "\n")
            status(f"embedded {len(texts)} text(s) as SPLADE vectors")
            return
        started = time.perf_counter()
        vectors = mlm.embed(texts, **as_keywords(embedding))
        seconds = time.perf_counter() - started
        if output_format == "npy":
            with open_output(output, inputs=inputs, mode="wb") as handle:
                mlmkit.embeddings.write_npy(handle, vectors)
        else:
            with open_output(output, inputs=inputs) as handle:
                for row in vectors.tolist():
                    handle.write(json.dumps({"embedding": row}) + "\n")
        summary = {"texts": len(texts), "dimensions": int(vectors.shape[-1]),
                   "output": output, "texts_per_second": len(texts) / max(seconds, 1e-9)}
        if as_json and output != "-":
            print(json.dumps(summary), flush=True)
        elif as_json:
            status(json.dumps(summary))  # standard output holds the vectors
        else:
            target = "standard output" if output == "-" else output
            status(f"embedded {len(texts)} text(s) → {target} ({summary['dimensions']} "
                   f"dimensions, {summary['texts_per_second']:,.1f} texts/s)")


class EmbedCommand(Command):
    """`mlmkit embed MODEL INPUT` and `mlmkit embed train MODEL TRAIN` under one name: the
    first argument `train` selects the training command."""

    def make_context(self, info_name, args, parent=None, **extra):
        if args and args[0] == "train":
            train_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                                    context_settings={"help_option_names": ["-h", "--help"]})
            command(train_app, "train", embed_train.embed_train_command,
                    short_help=embed_train.SHORT_HELP, epilog=embed_train.EXAMPLE)
            train = typer.main.get_command(train_app)
            return train.make_context(f"{info_name} train", list(args[1:]), parent=parent,
                                      **extra)
        return super().make_context(info_name, args, parent=parent, **extra)


def register(app: typer.Typer) -> None:
    command(app, "embed", embed_command, short_help=SHORT_HELP,
            help=SHORT_HELP + "\n\n" + DESCRIPTION + "\n" + EXAMPLE, cls=EmbedCommand)

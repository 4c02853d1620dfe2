"""`mlmkit embed`: one vector per input line, as JSON lines or one float32 .npy array."""

from __future__ import annotations

import json
import time

import typer

import mlmkit
from mlmkit.cli import embed_train
from mlmkit.cli.options import (
    CHUNK_TEXTS,
    ENCODING,
    ENCODING_ERRORS,
    JSON,
    OUTPUT,
    RESUME,
    SHARD,
    TEXT_FIELD,
    TEXTS,
    TEXTS_FILE,
    Command,
    Runtime,
    check_chunked_file,
    command,
    trusting,
)
from mlmkit.cli.score import report_merge
from mlmkit.core import checks
from mlmkit.core.fasta import input_texts, is_fasta
from mlmkit.core.output import check_output_path, open_output
from mlmkit.core.progress import status
from mlmkit.core.records import check_input_file
from mlmkit.errors import InvalidArgument
from mlmkit.options import as_keywords
from mlmkit.options.embedding import OUTPUT_FORMATS, Embedding

SHORT_HELP = "Embed texts: one vector per input line (mean, cls, max, ... pooling)."
DESCRIPTION = ("The encoder runs alone (no MLM head) in token-budget batches; the vectors "
               "equal sentence-transformers' encode for the same model and pooling. A "
               "sentence-transformers folder embeds with its own pooling, normalisation and "
               "prompt unless the flags say otherwise.")
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
    input_file: str = TEXTS_FILE,
    text: list[str] = TEXTS,
    text_field: str = TEXT_FIELD,
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
    chunk_texts: int = CHUNK_TEXTS,
    resume: bool = RESUME,
    shard: str = SHARD,
    *, embedding: Embedding, output: str = OUTPUT, as_json: bool = JSON, encoding: str = ENCODING,
    encoding_errors: str = ENCODING_ERRORS, runtime: Runtime,
) -> None:
    with trusting(runtime.trust_remote_code):
        if output_format is None:
            output_format = "npy" if str(output).lower().endswith(".npy") and not sparse \
                else "jsonl"
        checks.choice("format", output_format, OUTPUT_FORMATS)
        if sparse and output_format != "jsonl":
            raise InvalidArgument("--sparse writes JSON lines: leave out --format npy")
        dense_flags = [flag for flag, value in (("--pooling", embedding.pooling),
                                                 ("--normalize", embedding.normalize),
                                                 ("--dimensions", embedding.dimensions))
                       if value is not None]
        if sparse and dense_flags:
            raise InvalidArgument(f"{', '.join(dense_flags)} shape dense vectors: leave "
                                  f"{'them' if len(dense_flags) > 1 else 'it'} out with --sparse")
        if sparse and str(output).lower().endswith(".npy"):
            raise InvalidArgument(f"-o {output!r}: --sparse writes JSON lines, not an npy "
                                  "array: name the output .jsonl")
        if text and input_file is not None:
            raise InvalidArgument(f"give --text or an input file ({input_file!r}), not both")
        if not text and input_file is None:
            raise InvalidArgument('give a file of texts (- for standard input) or --text '
                                  '"a sentence"')
        if shard is not None and (text or sparse):
            raise InvalidArgument("--shard splits an input file of dense vectors: leave out "
                                  + ("--text (give a file)" if text else "--sparse"))
        inputs = [input_file] if input_file is not None else []
        if input_file is not None:
            check_input_file(input_file)
            check_chunked_file(chunk_texts, shard)
        check_output_path(output, inputs=inputs)
        if is_fasta(input_file or "") and text_field is not None:
            raise InvalidArgument(f"--text-field {text_field!r}: a FASTA file has no fields "
                                  "(each record's sequence is a text): leave --text-field out")
        runtime.seed_everything()  # embedding draws nothing at random; --seed is accepted for all
        mlm = mlmkit.load(model, **runtime.load_keywords(), allow_untrained_head=not sparse)
        if sparse or text:
            texts = list(text) if text else [t for _, t in input_texts(
                input_file, text_field, encoding, encoding_errors)]
        if sparse:
            vectors = mlm.embed_sparse(texts, top_k=top_k)
            with open_output(output, inputs=inputs) as handle:
                for vector in vectors:
                    handle.write(json.dumps(vector.to_dict()) + "\n")
            status(f"embedded {len(texts)} text(s) as SPLADE vectors")
            return
        if text:
            started = time.perf_counter()
            vectors = mlm.embed(texts, **as_keywords(embedding))
            summary = mlmkit.embeddings.EmbedFileSummary(texts=len(texts), dimensions=int(vectors.shape[-1]),
                                       seconds=time.perf_counter() - started, output=output)
            with open_output(output, mode="wb" if output_format == "npy" else "w") as handle:
                if output_format == "npy":
                    mlmkit.embeddings.write_npy(handle, vectors)
                else:
                    handle.write(mlmkit.embeddings.vector_lines(vectors))
        else:
            summary = mlmkit.embeddings.embed_file(
                mlm, input_file, output, field=text_field, output_format=output_format,
                chunk_texts=chunk_texts, resume=resume, shard=shard, encoding=encoding,
                encoding_errors=encoding_errors, batch_tokens=runtime.batch_tokens,
                **as_keywords(embedding))
        report = {**summary.to_dict(), "texts_per_second": summary.texts_per_second}
        if as_json and output != "-":
            print(json.dumps(report), flush=True)
        elif as_json:
            status(json.dumps(report))  # standard output holds the vectors
        else:
            target = "standard output" if output == "-" else output
            resumed = (f", {summary.resumed_texts} taken from the interrupted run"
                       if summary.resumed_texts else "")
            status(f"embedded {summary.texts} text(s) → {target} ({summary.dimensions} "
                   f"dimensions, {summary.texts_per_second:,.1f} texts/s{resumed})")


MERGE_EXAMPLE = """
Examples:

  mlmkit embed ./tiny-bert passages.txt --shard 0/2 -o part0.npy
  mlmkit embed ./tiny-bert passages.txt --shard 1/2 -o part1.npy
  mlmkit embed merge part0.npy part1.npy -o vectors.npy
"""


def merge_command(
    shards: list[str] = typer.Argument(..., metavar="SHARD_OUTPUT",
                                       help="The outputs of 'mlmkit embed --shard I/N' "
                                       "for I = 0 .. N-1, in any order."),
    output: str = OUTPUT,
    as_json: bool = JSON,
) -> None:
    """Join the outputs of 'mlmkit embed --shard I/N' into the file a single run writes
    (JSON lines or one .npy array; checked: all N shards of one input, model and settings,
    each complete)."""
    report_merge(mlmkit.embeddings.merge_shards(shards, output), output, as_json)


class EmbedCommand(Command):
    """`mlmkit embed MODEL INPUT`, `mlmkit embed train MODEL TRAIN` and `mlmkit embed merge
    SHARDS...` under one name: the first argument `train` or `merge` selects the command."""

    def make_context(self, info_name, args, parent=None, **extra):
        if args and args[0] == "merge":
            merge_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
            merge_app.command("merge", epilog=MERGE_EXAMPLE, cls=Command)(merge_command)
            merge = typer.main.get_command(merge_app)
            return merge.make_context(f"{info_name} merge", list(args[1:]), parent=parent,
                                      **extra)
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

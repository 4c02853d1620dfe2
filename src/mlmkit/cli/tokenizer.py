"""`mlmkit tokenizer train`: a WordPiece, byte-BPE or Unigram tokenizer from any corpus;
`mlmkit tokenizer protein` / `dna`: the fixed alphabets of protein and DNA models."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

import mlmkit
from mlmkit.cli.options import command_group, subcommand
from mlmkit.core import checks
from mlmkit.errors import InvalidArgument

EXAMPLE = """
Example:

  mlmkit tokenizer train python-docs -o ./tok-wordpiece --kind wordpiece --vocab-size 8192

  mlmkit tokenizer train ./data/*.jsonl --text-field body -o ./tok-bpe --kind bpe --vocab-size 16000
"""

OUTPUT = typer.Option(..., "--output", "-o", help="Directory to write the tokenizer to.")

tokenizer_app = command_group(help="Train WordPiece, byte-BPE or Unigram tokenizers that "
                                 "AutoTokenizer loads, or save the amino-acid and k-mer DNA "
                                 "ones.\n" + EXAMPLE, no_args_is_help=True)


@subcommand(
    tokenizer_app, "train",
    help="Train a tokenizer on a corpus and save a directory AutoTokenizer loads. "
         "wordpiece has BERT's [CLS]/[SEP]/[MASK]/[PAD]/[UNK]; bpe (byte-level) and unigram "
         "have RoBERTa's <s>/</s>/<mask>/<pad>/<unk>. The vocabulary is rounded up to a "
         "multiple of 64.\n" + EXAMPLE,
)
def train_command(
    corpus: str = typer.Argument(
        ..., help="python-docs, a .txt/.jsonl/.csv/.tsv/.parquet file, a directory, a glob, "
                  "or a Hugging Face dataset saved with save_to_disk."),
    output: Path = OUTPUT,
    kind: str = typer.Option("wordpiece", help="wordpiece, bpe or unigram."),
    vocab_size: int = typer.Option(8192, "--vocab-size", help="Vocabulary size, 64 to "
                                                             "1048576 (rounded up to a "
                                                             "multiple of 64)."),
    lowercase: bool = typer.Option(False, "--lowercase", help="Lower-case text first."),
    text_field: str = typer.Option("text", "--text-field", help="The text field of .jsonl / "
                                   "column of .csv, .parquet or a dataset."),
    split: str = typer.Option("train", help="Split of python-docs or of a saved DatasetDict."),
    paragraphs: bool = typer.Option(False, "--paragraphs",
                                    help=".txt: a document per blank-line-separated paragraph."),
    encoding: str = typer.Option("utf-8", help="Encoding of text files."),
    encoding_errors: str = typer.Option("strict", "--encoding-errors",
                                        help="strict (stop at a bad byte), replace or ignore."),
    max_length: int = typer.Option(512, "--max-length", help="model_max_length to record."),
    progress: bool = typer.Option(True, help="Show the trainer's progress bar."),
) -> None:
    # every range before the corpus is read (the kind: by train_tokenizer, before it reads)
    check_directory(output)
    checks.count("vocab_size", vocab_size, 64, mlmkit.tokenizer.MAX_VOCAB_SIZE)
    checks.count("max_length", max_length, 1, mlmkit.tokenizer.MAX_MODEL_LENGTH)

    documents = mlmkit.corpus.read_corpus(corpus, field=text_field, split=split,
                                          paragraphs=paragraphs, encoding=encoding,
                                          encoding_errors=encoding_errors)
    count = 0

    def counted():
        nonlocal count
        for text in documents:
            count += 1
            yield text

    tokenizer = mlmkit.tokenizer.train_tokenizer(counted(), output, kind=kind,
                                                 vocab_size=vocab_size, lowercase=lowercase,
                                                 model_max_length=max_length,
                                                 show_progress=progress)
    names = ("cls_token", "sep_token", "mask_token", "pad_token", "unk_token")
    specials = " ".join(str(getattr(tokenizer, name)) for name in names)
    Console().print(
        f"[green]saved[/green] a {kind} tokenizer of {len(tokenizer):,} tokens "
        f"(trained on {count:,} documents) to {escape(str(output))}; specials: {escape(specials)}"
    )


@subcommand(
    tokenizer_app, "protein",
    help="Save ESM-2's amino-acid tokenizer (33 tokens, ESM-2's ids; a token per residue, "
         "lower case read as upper case) to a directory AutoTokenizer loads: for `mlmkit "
         "model init esm2-8m --tokenizer DIR` or `mlmkit pretrain --tokenizer DIR`.\n\n"
         "Example:\n\n  mlmkit tokenizer protein -o ./tok-protein",
)
def protein_command(
    output: Path = OUTPUT,
) -> None:
    check_directory(output)
    tokenizer = mlmkit.protein_tokenizer(output)
    Console().print(f"[green]saved[/green] the amino-acid tokenizer ({len(tokenizer)} tokens) "
                    f"to {escape(str(output))}")


@subcommand(
    tokenizer_app, "dna",
    help="Save a k-mer DNA tokenizer (Nucleotide Transformer's layout: the 4^k k-mers, then "
         "single letters where a sequence does not divide into k-mers; lower case read as "
         "upper case) to a directory AutoTokenizer loads.\n\n"
         "Example:\n\n  mlmkit tokenizer dna -o ./tok-dna6 --k 6",
)
def dna_command(
    output: Path = OUTPUT,
    k: int = typer.Option(6, "--k", help="k-mer length, 1 to 8."),
    max_length: int = typer.Option(1000, "--max-length", help="The model's longest input in "
                                   "tokens (model_max_length)."),
) -> None:
    check_directory(output)
    tokenizer = mlmkit.dna_tokenizer(k, output, max_length=max_length)
    Console().print(f"[green]saved[/green] a {k}-mer DNA tokenizer ({len(tokenizer):,} tokens) "
                    f"to {escape(str(output))}")


def check_directory(output: Path) -> None:
    """A tokenizer is a folder of files: `-` (standard output elsewhere) and an existing
    file are refused before any work."""
    if str(output) == "-":
        raise InvalidArgument("-o -: a tokenizer is a folder of files, not a stream: name a "
                              "directory (-o ./my-tokenizer)")
    if output.exists() and not output.is_dir():
        raise InvalidArgument(f"-o {str(output)!r} is a file: name a directory for the "
                              "tokenizer's files")


def register(app: typer.Typer) -> None:
    app.add_typer(tokenizer_app, name="tokenizer",
                  short_help="Train WordPiece/BPE/Unigram tokenizers (or save the protein and "
                             "DNA alphabets), e.g. mlmkit tokenizer "
                             "train python-docs -o ./tok --vocab-size 8192")

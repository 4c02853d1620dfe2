"""`mlmkit score`: pseudo-log-likelihoods of a file of texts, streamed to JSON lines."""

from __future__ import annotations

import dataclasses
import warnings

import typer

import mlmkit
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
    field_option,
    trusting,
)
from mlmkit.core import checks
from mlmkit.core.fasta import INPUT_FORMATS
from mlmkit.core.output import check_output_path, open_output
from mlmkit.core.progress import status, warn
from mlmkit.core.records import check_input_file
from mlmkit.core.results import dumps
from mlmkit.errors import InvalidArgument
from mlmkit.options import as_keywords
from mlmkit.options.scoring import Scoring

SHORT_HELP = "Score texts with a masked LM: PLL, PLL-word-l2r, pseudo-perplexity."
EXAMPLE = """
Examples:

  mlmkit score ./tiny-bert sentences.txt -o scores.jsonl --metric pll-word-l2r --per-word

  mlmkit score ./tiny-bert --text "The cat sat on the mat." --text "The mat sat on the cat."

  mlmkit score ./tiny-bert - < sentences.txt | head -n 3

A killed run resumes where it stopped when started again with the same input and flags
(--no-resume starts over). Under torchrun the lines are split across ranks and merged back
in order:

  torchrun --standalone --nproc_per_node 2 -m mlmkit score ./tiny-bert sentences.txt -o scores.jsonl

As independent jobs (e.g. a Slurm array), each scoring every N-th piece of --chunk-texts
lines, then joined into the file one run writes:

  mlmkit score ./tiny-bert sentences.txt --shard 0/2 -o part0.jsonl
  mlmkit score ./tiny-bert sentences.txt --shard 1/2 -o part1.jsonl
  mlmkit score merge part0.jsonl part1.jsonl -o scores.jsonl
"""

# The options the scoring commands (score, rescore, eval blimp) share, defined once.
METRIC = field_option(Scoring, "metric")
SKIP_UNK = typer.Option(False, "--skip-unk", help="Leave [UNK] tokens out of the PLL (mlmkit "
                        "0.1); by default they are masked and scored as minicons does, and "
                        "counted in n_unk.")
ALLOW_UNTRAINED_HEAD = typer.Option(False, "--allow-untrained-head", help="Accept a checkpoint "
                                    "whose MLM head is random (its scores are noise).")


def score_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    input_file: str = TEXTS_FILE,
    text: list[str] = TEXTS,
    text_field: str = TEXT_FIELD,
    input_format: str = typer.Option(None, "--format", metavar="text|jsonl|tsv|csv|fasta",
                                     help="The input's format (default: from its name: "
                                     ".jsonl, .tsv, .csv, .fasta, else text; JSONL with "
                                     "--text-field)."),
    skip_unk: bool = SKIP_UNK,
    chunk_texts: int = CHUNK_TEXTS,
    resume: bool = RESUME,
    shard: str = SHARD,
    allow_untrained_head: bool = ALLOW_UNTRAINED_HEAD,
    *, scoring: Scoring, output: str = OUTPUT, encoding: str = ENCODING,
    encoding_errors: str = ENCODING_ERRORS, runtime: Runtime, as_json: bool = JSON,
) -> None:
    """Score texts with a masked LM: sentence PLL (or PLL-word-l2r), pseudo-perplexity,
    optional token and word scores with character offsets, one JSON record per input line.
    Streams any file size; long texts use sliding windows; empty lines get a null score."""
    with trusting(runtime.trust_remote_code):
        scoring = dataclasses.replace(scoring, unk="skip" if skip_unk else "score")
        mlmkit.scoring.text_scores.check_score_options(scoring.metric, scoring.unk,
                                                       scoring.stride, runtime.batch_tokens,
                                                       scoring.reduction)
        if input_format is not None:
            checks.choice("format", input_format, INPUT_FORMATS)
        if text:
            _score_texts(model, text, input_file, scoring, output, runtime,
                         allow_untrained_head, as_json)
            return
        if input_file is None:
            raise InvalidArgument('give a file of texts (- for standard input) or --text '
                                  '"a sentence"')
        check_input_file(input_file)
        check_chunked_file(chunk_texts, shard)
        check_output_path(output, inputs=[input_file])
        runtime.seed_everything()
        group, rank_device = mlmkit.engine.process_group.init(runtime.device)
        try:
            mlm = mlmkit.load(model, **dict(runtime.load_keywords(), device=rank_device),
                              allow_untrained_head=allow_untrained_head)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                summary = mlmkit.scoring.score_file(
                    mlm, input_file, output, field=text_field, format=input_format,
                    **as_keywords(scoring),
                    chunk_texts=chunk_texts, resume=resume, encoding=encoding,
                    encoding_errors=encoding_errors, batch_tokens=runtime.batch_tokens,
                    group=group, shard=shard,
                )
            if not group.is_main:
                return
            for warning in caught:
                warn(str(warning.message))
            if as_json:
                line = dumps({**summary.to_dict(), "texts_per_second": summary.texts_per_second,
                              "ranks": group.world})
                if output == "-":
                    status(line)  # standard output holds the records
                else:
                    print(line, flush=True)
                return
            source = "standard input" if input_file == "-" else input_file
            target = "standard output" if output == "-" else output
            resumed = (f", {summary.resumed_lines} line(s) resumed from a partial output"
                       if summary.resumed_lines else "")
            status(f"scored {summary.texts} line(s) of {source} → {target} "
                   f"({summary.texts_per_second:,.1f} texts/s"
                   + (f", {group.world} ranks" if group.world > 1 else "") + f"{resumed})")
        finally:
            group.finish()


def _score_texts(model, texts, input_file, scoring, output, runtime, allow_untrained_head,
                 as_json) -> None:
    """`score --text ...`: the texts given on the command line, one record each (the
    records a file of those lines gives)."""
    if input_file is not None:
        raise InvalidArgument(f"give --text or an input file ({input_file!r}), not both")
    check_output_path(output)
    runtime.seed_everything()
    mlm = mlmkit.load(model, **runtime.load_keywords(),
                      allow_untrained_head=allow_untrained_head)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = mlm.score(list(texts), **as_keywords(scoring))
    for warning in caught:
        warn(str(warning.message))
    with open_output(output) as handle:
        for number, result in enumerate(results, start=1):
            handle.write(mlmkit.scoring.stream.score_record(number, result))
    if as_json and output != "-":
        print(dumps({"texts": len(results)}), flush=True)


MERGE_EXAMPLE = """
Example:

  mlmkit score merge part0.jsonl part1.jsonl -o scores.jsonl
"""


def merge_command(
    shards: list[str] = typer.Argument(..., metavar="SHARD_OUTPUT",
                                       help="The outputs of 'mlmkit score --shard I/N' "
                                       "for I = 0 .. N-1, in any order."),
    output: str = OUTPUT,
    as_json: bool = JSON,
) -> None:
    """Join the outputs of 'mlmkit score --shard I/N' into the file a single run writes
    (checked: all N shards of one input, model and settings, each complete)."""
    from mlmkit.scoring.sharding import merge_shards  # not loaded by mlmkit.scoring

    report_merge(merge_shards(shards, output), output, as_json)


def report_merge(summary, output: str, as_json: bool) -> None:
    """What a merge of shard outputs wrote: JSON on standard output (stderr when the merged
    file goes there), else one line on stderr."""
    if as_json:
        (status if output == "-" else print)(dumps(summary.to_dict()))
    else:
        status(f"merged {summary.shards} shard(s), {summary.lines} line(s) → "
               + ("standard output" if output == "-" else output))


class ScoreCommand(Command):
    """`mlmkit score MODEL INPUT` and `mlmkit score merge SHARDS...` under one name: the
    first argument `merge` selects the merge command."""

    def make_context(self, info_name, args, parent=None, **extra):
        if args and args[0] == "merge":
            merge_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
            merge_app.command("merge", epilog=MERGE_EXAMPLE, cls=Command)(merge_command)
            merge = typer.main.get_command(merge_app)
            return merge.make_context(f"{info_name} merge", list(args[1:]), parent=parent,
                                      **extra)
        return super().make_context(info_name, args, parent=parent, **extra)


def register(app: typer.Typer) -> None:
    command(app, "score", score_command, short_help=SHORT_HELP, epilog=EXAMPLE,
            cls=ScoreCommand)

"""`mlmkit predict`: the labels of a fine-tuned classifier, one JSON line per input."""

from __future__ import annotations

import json
from collections import Counter

import typer

import mlmkit
from mlmkit.cli.options import ENCODING, ENCODING_ERRORS, JSON, OUTPUT, Runtime, command, trusting
from mlmkit.core.output import check_output_path, open_output
from mlmkit.core.progress import status
from mlmkit.core.records import (
    check_input_file,
    display_name,
    read_table,
    read_texts,
    text_field,
)

SHORT_HELP = "Predict with a fine-tuned classifier: a label and probabilities per input line."
EXAMPLE = """
Examples:

  mlmkit predict runs/finetune/sst2/best reviews.txt -o predictions.jsonl

  echo "a gripping, funny film" | mlmkit predict runs/finetune/sst2/best -

  mlmkit predict runs/finetune/mnli/best pairs.tsv --text-field premise,hypothesis

Each output line is {"text": ..., "label": ..., "score": ..., "probabilities": {...}} (a
regression model: {"text": ..., "value": ...}), in the order of the input.
"""

TEXT_FIELD = typer.Option(None, "--text-field", metavar="COLUMN[,COLUMN]", help="The text "
                          "column of a JSONL/TSV/CSV input, or two comma-separated (sentence "
                          "pairs); default: text. A plain text file is one text per line.")
MAX_LENGTH = typer.Option(None, "--max-length", min=4, help="Inputs longer than this many "
                          "tokens are cut; default: the length the classifier was fine-tuned "
                          "at (recorded by finetune), else 128.")


def predict_command(
    model: str = typer.Argument(..., metavar="MODEL", help="A fine-tuned classifier folder "
                                "(mlmkit finetune writes RUN_DIR/best)."),
    input_file: str = typer.Argument(..., metavar="INPUT", help="Texts: a text file (one per "
                                     "line), JSONL, TSV or CSV; - reads standard input."),
    output: str = OUTPUT,
    text_field: str = TEXT_FIELD,
    max_length: int | None = MAX_LENGTH,
    *, encoding: str = ENCODING, encoding_errors: str = ENCODING_ERRORS, runtime: Runtime,
    as_json: bool = JSON,
) -> None:
    """Predict with a fine-tuned classifier (mlmkit finetune's best/): the label, its
    probability and every label's probability for each input, as JSON lines."""
    with trusting(runtime.trust_remote_code):
        check_input_file(input_file)
        check_output_path(output, inputs=[input_file])
        columns = [c.strip() for c in text_field.split(",")] if text_field else None
        if columns is not None and not (1 <= len(columns) <= 2 and all(columns)):
            raise mlmkit.errors.InvalidArgument(f"--text-field {text_field!r}: give one column, "
                                                "or two comma-separated (sentence pairs)")
        rows = _read(input_file, columns, encoding, encoding_errors)
        if not rows:
            raise mlmkit.errors.InvalidData(f"{display_name(input_file)} holds no texts: give "
                                            "a text per line (or rows with --text-field)")
        blank = sum(1 for row in rows if not any(text.strip() for text in row))
        if blank:
            status(f"{blank} input(s) are empty: predicted as empty texts, in their place")
        runtime.seed_everything()
        classifier = mlmkit.finetuning.load_classifier(
            model, device=runtime.device, precision=runtime.precision, threads=runtime.threads,
            batch_tokens=runtime.batch_tokens, tokenizer=runtime.tokenizer)
        predictions, truncated = classifier.predict_rows(rows, max_length=max_length)
        if truncated:
            status(f"{truncated} of {len(rows)} input(s) longer than "
                   f"{classifier.cut_length(max_length)} tokens were cut there (--max-length)")
        with open_output(output, inputs=[input_file]) as out:
            for row, prediction in zip(rows, predictions, strict=True):
                text = row[0] if len(row) == 1 else list(row)
                out.write(json.dumps({"text": text, **prediction.to_dict()},
                                     ensure_ascii=False) + "\n")
        counts = Counter(p.label for p in predictions if p.label is not None)
        summary = {"texts": len(rows), "output": output, "labels": dict(counts.most_common()),
                   "truncated": truncated}
        if as_json and output != "-":
            print(json.dumps(summary), flush=True)
        elif as_json:
            status(json.dumps(summary))  # standard output holds the predictions
        else:
            target = "standard output" if output == "-" else output
            shown = ", ".join(f"{label} {n}" for label, n in counts.most_common())
            status(f"predicted {len(rows)} input(s) → {target}" + (f" ({shown})" if shown
                                                                    else ""))


def _read(path: str, columns: list[str] | None, encoding: str, errors: str
          ) -> list[tuple[str, ...]]:
    """The inputs of `path` as rows of one or two texts."""
    if columns is None or len(columns) == 1:
        field = columns[0] if columns else None
        return [(text,) for _, text in read_texts(path, field, encoding, errors)]
    return [tuple(text_field(path, number, row, c) for c in columns)
            for number, row in read_table(path, encoding, errors, what="texts")]


def register(app: typer.Typer) -> None:
    command(app, "predict", predict_command, short_help=SHORT_HELP, epilog=EXAMPLE)

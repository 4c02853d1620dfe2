"""`mlmkit probe`: zero-shot cloze classification, statement ranking and fact probes."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import mlmkit
from mlmkit.cli.options import JSON, Runtime, command_group, subcommand, trusting
from mlmkit.cli.score import METRIC
from mlmkit.core.checks import choice, count
from mlmkit.core.output import check_output_path, write_text
from mlmkit.core.progress import status
from mlmkit.core.results import dumps

PROBE_HELP = ("Probe a masked LM with its MLM head as is: cloze classification (PET), "
              "plausibility ranking of statements, LAMA-style knowledge probes.")
PROBE_EXAMPLE = """
Examples:

  mlmkit probe classify ./tiny-bert reviews.jsonl --verbalizer '{"pos": ["good"], "neg": ["bad"]}'

  mlmkit probe rank ./tiny-bert items.jsonl --json

  mlmkit probe facts ./tiny-bert facts.jsonl -o facts.json
"""
CLASSIFY_EXAMPLE = """
Example (reviews.jsonl rows: {"text": "...", "label": "pos"}, the label optional; - reads
standard input):

  mlmkit probe classify ./tiny-bert reviews.jsonl --template "{text} It was [MASK]." --verbalizer '{"pos": ["good", "great"], "neg": ["bad"]}' -o predictions.json
"""
RANK_EXAMPLE = """
Example (items.jsonl rows: {"candidates": ["...", "..."], "label": 0}, or COPA rows; - reads
standard input):

  mlmkit probe rank ./tiny-bert items.jsonl --normalize token --json
"""
FACTS_EXAMPLE = """
Example (facts.jsonl rows: {"template": "[X] was born in [Y].", "subject": "Dante",
"object": "Florence"} or {"masked_sentence": "... [MASK] ...", "obj_label": "..."}; - reads
standard input):

  mlmkit probe facts ./tiny-bert facts.jsonl --top-k 10 -o facts.json
"""
OUTPUT_HELP = ("Where the full result goes as JSON (- for standard output, the default, "
               "where it is printed as a table unless --json).")

probe_app = command_group(PROBE_HELP, epilog=PROBE_EXAMPLE)


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.4f}"


SHOWN = 20
"""Rows of a table printed for people; --json or -o holds every row."""


def _print(table: Table, notes, rows: int = 0) -> None:
    """The table (of a result with `rows` rows, of which it holds the first SHOWN), a line
    for the rows left out, then each note that is not None."""
    console = Console(highlight=False, soft_wrap=True)
    console.print(table)
    if rows > SHOWN:
        console.print(f"… {rows - SHOWN} more (use --json or -o for all)")
    for note in notes:
        if note is not None:
            console.print(note)


def _start(model: str, inputs: list, output: str, runtime: Runtime):
    """Check the output before any work, then load the model.

    The probes draw nothing at random; `--seed` still fixes torch's generator, as on every
    command that runs a model.
    """

    check_output_path(output, inputs=inputs)
    runtime.seed_everything()
    return mlmkit.load(model, **runtime.load_keywords())


def _emit(payload: dict, as_json: bool, output: str, inputs: list) -> bool:
    """Write the JSON result to `output` and/or print it; True when no table is wanted."""

    text = dumps(payload, indent=2)
    if output != "-":
        write_text(output, text + "\n", inputs=inputs)
        status(f"results written to {output}")
    if as_json:
        typer.echo(text)
    return as_json


@subcommand(probe_app, "classify", epilog=CLASSIFY_EXAMPLE,
            short_help="Zero-shot classification with a cloze prompt and a verbalizer.")
def classify_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    data: str = typer.Argument(..., help="JSON lines, or a TSV/CSV with a header, of texts "
                               "optionally with gold labels (- for standard input: JSON "
                               "lines)."),
    template: str = typer.Option("{text} It was [MASK].",
                                 help="Cloze template with {text} and one [MASK] / <mask>."),
    verbalizer: str = typer.Option(None, help="JSON object (or a .json file) label -> words; "
                                   "default: positive great/good, negative terrible/bad."),
    aggregate: str = typer.Option("logsumexp", help="Label score from its words: logsumexp, "
                                  "mean or max."),
    text_field: str = typer.Option("text", "--text-field", help="Field (JSON lines) or "
                                   "column (TSV/CSV) holding the text."),
    label_field: str = typer.Option("label", "--label-field", help="Field or column of the "
                                    "gold label."),
    output: str = typer.Option("-", "-o", "--output", help=OUTPUT_HELP),
    *, as_json: bool = JSON, runtime: Runtime,
) -> None:
    """Zero-shot classification with a cloze prompt and a verbalizer (PET, Schick & Schütze).

    Each text goes into the template; each label's words are scored at the mask.
    """
    with trusting(runtime.trust_remote_code):
        from mlmkit.probe.labelled import read_labelled_texts

        mlmkit.probe.prompt.check_template(template, "{text}", "--template")
        choice("aggregate", aggregate, mlmkit.probe.AGGREGATES)
        words = mlmkit.probe.parse_verbalizer(verbalizer, "--verbalizer") if verbalizer else None
        texts, gold = read_labelled_texts(data, text_field, label_field)
        mlm = _start(model, [data], output, runtime)
        result = mlm.classify(texts, template, words, gold=gold, aggregate=aggregate)
        if _emit(result.to_dict(), as_json, output, [data]):
            return
        table = Table(title=f"cloze classification ({escape(model)})")
        for column in ("#", "label", *(f"P({label})" for label in result.labels), "gold"):
            table.add_column(escape(column), justify="left" if column in ("label", "gold")
                             else "right")
        for i, p in enumerate(result.predictions[:SHOWN]):
            table.add_row(str(i), escape(p.label),
                          *(f"{p.probabilities[label]:.3f}" for label in result.labels),
                          escape(p.gold or "–"))
        _print(table, rows=len(result.predictions), notes=[
            "multi-token words (scored with one mask per subword): "
            f"{escape(', '.join(result.multi_token_words))}" if result.multi_token_words else None,
            f"accuracy: {result.accuracy:.4f} over {len(result.predictions)} texts"
            if result.accuracy is not None else None])


@subcommand(probe_app, "rank", epilog=RANK_EXAMPLE,
            short_help="Rank candidate statements by PLL (multiple choice, COPA).")
def rank_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    items: str = typer.Argument(..., help="JSONL of multiple-choice items (- for standard "
                                "input)."),
    metric: str = METRIC,
    normalize: str = typer.Option("sum", help="sum (log-likelihood), token or word (mean)."),
    scope: str = typer.Option("statement", help="statement (every token) or shared (only the "
                              "tokens all candidates share, Tamborrino et al.)."),
    output: str = typer.Option("-", "-o", "--output", help=OUTPUT_HELP),
    *, as_json: bool = JSON, runtime: Runtime,
) -> None:
    """Rank each item's candidate statements by PLL; the best one is the answer.

    Tamborrino et al. (2020), BEAR: no fine-tuning, accuracy against the gold labels.
    """
    with trusting(runtime.trust_remote_code):
        choice("metric", metric, mlmkit.scoring.jobs.METRICS)
        choice("normalize", normalize, mlmkit.probe.NORMALIZATIONS)
        choice("scope", scope, mlmkit.probe.SCOPES)
        loaded = mlmkit.probe.read_items(items)
        mlm = _start(model, [items], output, runtime)
        result = mlm.rank(loaded, metric=metric, normalize=normalize, scope=scope)
        if _emit(result.to_dict(), as_json, output, [items]):
            return
        table = Table(title=f"statement ranking ({escape(model)}, {metric}, {normalize}, {scope})")
        for column in ("item", "best statement", "score", "gold", "correct"):
            table.add_column(column, justify="left" if column == "best statement" else "right")
        for i, item in enumerate(result.items[:SHOWN]):
            mark = "–" if item.correct is None else ("yes" if item.correct else "no")
            table.add_row(escape(item.item_id or str(i)), escape(item.candidates[item.predicted]),
                          f"{item.scores[item.predicted]:.3f}",
                          "–" if item.gold is None else str(item.gold), mark)
        _print(table, rows=len(result.items), notes=[
            f"{result.n_unknown} candidate(s) hold unknown-token ([UNK]) pieces; they are "
            "scored like any other token (see --json)" if result.n_unknown else None,
            f"accuracy: {result.accuracy:.4f} over {result.n_with_gold} items"
            if result.accuracy is not None else None])


@subcommand(probe_app, "facts", epilog=FACTS_EXAMPLE,
            short_help="LAMA-style knowledge probe: P@1, P@10 and MRR of cloze facts.")
def facts_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    facts: str = typer.Argument(..., help="JSONL of cloze facts (- for standard input)."),
    top_k: int = typer.Option(10, "--top-k", help="Guesses kept per fact (≥ 1)."),
    relations: Path = typer.Option(None, "--relations", help="JSONL of {\"relation\", "
                                   "\"template\"} rows (e.g. LAMA's relations.jsonl) for "
                                   "facts that give a relation but no template."),
    include_special: bool = typer.Option(False, "--include-special",
                                         help="Let special tokens compete as answers."),
    output: str = typer.Option("-", "-o", "--output", help=OUTPUT_HELP),
    *, as_json: bool = JSON, runtime: Runtime,
) -> None:
    """LAMA-style knowledge probe: where the gold object ranks over the vocabulary.

    P@1, P@10 and MRR per relation and overall (Petroni et al. 2019). Facts whose object
    is several tokens, or only the unknown token, are skipped and counted.
    """
    with trusting(runtime.trust_remote_code):
        count("top_k", top_k, 1)
        loaded = mlmkit.probe.read_facts(
            facts, mlmkit.probe.read_templates(relations) if relations else None)
        inputs = [facts, relations]
        mlm = _start(model, inputs, output, runtime)
        result = mlm.probe(loaded, top_k=top_k, exclude_special=not include_special)
        if _emit(result.to_dict(), as_json, output, inputs):
            return
        table = Table(title=f"knowledge probe ({escape(model)})")
        for column in ("relation", "probed", "skipped", "of which [UNK]", "P@1", "P@10", "MRR"):
            table.add_column(escape(column), justify="left" if column == "relation" else "right")
        rows = [*result.by_relation.items(), ("overall (micro)", result.overall),
                ("mean over relations", result.macro)]
        for name, s in rows:
            table.add_row(escape(name), str(s.n), str(s.skipped), str(s.unknown), _fmt(s.p_at_1),
                          _fmt(s.p_at_10), _fmt(s.mrr))
        overall = result.overall
        _print(table, notes=[
            f"{overall.skipped} fact(s) skipped: {overall.skipped - overall.unknown} with an "
            f"object of several tokens, {overall.unknown} with an object the vocabulary lacks "
            "([UNK]); see --json for each one" if overall.skipped else None])


def register(app: typer.Typer) -> None:
    app.add_typer(probe_app, name="probe", short_help="Cloze classification, statement "
                  "ranking and knowledge probes with the MLM head.")

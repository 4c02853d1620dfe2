"""`mlmkit probe`: zero-shot cloze classification, statement ranking and fact probes."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

probe_app = typer.Typer(
    help="Use the MLM head as is: cloze classification (PET), plausibility ranking of "
    "statements, LAMA-style knowledge probes.",
    no_args_is_help=True,
)
console = Console()
err_console = Console(stderr=True)

CLASSIFY_EXAMPLE = """
Example (data.jsonl rows: {"text": "...", "label": "pos"}, the label optional):

  mlmkit probe classify ./tiny-bert data.jsonl --template "{text} It was [MASK]." --verbalizer '{"pos": ["good", "great"], "neg": ["bad"]}'
"""
RANK_EXAMPLE = """
Example (items.jsonl rows: {"candidates": ["...", "..."], "label": 0}, or COPA rows):

  mlmkit probe rank ./tiny-bert items.jsonl --normalize token --json
"""
FACTS_EXAMPLE = """
Example (facts.jsonl rows: {"template": "[X] was born in [Y].", "subject": "Dante", "object": "Florence"} or {"masked_sentence": "... [MASK] ...", "obj_label": "..."}):

  mlmkit probe facts ./tiny-bert facts.jsonl --top-k 10
"""


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.4f}"


def _emit(payload: dict, as_json: bool, output: Path | None) -> bool:
    """Write / print the JSON result; True when the human summary is not wanted."""
    text = json.dumps(payload, indent=2, ensure_ascii=False)
    if output is not None:
        from mlmkit.cache import atomic_write_text

        atomic_write_text(output, text + "\n")
        err_console.print(f"results written to {escape(str(output))}")
    if as_json:
        typer.echo(text)
    return as_json


def _load(model: str, device: str):
    from mlmkit.models import load_mlm

    return load_mlm(model, device=device)


@probe_app.command("classify", epilog=CLASSIFY_EXAMPLE)
def classify_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    data: Path = typer.Argument(..., help="jsonl of texts (optionally with gold labels)."),
    template: str = typer.Option("{text} It was [MASK].",
                                 help="Cloze template with {text} and one [MASK] / <mask>."),
    verbalizer: str = typer.Option(None, help="JSON object (or a .json file) label -> words; "
                                   "default: positive great/good, negative terrible/bad."),
    aggregate: str = typer.Option("logsumexp", help="Label score from its words: logsumexp, "
                                  "mean or max."),
    text_field: str = typer.Option("text", "--text-field", help="Field holding the text."),
    label_field: str = typer.Option("label", "--label-field", help="Field of the gold label."),
    as_json: bool = typer.Option(False, "--json", help="Print the full result as JSON."),
    output: Path = typer.Option(None, "-o", "--output", help="Also write the JSON here."),
    batch_tokens: int = typer.Option(None, "--batch-tokens", help="Padded tokens per batch."),
    device: str = typer.Option("auto", help="cpu, cuda, ... (auto: cuda when available)."),
) -> None:
    from mlmkit.probe import cloze_classify, parse_verbalizer
    from mlmkit.probe.labelled import read_labelled_texts
    from mlmkit.probe.prompt import check_template

    texts, gold = read_labelled_texts(data, text_field, label_field)
    check_template(template, "{text}", "--template")
    words = parse_verbalizer(verbalizer, "--verbalizer") if verbalizer else None
    result = cloze_classify(_load(model, device), texts, template, words, gold=gold,
                            aggregate=aggregate, batch_tokens=batch_tokens)
    if _emit(result.to_dict(), as_json, output):
        return
    table = Table(title=f"cloze classification ({escape(model)})")
    for column in ("#", "label", *(f"P({label})" for label in result.labels), "gold"):
        table.add_column(column, justify="left" if column in ("label", "gold") else "right")
    for i, p in enumerate(result.predictions[:20]):
        table.add_row(str(i), escape(p.label),
                      *(f"{p.probabilities[label]:.3f}" for label in result.labels),
                      escape(p.gold or "–"))
    console.print(table)
    if len(result.predictions) > 20:
        console.print(f"… {len(result.predictions) - 20} more (use --json or -o for all)")
    if result.multi_token_words:
        console.print(f"multi-token words (scored with one mask per subword): "
                      f"{escape(', '.join(result.multi_token_words))}")
    if result.accuracy is not None:
        console.print(f"accuracy: {result.accuracy:.4f} over {len(result.predictions)} texts")


@probe_app.command("rank", epilog=RANK_EXAMPLE)
def rank_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    items: Path = typer.Argument(..., help="jsonl of multiple-choice items."),
    metric: str = typer.Option("pll", help="pll or pll_word_l2r."),
    normalize: str = typer.Option("sum", help="sum (log-likelihood), token or word (mean)."),
    scope: str = typer.Option("statement", help="statement (every token) or shared (only the "
                              "tokens all candidates share, Tamborrino et al.)."),
    as_json: bool = typer.Option(False, "--json", help="Print the full result as JSON."),
    output: Path = typer.Option(None, "-o", "--output", help="Also write the JSON here."),
    batch_tokens: int = typer.Option(None, "--batch-tokens", help="Padded tokens per batch."),
    device: str = typer.Option("auto", help="cpu, cuda, ... (auto: cuda when available)."),
) -> None:
    from mlmkit.probe import rank_statements, read_items

    loaded = read_items(items)
    result = rank_statements(_load(model, device), loaded, metric=metric, normalize=normalize,
                             scope=scope, batch_tokens=batch_tokens)
    if _emit(result.to_dict(), as_json, output):
        return
    table = Table(title=f"statement ranking ({escape(model)}, {metric}, {normalize}, {scope})")
    for column in ("item", "best statement", "score", "gold", "correct"):
        table.add_column(column, justify="left" if column == "best statement" else "right")
    for i, item in enumerate(result.items[:20]):
        mark = "–" if item.correct is None else ("yes" if item.correct else "no")
        table.add_row(escape(item.item_id or str(i)), escape(item.candidates[item.predicted]),
                      f"{item.scores[item.predicted]:.3f}",
                      "–" if item.gold is None else str(item.gold), mark)
    console.print(table)
    if result.accuracy is not None:
        console.print(f"accuracy: {result.accuracy:.4f} over {result.n_with_gold} items")


@probe_app.command("facts", epilog=FACTS_EXAMPLE)
def facts_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    facts: Path = typer.Argument(..., help="jsonl of cloze facts."),
    top_k: int = typer.Option(10, "--top-k", help="Guesses kept per fact."),
    relations: Path = typer.Option(None, "--relations", help="jsonl of {\"relation\", "
                                   "\"template\"} rows (e.g. LAMA's relations.jsonl) for "
                                   "facts that give a relation but no template."),
    include_special: bool = typer.Option(False, "--include-special",
                                         help="Let special tokens compete as answers."),
    as_json: bool = typer.Option(False, "--json", help="Print the full result as JSON."),
    output: Path = typer.Option(None, "-o", "--output", help="Also write the JSON here."),
    batch_tokens: int = typer.Option(None, "--batch-tokens", help="Padded tokens per batch."),
    device: str = typer.Option("auto", help="cpu, cuda, ... (auto: cuda when available)."),
) -> None:
    from mlmkit.probe import knowledge_probe, read_facts
    from mlmkit.probe.facts import read_templates

    loaded = read_facts(facts, read_templates(relations) if relations else None)
    result = knowledge_probe(_load(model, device), loaded, top_k=top_k,
                             exclude_special=not include_special, batch_tokens=batch_tokens)
    if _emit(result.to_dict(), as_json, output):
        return
    table = Table(title=f"knowledge probe ({escape(model)})")
    for column in ("relation", "probed", "skipped", "P@1", "P@10", "MRR"):
        table.add_column(column, justify="left" if column == "relation" else "right")
    rows = [*result.by_relation.items(), ("overall (micro)", result.overall),
            ("mean over relations", result.macro)]
    for name, s in rows:
        table.add_row(escape(name), str(s.n), str(s.skipped), _fmt(s.p_at_1), _fmt(s.p_at_10),
                      _fmt(s.mrr))
    console.print(table)
    if result.overall.skipped:
        console.print(f"{result.overall.skipped} fact(s) skipped: their object is not a single "
                      "token (see --json for each one)")


def register(app: typer.Typer) -> None:
    app.add_typer(probe_app, name="probe")

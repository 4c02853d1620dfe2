"""`mlmkit bias`: CrowS-Pairs, AUL/AULA and StereoSet audits, comparisons and reports."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mlmkit.errors import MlmkitError

CROWS_EXAMPLE = """
Examples:

  mlmkit bias crows bert-base-uncased --data ../shared/data/crows_pairs/crows_pairs_anonymized.csv --out pairs.csv --report crows.html

  mlmkit bias crows ./tiny-bert --measure aula --limit 100 --bootstrap 200
"""
STEREOSET_EXAMPLE = """
Example:

  mlmkit bias stereoset bert-base-uncased --data dev.json --report stereoset.md
"""
COMPARE_EXAMPLE = """
Example:

  mlmkit bias compare bert-base-uncased roberta-base --benchmark crows --report compare.html
"""

bias_app = typer.Typer(help="Audit social bias: CrowS-Pairs, AUL/AULA, StereoSet.",
                       no_args_is_help=True)
console = Console()


def _fmt(value, digits: int = 2) -> str:
    """Fixed decimals; digits = 0 means 3 significant digits (divergences can be tiny)."""
    if value is None or value != value:
        return "–"
    return f"{value:.3g}" if digits == 0 else f"{value:.{digits}f}"


def _ci(score, digits: int = 2) -> str:
    if score.low is None:
        return ""
    return f" [{_fmt(score.low, digits)}, {_fmt(score.high, digits)}]"


def _load(model: str, device: str):
    from mlmkit.models import load_mlm

    return load_mlm(model, device=device)


def _print_pairs_audit(audit) -> None:
    result = audit.result
    s = result.summary()
    console.print("=" * 60)
    console.print(f"Total examples: {s.n}")
    console.print(f"Metric score: {round(s.metric_score, 2)}{_ci(audit.get('metric score'))}")
    console.print(f"Stereotype score: {_fmt(s.stereotype_score)}"
                  f"{_ci(audit.get('stereotype score'))}")
    console.print(f"Anti-stereotype score: {_fmt(s.antistereotype_score)}"
                  f"{_ci(audit.get('anti-stereotype score'))}")
    console.print(f"Num. neutral: {s.neutral} {round(s.neutral_percent, 2)}")
    console.print("=" * 60)
    table = Table(title=f"{audit.benchmark} per bias type ({escape(audit.model)})")
    for column in ("bias type", "pairs", "metric", "95% interval", "stereo", "anti",
                   "neutral", "JS"):
        table.add_column(column, justify="left" if column == "bias type" else "right")
    for group in audit.groups():
        g = result.summary(group)
        metric = audit.get("metric score", group)
        js = [x for x in audit.scores if x.name == "JS" and x.group == group]
        table.add_row(group, str(g.n), _fmt(g.metric_score), _ci(metric).strip(),
                      _fmt(g.stereotype_score), _fmt(g.antistereotype_score), str(g.neutral),
                      _fmt(js[0].value, 0) if js else "–")
    console.print(table)
    d = result.divergences()
    console.print(f"Gaussian fits: sent_more N({d.stereo.mean:.3f}, {d.stereo.std:.3f}²), "
                  f"sent_less N({d.anti.mean:.3f}, {d.anti.std:.3f}²); "
                  f"KL(more‖less) {d.kl_stereo_anti:.3g}, KL(less‖more) {d.kl_anti_stereo:.3g}, "
                  f"JS {d.js:.3g} nats")


def _print_stereoset_audit(audit) -> None:
    table = Table(title=f"StereoSet intrasentence ({escape(audit.model)})")
    for column in ("domain", "examples", "SS", "LM", "ICAT"):
        table.add_column(column, justify="left" if column == "domain" else "right")
    for group in audit.groups():
        s = audit.result.score(group)
        table.add_row(group, str(s.count), _fmt(s.ss) + _ci(audit.get("SS", group)),
                      _fmt(s.lm) + _ci(audit.get("LM", group)),
                      _fmt(s.icat) + _ci(audit.get("ICAT", group)))
    console.print(table)


def _finish(report_path: Path | None, report) -> None:
    if report_path is not None:
        from mlmkit.bias.report import render

        render(report, report_path)
        console.print(f"report written to {escape(str(report_path))}")


@bias_app.command("crows", epilog=CROWS_EXAMPLE)
def crows_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    data: Path = typer.Option(None, help="crows_pairs_anonymized.csv (default: "
                              "../shared/data/crows_pairs/crows_pairs_anonymized.csv)."),
    measure: str = typer.Option("crows", help="crows (official metric.py), aul or aula."),
    out: Path = typer.Option(None, help="Write the per-pair CSV (official columns) here."),
    bootstrap: int = typer.Option(1000, help="Bootstrap replicates for the 95% intervals "
                                  "(0: none)."),
    seed: int = typer.Option(0, help="Bootstrap seed."),
    report: Path = typer.Option(None, help="Write an HTML or Markdown report (.html/.md)."),
    limit: int = typer.Option(None, help="Score only the first N pairs (quick checks)."),
    lowercase: bool = typer.Option(None, "--lowercase/--no-lowercase",
                                   help="Lowercase the sentences (default: when the "
                                   "tokenizer is uncased, as metric.py)."),
    batch_tokens: int = typer.Option(None, "--batch-tokens", help="Padded tokens per batch."),
    device: str = typer.Option("auto", help="cpu, cuda, or auto."),
) -> None:
    """Score CrowS-Pairs exactly as the official metric.py (or AUL / AULA)."""
    from mlmkit.bias.audit import audit, read_benchmark

    if measure not in ("crows", "aul", "aula"):
        raise MlmkitError(f"--measure {measure!r}: use crows, aul or aula")
    items = read_benchmark(measure, data)  # bad data fails before the model loads
    mlm = _load(model, device)
    began = time.perf_counter()
    kwargs = dict(lowercase=lowercase, batch_tokens=batch_tokens)
    if measure == "crows":
        kwargs["progress"] = True
    result = audit(mlm, measure, items, n_boot=bootstrap, seed=seed, limit=limit, **kwargs)
    console.print(f"scored {result.n} pairs in {time.perf_counter() - began:.1f} s")
    _print_pairs_audit(result)
    if out is not None:
        result.result.write_csv(out)
        console.print(f"per-pair scores written to {escape(str(out))}")
    _finish(report, result)


@bias_app.command("stereoset", epilog=STEREOSET_EXAMPLE)
def stereoset_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    data: Path = typer.Option(..., help="A StereoSet file in the official dev.json format."),
    bootstrap: int = typer.Option(1000, help="Bootstrap replicates (0: none)."),
    seed: int = typer.Option(0, help="Bootstrap seed."),
    report: Path = typer.Option(None, help="Write an HTML or Markdown report (.html/.md)."),
    limit: int = typer.Option(None, help="Score only the first N examples."),
    batch_tokens: int = typer.Option(None, "--batch-tokens", help="Padded tokens per batch."),
    device: str = typer.Option("auto", help="cpu, cuda, or auto."),
) -> None:
    """StereoSet intrasentence: SS, LM and ICAT per domain, as the official evaluation.py."""
    from mlmkit.bias.audit import audit, read_benchmark

    items = read_benchmark("stereoset", data)
    mlm = _load(model, device)
    result = audit(mlm, "stereoset", items, n_boot=bootstrap, seed=seed, limit=limit,
                   batch_tokens=batch_tokens, progress=True)
    _print_stereoset_audit(result)
    _finish(report, result)


@bias_app.command("compare", epilog=COMPARE_EXAMPLE)
def compare_command(
    model_a: str = typer.Argument(..., help="First model (A)."),
    model_b: str = typer.Argument(..., help="Second model (B)."),
    benchmark: str = typer.Option("crows", help="crows, aul, aula or stereoset."),
    data: Path = typer.Option(None, help="The benchmark's data file (CrowS-Pairs: default "
                              "../shared/data/crows_pairs/crows_pairs_anonymized.csv)."),
    bootstrap: int = typer.Option(1000, help="Paired bootstrap replicates (0: none)."),
    seed: int = typer.Option(0, help="Bootstrap seed."),
    report: Path = typer.Option(None, help="Write an HTML or Markdown report (.html/.md)."),
    limit: int = typer.Option(None, help="Score only the first N items."),
    batch_tokens: int = typer.Option(None, "--batch-tokens", help="Padded tokens per batch."),
    device: str = typer.Option("auto", help="cpu, cuda, or auto."),
) -> None:
    """Compare two models on one benchmark: both scores and the paired-bootstrap A − B."""
    from mlmkit.bias.audit import read_benchmark
    from mlmkit.bias.compare import compare

    items = read_benchmark(benchmark, data)
    kwargs = {"batch_tokens": batch_tokens}
    result = compare(_load(model_a, device), _load(model_b, device), benchmark, items,
                     n_boot=bootstrap, seed=seed, limit=limit, **kwargs)
    table = Table(title=f"{benchmark}: A = {escape(result.model_a)}, B = "
                        f"{escape(result.model_b)} ({result.n} items)")
    for column in ("group", "score", "A", "B", "A − B", "95% interval"):
        table.add_column(column, justify="left" if column in ("group", "score") else "right")
    for d in result.differences:
        digits = 0 if d.name.startswith(("KL", "JS")) else 2
        interval = "" if d.low is None else f"[{_fmt(d.low, digits)}, {_fmt(d.high, digits)}]"
        table.add_row(d.group, d.name, _fmt(d.a, digits), _fmt(d.b, digits),
                      _fmt(d.diff, digits), interval)
    console.print(table)
    _finish(report, result)


def register(app: typer.Typer) -> None:
    app.add_typer(bias_app, name="bias")

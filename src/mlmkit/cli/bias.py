"""`mlmkit bias`: CrowS-Pairs, AUL/AULA and StereoSet audits, comparisons and reports."""

from __future__ import annotations

import contextlib
import time
import warnings
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import mlmkit
from mlmkit.cli.options import JSON, Runtime, command_group, subcommand, trusting
from mlmkit.core.checks import choice
from mlmkit.core.output import check_output_path, write_text
from mlmkit.core.progress import status, warn
from mlmkit.core.results import dumps
from mlmkit.errors import InvalidArgument
from mlmkit.extras import require

BIAS_HELP = ("Audit social bias in a masked LM: CrowS-Pairs, AUL/AULA, StereoSet, with "
             "bootstrap intervals, paired comparisons and reports.")
BIAS_EXAMPLE = """
Examples:

  mlmkit bias crows ./tiny-bert --limit 200 -o crows.html

  mlmkit bias stereoset ./tiny-bert tests/data/stereoset_intrasentence_fixture.json --json

  mlmkit bias compare ./tiny-bert ./tiny-bert-2 --limit 300 -o compare.md
"""
CROWS_EXAMPLE = """
Examples:

  mlmkit bias crows bert-base-uncased ../shared/data/crows_pairs/crows_pairs_anonymized.csv -o crows.html --pairs-csv pairs.csv

  mlmkit bias crows ./tiny-bert --measure aula --limit 100 --bootstrap 200 --json
"""
STEREOSET_EXAMPLE = """
Example:

  mlmkit bias stereoset bert-base-uncased dev.json -o stereoset.md
"""
COMPARE_EXAMPLE = """
Example:

  mlmkit bias compare bert-base-uncased roberta-base --benchmark crows -o compare.html
"""
OUTPUT_HELP = ("Where the result goes: - (standard output: the tables, or JSON with --json), "
               "a .html or .md report (figures in <name>_figures/ beside it), or a .json file.")
REPORT_SUFFIXES = (".html", ".md")  # a report: its figures need matplotlib (mlmkit[plots])
OUTPUT_SUFFIXES = (*REPORT_SUFFIXES, ".json")

bias_app = command_group(BIAS_HELP, epilog=BIAS_EXAMPLE)


def _stdout():
    return Console(highlight=False, soft_wrap=True)


def _fmt(value, digits: int = 2) -> str:
    return mlmkit.bias.formatting.number(value, digits)


def _interval(score, digits: int = 2) -> str:
    """'[low, high]', in a few words why there is none, or '' (no bootstrap)."""

    return mlmkit.bias.formatting.interval(score, digits, short=True, none="")


@contextlib.contextmanager
def _warnings_as_lines():
    """The library's warnings (e.g. a pair scored in windows) as `warning:` lines."""

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for message in dict.fromkeys(str(w.message) for w in caught):
        warn(message)


def _check_outputs(output: str, inputs: list, pairs_csv: Path | None = None) -> None:
    """Refuse a bad output before any work: unknown suffix, a directory, an input."""

    if output != "-" and Path(output).suffix.lower() not in OUTPUT_SUFFIXES:
        raise InvalidArgument(f"--output {output!r}: end it in .html or .md (a report), "
                              ".json (the result as JSON), or pass - for standard output")
    check_output_path(output, inputs=inputs)
    if Path(output).suffix.lower() in REPORT_SUFFIXES:
        require("matplotlib", extra="plots", feature="a bias report (--output .html or .md)")
    if pairs_csv is not None:
        check_output_path(pairs_csv, inputs=inputs, what="--pairs-csv")


def _write(report, output: str, as_json: bool, inputs: list) -> bool:
    """Write the report/JSON file; print JSON when asked. True when no tables are wanted."""

    if output != "-":
        if Path(output).suffix.lower() == ".json":
            write_text(output, dumps(report.to_dict(), indent=2) + "\n", inputs=inputs)
            status(f"results written to {output}")
        else:
            mlmkit.bias.render(report, output, inputs=inputs)
            status(f"report written to {output} (figures in {Path(output).stem}_figures/)")
    if as_json:
        typer.echo(dumps(report.to_dict(), indent=2))
    return as_json


def _print_pairs_audit(audit) -> None:
    console = _stdout()
    result = audit.result
    s = result.summary()

    def with_interval(name):
        text = _interval(audit.get(name))
        return f" {text}" if text else ""

    console.print("=" * 60)
    console.print(f"Total examples: {s.n}")
    console.print(f"Metric score: {round(s.metric_score, 2)}{with_interval('metric score')}")
    console.print(f"Stereotype score: {_fmt(s.stereotype_score)}"
                  f"{with_interval('stereotype score')}")
    console.print(f"Anti-stereotype score: {_fmt(s.antistereotype_score)}"
                  f"{with_interval('anti-stereotype score')}")
    console.print(f"Num. neutral: {s.neutral} {round(s.neutral_percent, 2)}")
    console.print("=" * 60)
    table = Table(title=f"{audit.benchmark} per bias type ({escape(audit.model)})")
    for column in ("bias type", "pairs", "metric", f"{audit.level:.0%} interval", "stereo",
                   "anti", "neutral", "JS"):
        table.add_column(column, justify="left" if column == "bias type" else "right")
    for group in audit.groups():
        g = result.summary(group)
        js = [x for x in audit.scores if x.name == "JS" and x.group == group]
        table.add_row(escape(group), str(g.n), _fmt(g.metric_score),
                      escape(_interval(audit.get("metric score", group))),
                      _fmt(g.stereotype_score), _fmt(g.antistereotype_score), str(g.neutral),
                      _fmt(js[0].value, 0) if js else "–")
    console.print(table)
    if s.n < 2:  # as the JSON result has it: a Gaussian is fitted to two scores or more
        console.print("Gaussian fits: need at least 2 pairs (raise --limit)")
        return
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
        cells = []
        for name, value in (("SS", s.ss), ("LM", s.lm), ("ICAT", s.icat)):
            interval = _interval(audit.get(name, group))
            cells.append(escape(_fmt(value) + (f" {interval}" if interval else "")))
        table.add_row(escape(group), str(s.count), *cells)
    _stdout().print(table)


@subcommand(bias_app, "crows", epilog=CROWS_EXAMPLE,
            short_help="CrowS-Pairs as the official metric.py, or AUL / AULA.")
def crows_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    data: str = typer.Argument(None, help="crows_pairs_anonymized.csv, - for standard input "
                               "(default: crows_pairs/crows_pairs_anonymized.csv in $MLMKIT_DATA, else "
                               "~/.cache/mlmkit/data)."),
    measure: str = typer.Option("crows", help="crows (official metric.py), aul or aula."),
    output: str = typer.Option("-", "-o", "--output", help=OUTPUT_HELP),
    pairs_csv: Path = typer.Option(None, "--pairs-csv", help="Also write every pair's scores "
                                   "here (CSV, the official output's columns)."),
    bootstrap: int = typer.Option(1000, help="Bootstrap replicates for the 95% intervals "
                                  "(0: none; at least 40 otherwise)."),
    limit: int = typer.Option(None, help="Score only the first N pairs (quick checks)."),
    lowercase: bool = typer.Option(None, "--lowercase/--no-lowercase",
                                   help="Lowercase the sentences (default: when the "
                                   "tokenizer is uncased, as metric.py)."),
    *, as_json: bool = JSON, runtime: Runtime,
) -> None:
    """Score CrowS-Pairs exactly as the official metric.py (or AUL / AULA), with intervals.

    Prints what metric.py prints, then a table per bias type and the distributional
    measures; every score has a seeded bootstrap interval.
    """
    with trusting(runtime.trust_remote_code):
        from mlmkit.bias.audit import benchmark, checked_items

        choice("measure", measure, ("crows", "aul", "aula"))
        inputs = [data if data is not None else benchmark(measure).default_data]
        _check_outputs(output, inputs, pairs_csv)
        items = checked_items(measure, data, n_boot=bootstrap, level=0.95, seed=runtime.seed,
                              batch_tokens=runtime.batch_tokens, limit=limit)  # before the model loads
        mlm = mlmkit.load(model, **runtime.load_keywords())
        began = time.perf_counter()
        with _warnings_as_lines():
            result = mlm.audit(measure, items, n_boot=bootstrap, seed=runtime.seed, limit=limit,
                               lowercase=lowercase)
        status(f"scored {result.n} pairs in {time.perf_counter() - began:.1f} s")
        if pairs_csv is not None:
            result.result.write_csv(pairs_csv, inputs=inputs)
            status(f"per-pair scores written to {pairs_csv}")
        if not _write(result, output, as_json, inputs):
            _print_pairs_audit(result)


@subcommand(bias_app, "stereoset", epilog=STEREOSET_EXAMPLE,
            short_help="StereoSet intrasentence: SS, LM and ICAT per domain.")
def stereoset_command(
    model: str = typer.Argument(..., help="Model directory or hub name."),
    data: str = typer.Argument(..., help="A StereoSet file in the official dev.json format "
                               "(- for standard input)."),
    output: str = typer.Option("-", "-o", "--output", help=OUTPUT_HELP),
    bootstrap: int = typer.Option(1000, help="Bootstrap replicates (0: none; at least 40 "
                                  "otherwise)."),
    limit: int = typer.Option(None, help="Score only the first N examples."),
    *, as_json: bool = JSON, runtime: Runtime,
) -> None:
    """StereoSet intrasentence: SS, LM and ICAT per domain, as the official evaluation.py."""
    with trusting(runtime.trust_remote_code):
        from mlmkit.bias.audit import checked_items

        _check_outputs(output, [data])
        items = checked_items("stereoset", data, n_boot=bootstrap, level=0.95, seed=runtime.seed,
                              batch_tokens=runtime.batch_tokens, limit=limit)
        mlm = mlmkit.load(model, **runtime.load_keywords())
        result = mlm.audit("stereoset", items, n_boot=bootstrap, seed=runtime.seed, limit=limit)
        if not _write(result, output, as_json, [data]):
            _print_stereoset_audit(result)


@subcommand(bias_app, "compare", epilog=COMPARE_EXAMPLE,
            short_help="Compare two models on one benchmark (paired bootstrap of A − B).")
def compare_command(
    model_a: str = typer.Argument(..., help="First model (A)."),
    model_b: str = typer.Argument(..., help="Second model (B)."),
    benchmark_name: str = typer.Option("crows", "--benchmark",
                                       help="crows, aul, aula or stereoset."),
    data: str = typer.Argument(None, help="The benchmark's data file, - for standard input "
                               "(CrowS-Pairs: default crows_pairs/crows_pairs_anonymized.csv "
                               "in $MLMKIT_DATA, else ~/.cache/mlmkit/data)."),
    output: str = typer.Option("-", "-o", "--output", help=OUTPUT_HELP),
    bootstrap: int = typer.Option(1000, help="Paired bootstrap replicates (0: none; at least "
                                  "40 otherwise)."),
    limit: int = typer.Option(None, help="Score only the first N items."),
    *, as_json: bool = JSON, runtime: Runtime,
) -> None:
    """Compare two models on one benchmark: both scores and the paired-bootstrap A − B.

    Both models score the same items; each replicate draws one set of items for both, so
    the interval of A − B reflects the items they share. n is the items a score rests on.
    """
    with trusting(runtime.trust_remote_code):
        from mlmkit.bias.audit import benchmark, checked_items

        inputs = [data if data is not None else benchmark(benchmark_name).default_data]
        _check_outputs(output, inputs)
        items = checked_items(benchmark_name, data, n_boot=bootstrap, level=0.95, seed=runtime.seed,
                              batch_tokens=runtime.batch_tokens, limit=limit)
        mlm_a = mlmkit.load(model_a, **runtime.load_keywords())
        mlm_b = mlmkit.load(model_b, **runtime.load_keywords())
        with _warnings_as_lines():
            result = mlmkit.bias.compare(
                mlm_a, mlm_b, benchmark_name, items, n_boot=bootstrap, seed=runtime.seed,
                limit=limit, batch_tokens=runtime.batch_tokens)
        if _write(result, output, as_json, inputs):
            return
        table = Table(title=f"{benchmark_name}: A = {escape(result.model_a)}, B = "
                            f"{escape(result.model_b)} ({result.n} items, {bootstrap} paired "
                            f"resamples)")
        for column in ("group", "score", "n", "A", "B", "A − B",
                       f"{result.audit_a.level:.0%} interval of A − B"):
            table.add_column(column, justify="left" if column in ("group", "score") else "right")
        previous = None
        for d in result.differences:
            digits = mlmkit.bias.formatting.digits_for(d.name)
            group = "" if d.group == previous else f"{d.group} ({result.count(d.group)})"
            previous = d.group
            table.add_row(escape(group), escape(d.name), "–" if d.n is None else str(d.n),
                          _fmt(d.a, digits), _fmt(d.b, digits), _fmt(d.diff, digits),
                          escape(_interval(d, digits)))
        _stdout().print(table)


def register(app: typer.Typer) -> None:
    app.add_typer(bias_app, name="bias", short_help="Bias audits: CrowS-Pairs, AUL/AULA, "
                  "StereoSet, comparisons and reports.")

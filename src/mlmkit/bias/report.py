"""A readable bias report (HTML or Markdown) with one bar chart PNG per bias type.

The report opens with the summary figure (the headline score of every bias type, with
its interval), then one section per group: its titled chart, then its table of every
score with n (the items it rests on) and its bootstrap interval (or, for a comparison,
both models and the paired difference). Figures go to `<report>_figures/` next to the
report and are linked relatively; every file is written atomically. Table cells are
escaped for Markdown (a `|` in a score name such as KL(stereo||anti) stays in its cell).
"""

from __future__ import annotations

import html
import io
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlmkit.bias.audit import BiasAudit, benchmark
from mlmkit.bias.compare import BiasComparison
from mlmkit.bias.formatting import digits_for, interval, number
from mlmkit.core.output import check_output_path, open_output, write_text
from mlmkit.errors import InvalidArgument
from mlmkit.extras import require

FORMATS = (".html", ".md")
FEATURE = "a bias report's figures"  # drawn by matplotlib, from the extra mlmkit[plots]
TITLES = {"crows": "CrowS-Pairs", "aul": "CrowS-Pairs (AUL)", "aula": "CrowS-Pairs (AULA)",
          "stereoset": "StereoSet intrasentence"}


@dataclass
class _Table:
    title: str
    header: list[str]
    rows: list[list[str]]


def _slug(group: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", group)


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return buffer.getvalue()


def _bar_chart(title: str, labels: list[str], series: list[tuple[str, list, list]],
               reference: float | None, ylabel: str = "score") -> bytes:
    """Grouped bars: `series` = [(legend, values, (low, high) pairs)], CI whiskers."""

    Figure = require("matplotlib.figure", extra="plots", feature=FEATURE).Figure
    figure = Figure(figsize=(max(4.0, 0.9 * len(labels) * len(series) + 2), 3.2))
    axes = figure.subplots()
    width = 0.8 / len(series)
    x = np.arange(len(labels))
    for k, (legend, values, intervals) in enumerate(series):
        heights = np.array([np.nan if v is None else v for v in values], dtype=float)
        errors = np.array([[h - lo if lo is not None else 0.0 for h, (lo, _) in
                            zip(heights, intervals, strict=True)],
                           [hi - h if hi is not None else 0.0 for h, (_, hi) in
                            zip(heights, intervals, strict=True)]])
        axes.bar(x + (k - (len(series) - 1) / 2) * width, np.nan_to_num(heights), width,
                 yerr=np.nan_to_num(errors), capsize=3, label=legend)
    if reference is not None:
        axes.axhline(reference, color="grey", linestyle="--", linewidth=1)
    many = len(labels) > 4
    shown = labels if many else [textwrap.fill(label, 14) for label in labels]
    axes.set_xticks(x, shown, rotation=30 if many else 0, ha="right" if many else "center")
    axes.set_ylim(0, 100)
    axes.set_ylabel(ylabel)
    axes.set_title(title, fontsize="medium")
    if len(series) > 1:
        axes.legend(fontsize="small")
    return _png(figure)


def _count(report, group: str) -> int:
    return report.count(group)


def _audit_tables(audit: BiasAudit) -> dict[str, _Table]:
    tables = {}
    for group in audit.groups():
        rows = [[s.name, number(s.value, digits_for(s.name)), "–" if s.n is None else str(s.n),
                 interval(s, digits_for(s.name))]
                for s in audit.scores if s.group == group]
        tables[group] = _Table(f"{group} ({_count(audit, group)} items)",
                               ["score", "value", "n", f"{audit.level:.0%} interval"], rows)
    return tables


def _comparison_tables(comparison: BiasComparison) -> dict[str, _Table]:
    tables = {}
    for group in comparison.groups():
        rows = [[d.name, number(d.a, digits_for(d.name)), number(d.b, digits_for(d.name)),
                 number(d.diff, digits_for(d.name)), "–" if d.n is None else str(d.n),
                 interval(d, digits_for(d.name))]
                for d in comparison.differences if d.group == group]
        tables[group] = _Table(f"{group} ({_count(comparison, group)} items)",
                               ["score", "A", "B", "A − B", "n",
                                f"{comparison.audit_a.level:.0%} interval of A − B"], rows)
    return tables


def _figures(report, figure_dir: Path) -> tuple[tuple[str, str], dict[str, tuple[str, str]]]:
    """Write the PNGs: (title, relative path) of the summary and of each group's figure."""
    is_comparison = isinstance(report, BiasComparison)
    audits = [report.audit_a, report.audit_b] if is_comparison else [report]
    name = audits[0].benchmark
    spec = benchmark(name)
    bench = TITLES.get(name, name)
    reference = 50.0 if name != "stereoset" else None
    level = f"{audits[0].level:.0%}"
    legends = ([f"A: {report.model_a}", f"B: {report.model_b}"] if is_comparison
               else [audits[0].model])
    groups = audits[0].groups()
    ylabel = "score (50 = no preference)" if reference is not None else "score"

    def series_for(names, group_list):
        series = []
        for legend, a in zip(legends, audits, strict=True):
            scores = [a.get(n, g) for n, g in zip(names, group_list, strict=True)]
            series.append((legend, [s.value for s in scores], [(s.low, s.high) for s in scores]))
        return series

    figure_dir.mkdir(parents=True, exist_ok=True)
    title = f"{bench}: {spec.headline} by bias type ({level} bootstrap intervals)"
    labels = [f"{g} (n={_count(report, g)})" for g in groups]
    overview = _bar_chart(title, labels, series_for([spec.headline] * len(groups), groups),
                          reference, ylabel)
    _write_png(figure_dir / "overview.png", overview)
    summary = (title, f"{figure_dir.name}/overview.png")
    per_group = {}
    for group in groups:
        title = f"{bench}, {group} (n={_count(report, group)}): " + ", ".join(spec.bars)
        png = _bar_chart(title, list(spec.bars),
                         series_for(list(spec.bars), [group] * len(spec.bars)), reference,
                         ylabel)
        path = figure_dir / f"{_slug(group)}.png"
        _write_png(path, png)
        per_group[group] = (title, f"{figure_dir.name}/{path.name}")
    return summary, per_group


def _write_png(path: Path, png: bytes) -> None:
    with open_output(path, what="figure", mode="wb") as handle:
        handle.write(png)


def _header_lines(report) -> list[str]:
    if isinstance(report, BiasComparison):
        a = report.audit_a
        return [f"Model A: {report.model_a}", f"Model B: {report.model_b}",
                f"Items: {report.n}",
                f"Paired bootstrap: {a.n_boot} replicates, seed {a.seed}"]
    lines = [f"Model: {report.model}", f"Items: {report.n}",
             f"Bootstrap: {report.n_boot} replicates, seed {report.seed}"]
    if report.benchmark != "stereoset":
        s = report.result.summary()
        lines.append(f"Neutral pairs: {s.neutral} ({number(s.neutral_percent)}%)")
    return lines


def render(report, path: str | Path, inputs=()) -> None:
    """Write `report` (a BiasAudit or BiasComparison) to `path` (.html or .md) with figures:
    the summary figure first, then per group its titled figure and its table."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise InvalidArgument(f"report {str(path)!r} (-o): the file must end in .html or .md")
    check_output_path(path, inputs=inputs, what="report")
    is_comparison = isinstance(report, BiasComparison)
    name = report.benchmark
    title = f"Bias report: {TITLES.get(name, name)}" + (" (comparison)" if is_comparison else "")
    tables = _comparison_tables(report) if is_comparison else _audit_tables(report)
    summary, figures = _figures(report, path.parent / f"{path.stem}_figures")
    sections = [(tables[group], figures[group]) for group in report.groups()]
    lines = _header_lines(report)
    if path.suffix.lower() == ".md":
        text = _markdown(title, lines, summary, sections)
    else:
        text = _html(title, lines, summary, sections)
    write_text(path, text, inputs=inputs, what="report")


def md_cell(text: str) -> str:
    """A Markdown table cell: `|` escaped, line breaks as spaces."""
    return " ".join(str(text).split()).replace("\\", "\\\\").replace("|", "\\|")


def _markdown(title, lines, summary, sections) -> str:
    caption, rel = summary
    out = [f"# {title}", ""] + [f"- {line}" for line in lines] + ["",
           f"![{md_cell(caption)}]({rel})", ""]
    for table, (fig_caption, fig_rel) in sections:
        out += [f"## {table.title}", "", f"![{md_cell(fig_caption)}]({fig_rel})", "",
                "| " + " | ".join(md_cell(h) for h in table.header) + " |",
                "|" + "---|" * len(table.header)]
        out += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in table.rows]
        out.append("")
    return "\n".join(out) + "\n"


def _html(title, lines, summary, sections) -> str:
    e = html.escape
    caption, rel = summary
    out = ["<!doctype html>", "<html><head><meta charset='utf-8'>", f"<title>{e(title)}</title>",
           "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}"
           "img{max-width:100%}"
           "table{border-collapse:collapse;margin-bottom:1.5em}"
           "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}"
           "td:first-child,th:first-child{text-align:left}</style>", "</head><body>",
           f"<h1>{e(title)}</h1>", "<ul>"] + [f"<li>{e(line)}</li>" for line in lines] + [
           "</ul>", f"<figure><img src='{e(rel)}' alt='{e(caption)}'>"
           f"<figcaption>{e(caption)}</figcaption></figure>"]
    for table, (fig_caption, fig_rel) in sections:
        out += [f"<h2>{e(table.title)}</h2>",
                f"<figure><img src='{e(fig_rel)}' alt='{e(fig_caption)}'>"
                f"<figcaption>{e(fig_caption)}</figcaption></figure>", "<table>",
                "<tr>" + "".join(f"<th>{e(h)}</th>" for h in table.header) + "</tr>"]
        out += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in table.rows]
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"

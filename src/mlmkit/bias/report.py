"""A readable bias report (HTML or Markdown) with one bar chart PNG per bias type.

The report lists every score with its bootstrap interval (or, for a comparison, both
models and the paired difference), and draws the benchmark's main scores per bias type
plus an overview of the headline score across types. Figures go to `<report>_figures/`
next to the report and are linked relatively; every file is written atomically.
"""

from __future__ import annotations

import html
import io
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from mlmkit.bias.audit import BiasAudit, benchmark
from mlmkit.bias.compare import BiasComparison
from mlmkit.cache import atomic_write_bytes, atomic_write_text
from mlmkit.errors import MlmkitError

FORMATS = (".html", ".md")
TITLES = {"crows": "CrowS-Pairs", "aul": "CrowS-Pairs (AUL)", "aula": "CrowS-Pairs (AULA)",
          "stereoset": "StereoSet intrasentence"}


@dataclass
class _Table:
    title: str
    header: list[str]
    rows: list[list[str]]


def _num(value, digits: int = 2) -> str:
    """Fixed decimals; digits = 0 means 3 significant digits (divergences can be tiny)."""
    if value is None or value != value:
        return "–"
    return f"{value:.3g}" if digits == 0 else f"{value:.{digits}f}"


def _interval(low, high, digits: int = 2) -> str:
    if low is None or high is None:
        return "–"
    return f"[{_num(low, digits)}, {_num(high, digits)}]"


def _digits(name: str) -> int:
    return 0 if name.startswith(("KL", "JS")) else 2


def _slug(group: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", group)


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return buffer.getvalue()


def _bar_chart(title: str, labels: list[str], series: list[tuple[str, list, list]],
               reference: float | None) -> bytes:
    """Grouped bars: `series` = [(legend, values, (low, high) pairs)], CI whiskers."""
    import numpy as np
    from matplotlib.figure import Figure

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
    axes.set_title(title)
    if len(series) > 1:
        axes.legend(fontsize="small")
    return _png(figure)


def _audit_tables(audit: BiasAudit) -> list[_Table]:
    tables = []
    for group in audit.groups():
        rows = [[s.name, _num(s.value, _digits(s.name)),
                 _interval(s.low, s.high, _digits(s.name))]
                for s in audit.scores if s.group == group]
        n = audit.result.score(group).count if hasattr(audit.result, "score") else \
            audit.result.summary(group).n
        tables.append(_Table(f"{group} ({n} items)", ["score", "value",
                                                      f"{audit.level:.0%} interval"], rows))
    return tables


def _comparison_tables(comparison: BiasComparison) -> list[_Table]:
    tables = []
    for group in comparison.groups():
        rows = [[d.name, _num(d.a, _digits(d.name)), _num(d.b, _digits(d.name)),
                 _num(d.diff, _digits(d.name)), _interval(d.low, d.high, _digits(d.name))]
                for d in comparison.differences if d.group == group]
        tables.append(_Table(group, ["score", "A", "B", "A − B",
                                     f"{comparison.audit_a.level:.0%} interval of A − B"],
                             rows))
    return tables


def _figures(report, figure_dir: Path) -> list[tuple[str, str]]:
    """Write the PNGs; return (caption, relative path) per figure."""
    is_comparison = isinstance(report, BiasComparison)
    audits = [report.audit_a, report.audit_b] if is_comparison else [report]
    name = audits[0].benchmark
    spec = benchmark(name)
    reference = 50.0 if name != "stereoset" else None
    legends = ([f"A: {report.model_a}", f"B: {report.model_b}"] if is_comparison
               else [audits[0].model])
    groups = audits[0].groups()
    written = []

    def series_for(names, group_list):
        series = []
        for legend, a in zip(legends, audits, strict=True):
            scores = [a.get(n, g) for n, g in zip(names, group_list, strict=True)]
            series.append((legend, [s.value for s in scores], [(s.low, s.high) for s in scores]))
        return series

    figure_dir.mkdir(parents=True, exist_ok=True)
    overview = _bar_chart(f"{spec.headline} by bias type", groups,
                          series_for([spec.headline] * len(groups), groups), reference)
    atomic_write_bytes(figure_dir / "overview.png", overview)
    written.append((f"{spec.headline} by bias type", f"{figure_dir.name}/overview.png"))
    for group in groups:
        png = _bar_chart(group, list(spec.bars), series_for(list(spec.bars),
                                                             [group] * len(spec.bars)),
                         reference)
        path = figure_dir / f"{_slug(group)}.png"
        atomic_write_bytes(path, png)
        written.append((group, f"{figure_dir.name}/{path.name}"))
    return written


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
        lines.append(f"Neutral pairs: {s.neutral} ({_num(s.neutral_percent)}%)")
    return lines


def render(report, path: str | Path) -> None:
    """Write `report` (a BiasAudit or BiasComparison) to `path` (.html or .md) with figures."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise MlmkitError(f"--report {str(path)!r}: the file must end in .html or .md")
    is_comparison = isinstance(report, BiasComparison)
    name = report.benchmark
    title = f"Bias report: {TITLES.get(name, name)}" + (" (comparison)" if is_comparison else "")
    tables = _comparison_tables(report) if is_comparison else _audit_tables(report)
    figures = _figures(report, path.parent / f"{path.stem}_figures")
    lines = _header_lines(report)
    if path.suffix.lower() == ".md":
        text = _markdown(title, lines, tables, figures)
    else:
        text = _html(title, lines, tables, figures)
    atomic_write_text(path, text)


def _markdown(title, lines, tables, figures) -> str:
    out = [f"# {title}", ""] + [f"- {line}" for line in lines] + [""]
    for table in tables:
        out += [f"## {table.title}", "", "| " + " | ".join(table.header) + " |",
                "|" + "---|" * len(table.header)]
        out += ["| " + " | ".join(row) + " |" for row in table.rows]
        out.append("")
    out += ["## Figures", ""]
    out += [f"![{caption}]({rel})" for caption, rel in figures]
    return "\n".join(out) + "\n"


def _html(title, lines, tables, figures) -> str:
    e = html.escape
    out = ["<!doctype html>", "<html><head><meta charset='utf-8'>", f"<title>{e(title)}</title>",
           "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}"
           "table{border-collapse:collapse;margin-bottom:1.5em}"
           "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}"
           "td:first-child,th:first-child{text-align:left}</style>", "</head><body>",
           f"<h1>{e(title)}</h1>", "<ul>"] + [f"<li>{e(line)}</li>" for line in lines] + ["</ul>"]
    for table in tables:
        out += [f"<h2>{e(table.title)}</h2>", "<table>",
                "<tr>" + "".join(f"<th>{e(h)}</th>" for h in table.header) + "</tr>"]
        out += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in table.rows]
        out.append("</table>")
    out.append("<h2>Figures</h2>")
    out += [f"<figure><img src='{e(rel)}' alt='{e(caption)}'><figcaption>{e(caption)}"
            f"</figcaption></figure>" for caption, rel in figures]
    out.append("</body></html>")
    return "\n".join(out) + "\n"

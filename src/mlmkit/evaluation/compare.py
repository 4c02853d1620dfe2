"""`mlmkit eval compare`: suite results side by side, with bootstrap 95% intervals and
paired tests on the same items.

Each number of a suite is a function of per-item outcomes (a mean of 0/1 correctness, or a
token-weighted ratio), so it goes through `mlmkit.core.statistics` (per-item weights, one
resampling for every score). Two models evaluated on the same items (the suite records a
key of its items) are compared with the paired bootstrap (the same draw for both) and, for
0/1 outcomes, McNemar's exact test; a difference is significant when the interval of the
difference excludes 0. Items that differ (e.g. another --quick size) get intervals but no
paired test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mlmkit.core.correlation import spearman_statistic
from mlmkit.core.results import Result
from mlmkit.core.statistics import Statistic, bootstrap, check_bootstrap, paired_bootstrap, ratio
from mlmkit.errors import InvalidArgument
from mlmkit.evaluation.suite import SuiteResult, format_value, is_percent


@dataclass
class MetricRow(Result):
    """One metric across models: values with intervals, and differences from the first."""

    metric: str
    values: list  # per model: {"value", "low", "high", "n"}
    differences: list = field(default_factory=list)  # per later model vs the first


@dataclass
class Comparison(Result):
    models: list[str]
    rows: list[MetricRow]
    n_boot: int
    level: float
    seed: int

    def markdown(self) -> str:
        head = ["metric", *self.models]
        head += [f"{m} − {self.models[0]}" for m in self.models[1:]]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for row in self.rows:
            cells = [row.metric]
            for v in row.values:
                if v is None:
                    cells.append("–")
                    continue
                interval = (f" [{format_value(row.metric, v['low'])}, "
                            f"{format_value(row.metric, v['high'])}]"
                            if v.get("low") is not None else "")
                cells.append(format_value(row.metric, v["value"]) + interval)
            for d in row.differences:
                cells.append(_diff_cell(row.metric, d))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append(f"\n{self.level:.0%} percentile bootstrap intervals ({self.n_boot} "
                     f"resamples, seed {self.seed}); * = the interval of the difference "
                     "excludes 0; p: McNemar's exact test (0/1 outcomes on the same items).")
        return "\n".join(lines) + "\n"


def _diff_cell(metric: str, d: dict | None) -> str:
    if d is None:
        return "–"
    scale = 100 if is_percent(metric) else 1
    unit = " pt" if scale == 100 else ""
    text = f"{scale * d['diff']:+.2f}{unit}"
    if d.get("low") is not None:
        text += f" [{scale * d['low']:+.2f}, {scale * d['high']:+.2f}]"
    if d.get("p") is not None:
        text += f" p={d['p']:.3g}"
    if d.get("significant"):
        text += " *"
    if d.get("note"):
        text += f" ({d['note']})"
    return text


def _statistic(name: str, item: dict) -> tuple[Statistic, int]:
    values = np.asarray(item["values"], dtype=np.float64)
    weights = item.get("weights")
    kind = item.get("kind", "mean")
    if kind == "mean":
        fn = ratio(values, None, scale=1.0)
    elif kind == "ratio":
        fn = ratio(values, np.asarray(weights, dtype=np.float64), scale=1.0)
    elif kind == "exp_ratio":
        inner = ratio(values, np.asarray(weights, dtype=np.float64), scale=1.0)

        def fn(w, inner=inner):
            return np.exp(inner(w))
    elif kind == "spearman":  # values: scores; weights: the measured values they rank
        fn = spearman_statistic(values, np.asarray(weights, dtype=np.float64))
    else:
        raise InvalidArgument(f"suite item {name!r} has an unknown kind {kind!r}")
    return Statistic(name, "overall", fn, len(values)), len(values)


def mcnemar(a, b) -> float | None:
    """Two-sided exact McNemar p-value of paired 0/1 outcomes (None when not 0/1)."""
    a, b = np.asarray(a), np.asarray(b)
    if not (np.isin(a, (0, 1)).all() and np.isin(b, (0, 1)).all()):
        return None
    only_a = int(np.sum((a == 1) & (b == 0)))
    only_b = int(np.sum((a == 0) & (b == 1)))
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0 ** n
    return min(1.0, 2.0 * tail)


def compare_suites(suites: list[SuiteResult], *, n_boot: int = 1000, level: float = 0.95,
                   seed: int = 0, names: list[str] | None = None) -> Comparison:
    """Intervals for every metric of every suite; differences of each suite from the first
    (paired bootstrap and McNemar where the items are the same)."""
    check_bootstrap(n_boot, level, seed)
    if len(suites) < 2:
        raise InvalidArgument("compare needs at least two suite results (runs or models)")
    names = names or [s.model for s in suites]
    metrics = list(dict.fromkeys(m for s in suites for m in s.metrics))
    rows = []
    for metric in metrics:
        values, stats = [], []
        for suite in suites:
            item = suite.items.get(metric)
            value = suite.metrics.get(metric)
            if value is None:
                values.append(None)
                stats.append(None)
                continue
            if item is None:
                values.append({"value": value, "low": None, "high": None, "n": None})
                stats.append(None)
                continue
            statistic, n = _statistic(metric, item)
            score = bootstrap([statistic], n, n_boot=n_boot, seed=seed, level=level)[0]
            values.append({"value": value, "low": score.low, "high": score.high, "n": n,
                           "note": score.note})
            stats.append((statistic, n, item))
        differences = []
        for k in range(1, len(suites)):
            a, b = stats[k], stats[0]
            if a is None or b is None:
                differences.append(None)
                continue
            if a[2].get("key") != b[2].get("key") or a[1] != b[1]:
                differences.append({"diff": values[k]["value"] - values[0]["value"],
                                    "low": None, "high": None, "p": None,
                                    "significant": None,
                                    "note": "different items: no paired test"})
                continue
            d = paired_bootstrap([a[0]], [b[0]], a[1], n_boot=n_boot, seed=seed,
                                 level=level)[0]
            p = mcnemar(a[2]["values"], b[2]["values"]) if a[2].get("kind") == "mean" else None
            significant = (d.low is not None and (d.low > 0 or d.high < 0))
            differences.append({"diff": d.diff, "low": d.low, "high": d.high, "p": p,
                                "significant": significant, "note": d.note})
        rows.append(MetricRow(metric, values, differences))
    return Comparison(models=names, rows=rows, n_boot=n_boot, level=level, seed=seed)

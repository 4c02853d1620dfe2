"""Spearman's rank correlation with a seeded bootstrap interval: how zero-shot scores are
compared with measured fitness (ProteinGym reports Spearman's ρ per assay)."""

from __future__ import annotations

import numpy as np

from mlmkit.core.statistics import (
    Score,
    _interval,
    check_bootstrap,
    resample_weights,
    spread_note,
    too_few,
    too_few_replicates,
)
from mlmkit.errors import InvalidArgument


def ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n of `values`, ties given their average rank."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    starts = np.concatenate([[True], sorted_values[1:] != sorted_values[:-1]])
    group = np.cumsum(starts) - 1
    first = np.nonzero(starts)[0]
    last = np.concatenate([first[1:], [len(values)]]) - 1
    average = (first + last) / 2.0 + 1.0
    out = np.empty(len(values), dtype=np.float64)
    out[order] = average[group]
    return out


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    x = x - x.mean()
    y = y - y.mean()
    denominator = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denominator) if denominator > 0 else float("nan")


def spearman(x, y) -> float:
    """Spearman's ρ of two equally long sequences (NaN when either is constant)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise InvalidArgument(f"spearman needs two equally long lists ({x.shape} vs {y.shape})")
    return pearson(ranks(x), ranks(y))


def spearman_score(x, y, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> Score:
    """ρ with a percentile bootstrap interval over items (pairs drawn with replacement)."""
    check_bootstrap(n_boot, level, seed)
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    value = spearman(x, y)
    n = len(x)
    note = too_few(n) or too_few_replicates(n_boot, level)
    if n and (np.ptp(x) == 0 or np.ptp(y) == 0):
        note = "undefined: one side holds a single value"
    if n_boot == 0 or note:
        return Score("spearman", "overall", value, n=n, note=note)
    replicates = []
    items = np.arange(n)
    for weights in resample_weights(n, n_boot, seed):
        for counts in weights.astype(np.int64):
            drawn = np.repeat(items, counts)
            replicates.append(spearman(x[drawn], y[drawn]))
    low, high = _interval(np.array(replicates), level)
    return Score("spearman", "overall", value, low, high, n, spread_note(low, high))


def spearman_statistic(x, y):
    """Spearman's ρ as a function of bootstrap weights (`fn(weights [B, N]) -> [B]`, the
    form `core.statistics.bootstrap` and `eval compare` take): each row of weights counts
    how often each pair is drawn."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    items = np.arange(len(x))

    def fn(weights: np.ndarray) -> np.ndarray:
        out = []
        for counts in np.asarray(weights):
            drawn = np.repeat(items, np.rint(counts).astype(np.int64))
            out.append(spearman(x[drawn], y[drawn]))
        return np.array(out)

    return fn

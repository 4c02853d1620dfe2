"""Seeded bootstrap intervals for every bias score, and paired differences between models.

Each score is written as a function of per-item weights (`fn(weights [B, N]) -> [B]`):
the point estimate uses weight 1 everywhere, a bootstrap replicate uses the number of
times each item was drawn. That makes one resample of all scores a few matrix products,
and the paired bootstrap of two models is the same draw applied to both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mlmkit.errors import MlmkitError

CHUNK = 256  # replicates drawn per block: bounds memory at CHUNK × N weights


@dataclass(frozen=True)
class Statistic:
    """A named score of one group ("overall" or a bias type) as a weighted function."""

    name: str
    group: str
    fn: Callable[[np.ndarray], np.ndarray]

    def value(self, n: int) -> float:
        return float(self.fn(np.ones((1, n)))[0])


@dataclass(frozen=True)
class Score:
    """A score with its bootstrap interval (None without a bootstrap)."""

    name: str
    group: str
    value: float
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Difference:
    """Model A's score, model B's, and the paired-bootstrap interval of A − B."""

    name: str
    group: str
    a: float
    b: float
    diff: float
    low: float | None = None
    high: float | None = None


def ratio(numerator: np.ndarray, denominator: np.ndarray | None = None, scale: float = 100.0):
    """`scale × Σ w·num / Σ w·den` (den defaults to 1 per item); NaN where Σ w·den = 0."""
    num = np.asarray(numerator, dtype=np.float64)
    den = np.ones_like(num) if denominator is None else np.asarray(denominator, np.float64)

    def fn(weights: np.ndarray) -> np.ndarray:
        top, bottom = weights @ num, weights @ den
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(bottom > 0, scale * top / np.where(bottom > 0, bottom, 1), np.nan)

    return fn


def resample_weights(n: int, n_boot: int, seed: int):
    """Yield blocks of bootstrap weights [b, n] (draw counts), seeded and deterministic."""
    if n <= 0:
        raise MlmkitError("the bootstrap needs at least one item")
    rng = np.random.default_rng(seed)
    done = 0
    while done < n_boot:
        b = min(CHUNK, n_boot - done)
        draws = rng.integers(0, n, size=(b, n))
        flat = (draws + n * np.arange(b)[:, None]).reshape(-1)
        yield np.bincount(flat, minlength=b * n).reshape(b, n).astype(np.float64)
        done += b


def _interval(values: np.ndarray, level: float) -> tuple[float | None, float | None]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None, None
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(finite, [tail, 100.0 - tail])
    return float(low), float(high)


def _check(n_boot: int, level: float) -> None:
    if n_boot < 0:
        raise MlmkitError(f"--bootstrap {n_boot} must be 0 (no intervals) or a positive count")
    if not 0.0 < level < 1.0:
        raise MlmkitError(f"confidence level {level} must be between 0 and 1 (e.g. 0.95)")


def bootstrap(
    statistics: Sequence[Statistic], n: int, n_boot: int = 1000, seed: int = 0,
    level: float = 0.95,
) -> list[Score]:
    """Point estimates and percentile intervals (`n_boot` = 0: estimates only)."""
    _check(n_boot, level)
    values = [s.value(n) for s in statistics]
    if n_boot == 0:
        return [Score(s.name, s.group, v) for s, v in zip(statistics, values, strict=True)]
    replicates = [[] for _ in statistics]
    for weights in resample_weights(n, n_boot, seed):
        for store, statistic in zip(replicates, statistics, strict=True):
            store.append(statistic.fn(weights))
    scores = []
    for statistic, value, store in zip(statistics, values, replicates, strict=True):
        low, high = _interval(np.concatenate(store), level)
        scores.append(Score(statistic.name, statistic.group, value, low, high))
    return scores


def paired_bootstrap(
    statistics_a: Sequence[Statistic], statistics_b: Sequence[Statistic], n: int,
    n_boot: int = 1000, seed: int = 0, level: float = 0.95,
) -> list[Difference]:
    """A − B for each score both models have, the same items drawn for both."""
    _check(n_boot, level)
    by_key = {(s.name, s.group): s for s in statistics_b}
    pairs = [(a, by_key[(a.name, a.group)]) for a in statistics_a if (a.name, a.group) in by_key]
    point = [(a.value(n), b.value(n)) for a, b in pairs]
    replicates = [[] for _ in pairs]
    if n_boot:
        for weights in resample_weights(n, n_boot, seed):
            for store, (a, b) in zip(replicates, pairs, strict=True):
                store.append(a.fn(weights) - b.fn(weights))
    result = []
    for (a, _), (va, vb), store in zip(pairs, point, replicates, strict=True):
        low, high = _interval(np.concatenate(store), level) if store else (None, None)
        result.append(Difference(a.name, a.group, va, vb, va - vb, low, high))
    return result

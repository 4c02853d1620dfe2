"""Seeded bootstrap intervals for every bias score, and paired differences between models.

Each score is written as a function of per-item weights (`fn(weights [B, N]) -> [B]`):
the point estimate uses weight 1 everywhere, a bootstrap replicate uses the number of
times each item was drawn. That makes one resample of all scores a few matrix products,
and the paired bootstrap of two models is the same draw applied to both.

An interval is only given where it means something: the score must rest on at least
`MIN_INTERVAL_ITEMS` items (its `n`, e.g. the non-neutral stereo pairs of a bias type for
the stereotype score); with fewer, `low`/`high` are None and `note` says why, rather than
printing a degenerate [x, x]. When every resample gives the same value the interval is
[x, x] by construction and `note` says so. Fewer replicates than leave one in each tail of
the interval (40 for 95%) give no intervals either, with a note saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mlmkit.core.checks import count, probability
from mlmkit.core.results import Result
from mlmkit.errors import InvalidArgument

CHUNK = 256  # replicates drawn per block: bounds memory at CHUNK × N weights
MIN_INTERVAL_ITEMS = 5  # fewer items than this: no interval (a few items give [x, x])
NO_SPREAD = "every resample gives the same value"


@dataclass(frozen=True)
class Statistic:
    """A named score of one group ("overall" or a bias type) as a weighted function."""

    name: str
    group: str
    fn: Callable[[np.ndarray], np.ndarray]
    n: int | None = None  # items the score rests on (None: unknown, no minimum applied)

    def value(self, n: int) -> float:
        return float(self.fn(np.ones((1, n)))[0])


@dataclass(frozen=True)
class Score(Result):
    """A score with its bootstrap interval (None without a bootstrap, or from too few items:
    `note` says which) and `n`, the number of items it rests on."""

    name: str
    group: str
    value: float
    low: float | None = None
    high: float | None = None
    n: int | None = None
    note: str | None = None


@dataclass(frozen=True)
class Difference(Result):
    """Model A's score, model B's, and the paired-bootstrap interval of A − B (`n`: the
    items the score rests on, the fewer of the two models'; `note`: why no interval)."""

    name: str
    group: str
    a: float
    b: float
    diff: float
    low: float | None = None
    high: float | None = None
    n: int | None = None
    note: str | None = None


def find(scores, name: str, group: str = "overall"):
    """The Score (or Difference) called `name` in `group`; KeyError when there is none."""
    for score in scores:
        if score.name == name and score.group == group:
            return score
    raise KeyError((name, group))


def too_few(n: int | None) -> str | None:
    """Why a score on `n` items gets no interval (None: it gets one)."""
    if n is not None and n < MIN_INTERVAL_ITEMS:
        return f"n = {n} < {MIN_INTERVAL_ITEMS}: too few items for an interval"
    return None


def spread_note(low, high) -> str | None:
    return NO_SPREAD if low is not None and low == high else None


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
        raise InvalidArgument("the bootstrap needs at least one item")
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


def min_replicates(level: float) -> int:
    """The fewest replicates that put at least one in each tail of a `level` interval."""
    return int(np.ceil(2.0 / (1.0 - level) - 1e-9))


# The most bootstrap replicates: far past where a 95% interval stops moving (10,000 is ample),
# and a size that ends in seconds; 10**14 ran for hours, growing in memory, before any output.
MAX_BOOT = 1_000_000


def check_bootstrap(n_boot, level: float = 0.95, seed=0) -> None:
    """`n_boot` 0 or enough replicates for the interval (at most MAX_BOOT); `level` in
    (0, 1); `seed` ≥ 0."""
    probability("level", level, closed_low=False)
    count("seed", seed, 0)
    whole = isinstance(n_boot, (int, np.integer)) and not isinstance(n_boot, bool)
    if not whole or n_boot < 0 or n_boot > MAX_BOOT:
        raise InvalidArgument(f"n_boot={n_boot!r} (--bootstrap) must be a whole number "
                              f"between 0 and {MAX_BOOT:,} (0: no intervals; 1,000 to 10,000 "
                              "is usual)")


def too_few_replicates(n_boot: int, level: float) -> str | None:
    """Why `n_boot` replicates give no `level` interval (None: they give one)."""
    least = min_replicates(level)
    if 0 < n_boot < least:
        return (f"{n_boot} resamples < {least}: too few for a {level:.0%} interval "
                "(--bootstrap)")
    return None



def bootstrap(
    statistics: Sequence[Statistic], n: int, n_boot: int = 1000, seed: int = 0,
    level: float = 0.95,
) -> list[Score]:
    """Point estimates and percentile intervals (`n_boot` = 0: estimates only)."""
    check_bootstrap(n_boot, level, seed)
    values = [s.value(n) for s in statistics]
    if n_boot == 0:
        return [Score(s.name, s.group, v, n=s.n)
                for s, v in zip(statistics, values, strict=True)]
    replicates = [[] for _ in statistics]
    for weights in resample_weights(n, n_boot, seed):
        for store, statistic in zip(replicates, statistics, strict=True):
            store.append(statistic.fn(weights))
    scores = []
    for statistic, value, store in zip(statistics, values, replicates, strict=True):
        note = too_few_replicates(n_boot, level) or too_few(statistic.n)
        low, high = (None, None) if note else _interval(np.concatenate(store), level)
        scores.append(Score(statistic.name, statistic.group, value, low, high, statistic.n,
                            note or spread_note(low, high)))
    return scores


def paired_bootstrap(
    statistics_a: Sequence[Statistic], statistics_b: Sequence[Statistic], n: int,
    n_boot: int = 1000, seed: int = 0, level: float = 0.95,
) -> list[Difference]:
    """A − B for each score both models have, the same items drawn for both."""
    check_bootstrap(n_boot, level, seed)
    by_key = {(s.name, s.group): s for s in statistics_b}
    pairs = [(a, by_key[(a.name, a.group)]) for a in statistics_a if (a.name, a.group) in by_key]
    point = [(a.value(n), b.value(n)) for a, b in pairs]
    replicates = [[] for _ in pairs]
    if n_boot:
        for weights in resample_weights(n, n_boot, seed):
            for store, (a, b) in zip(replicates, pairs, strict=True):
                store.append(a.fn(weights) - b.fn(weights))
    result = []
    for (a, b), (va, vb), store in zip(pairs, point, replicates, strict=True):
        n = None if a.n is None or b.n is None else min(a.n, b.n)
        note = (too_few_replicates(n_boot, level) or too_few(n)) if store else None
        low, high = (None, None) if note or not store else _interval(np.concatenate(store),
                                                                      level)
        result.append(Difference(a.name, a.group, va, vb, va - vb, low, high, n,
                                 note or spread_note(low, high)))
    return result

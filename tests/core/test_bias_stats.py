"""Bootstrap intervals, paired differences, and the Gaussian KL / JS divergences."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mlmkit.bias.crows_data import CrowsPair
from mlmkit.bias.distributional import (
    divergence_statistics,
    divergences,
    fit_gaussian,
    js_gaussian,
    kl_gaussian,
)
from mlmkit.bias.pairs import PairScores
from mlmkit.core.statistics import Statistic, bootstrap, paired_bootstrap, ratio
from mlmkit.errors import InvalidArgument


def _numeric_kl(mp, sp, mq, sq):
    """Brute force: KL on a fine grid (trapezoid rule)."""
    lo, hi = min(mp - 14 * sp, mq - 14 * sq), max(mp + 14 * sp, mq + 14 * sq)
    x = np.linspace(lo, hi, 400_001)
    p = np.exp(-0.5 * ((x - mp) / sp) ** 2) / (sp * math.sqrt(2 * math.pi))
    q = np.exp(-0.5 * ((x - mq) / sq) ** 2) / (sq * math.sqrt(2 * math.pi))
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(p > 0, p * (np.log(p) - np.log(q)), 0.0)
    return np.trapezoid(f, x)


def _numeric_js(mp, sp, mq, sq):
    lo, hi = min(mp - 14 * sp, mq - 14 * sq), max(mp + 14 * sp, mq + 14 * sq)
    x = np.linspace(lo, hi, 400_001)
    p = np.exp(-0.5 * ((x - mp) / sp) ** 2) / (sp * math.sqrt(2 * math.pi))
    q = np.exp(-0.5 * ((x - mq) / sq) ** 2) / (sq * math.sqrt(2 * math.pi))
    m = (p + q) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        fp = np.where(p > 0, p * np.log(p / m), 0.0)
        fq = np.where(q > 0, q * np.log(q / m), 0.0)
    return 0.5 * np.trapezoid(fp, x) + 0.5 * np.trapezoid(fq, x)


def test_kl_of_known_gaussians():
    assert kl_gaussian(0, 1, 1, 1) == pytest.approx(0.5)
    assert kl_gaussian(0, 1, 0, 2) == pytest.approx(math.log(2) + 1 / 8 - 0.5)
    assert kl_gaussian(3, 2, 3, 2) == pytest.approx(0.0)
    assert kl_gaussian(-2, 0.5, 1, 3) == pytest.approx(_numeric_kl(-2, 0.5, 1, 3), rel=1e-6)


@pytest.mark.parametrize("params", [(0, 1, 1, 1), (0, 1, 0, 3), (-5, 0.3, 2, 4), (0, 1, 0.1, 1)])
def test_js_of_known_gaussians_matches_numeric_integration(params):
    ours = float(js_gaussian(*params))
    assert ours == pytest.approx(_numeric_js(*params), rel=1e-4, abs=1e-9)
    assert ours == pytest.approx(float(js_gaussian(params[2], params[3], params[0], params[1])))


def test_js_bounds():
    assert float(js_gaussian(0, 1, 0, 1)) == pytest.approx(0.0, abs=1e-12)
    assert float(js_gaussian(0, 1, 100, 1)) == pytest.approx(math.log(2), rel=1e-6)
    with pytest.raises(InvalidArgument, match="two Gaussians with std > 0"):
        js_gaussian(0, 0, 1, 1)


def test_fitted_divergences_recover_the_generating_gaussians():
    rng = np.random.default_rng(0)
    stereo, anti = rng.normal(-10, 2, 20_000), rng.normal(-12, 3, 20_000)
    d = divergences(stereo, anti)
    assert d.stereo.mean == pytest.approx(-10, abs=0.05)
    assert d.anti.std == pytest.approx(3, abs=0.05)
    assert d.kl_stereo_anti == pytest.approx(float(kl_gaussian(-10, 2, -12, 3)), abs=0.01)
    assert d.js == pytest.approx(_numeric_js(-10, 2, -12, 3), abs=0.01)
    with pytest.raises(InvalidArgument, match="at least 2 scores, got 1"):
        fit_gaussian([1.0])


def test_weighted_divergence_statistics_equal_the_direct_fit():
    rng = np.random.default_rng(1)
    s, a = rng.normal(0, 1, 50), rng.normal(0.5, 2, 50)
    stats = {st.name: st for st in divergence_statistics(s, a)}
    d = divergences(s, a)
    assert stats["KL(stereo||anti)"].value(50) == pytest.approx(d.kl_stereo_anti)
    assert stats["KL(anti||stereo)"].value(50) == pytest.approx(d.kl_anti_stereo)
    assert stats["JS"].value(50) == pytest.approx(d.js)
    # weight 2 on an item = the item listed twice
    w = np.ones((1, 50))
    w[0, 3] = 2
    doubled = divergences(np.append(s, s[3]), np.append(a, a[3]))
    assert stats["JS"].fn(w)[0] == pytest.approx(doubled.js)


def _mean_statistic(x):
    return Statistic("mean", "overall", ratio(np.asarray(x, float), scale=1.0))


def test_bootstrap_interval_covers_the_estimate_and_shrinks_with_more_data():
    rng = np.random.default_rng(2)
    small = rng.normal(0, 1, 50)
    large = np.tile(small, 16)  # same distribution, 16x the items
    (s,) = bootstrap([_mean_statistic(small)], 50, n_boot=500, seed=0)
    (big,) = bootstrap([_mean_statistic(large)], 800, n_boot=500, seed=0)
    assert s.low < s.value < s.high
    assert big.low < big.value < big.high
    assert big.value == pytest.approx(s.value)
    assert (big.high - big.low) < 0.5 * (s.high - s.low)
    # the textbook width: about 2 × 1.96 × sd / sqrt(n)
    assert (s.high - s.low) == pytest.approx(2 * 1.96 * small.std() / math.sqrt(50), rel=0.2)


def test_bootstrap_is_seeded():
    x = np.random.default_rng(3).normal(size=40)
    a = bootstrap([_mean_statistic(x)], 40, n_boot=300, seed=7)
    b = bootstrap([_mean_statistic(x)], 40, n_boot=300, seed=7)
    c = bootstrap([_mean_statistic(x)], 40, n_boot=300, seed=8)
    assert a == b and a != c
    (none,) = bootstrap([_mean_statistic(x)], 40, n_boot=0)
    assert none.low is None and none.value == pytest.approx(x.mean())
    with pytest.raises(InvalidArgument, match=r"n_boot=-1 \(--bootstrap\) must be a whole number"):
        bootstrap([_mean_statistic(x)], 40, n_boot=-1)


def _pairs(n, rng):
    directions = rng.choice(["stereo", "antistereo"], size=n, p=[0.8, 0.2])
    types = rng.choice(["gender", "age"], size=n)
    return [CrowsPair(i + 1, i + 2, f"m{i}", f"l{i}", d, t)
            for i, (d, t) in enumerate(zip(directions, types, strict=True))]


def test_paired_bootstrap_of_a_model_with_itself_is_zero_and_detects_a_shift():
    rng = np.random.default_rng(4)
    n = 300
    pairs = _pairs(n, rng)
    more, less = rng.normal(0, 1, n), rng.normal(0, 1, n)
    a = PairScores(pairs, more, less, model="a")
    same = paired_bootstrap(a.statistics(), a.statistics(), n, n_boot=200, seed=0)
    for d in same:
        assert d.diff == 0 and d.low == 0 and d.high == 0
    b = PairScores(pairs, more + 1.0, less, model="b")  # b prefers sent_more much more often
    diffs = {(d.name, d.group): d for d in
             paired_bootstrap(a.statistics(), b.statistics(), n, n_boot=300, seed=0)}
    metric = diffs[("metric score", "overall")]
    assert metric.diff == pytest.approx(a.summary().metric_score - b.summary().metric_score)
    assert metric.low < metric.diff < metric.high < 0
    # the paired interval is narrower than the two independent intervals would suggest
    sa = {(s.name, s.group): s for s in bootstrap(a.statistics(), n, n_boot=300, seed=0)}
    width_a = sa[("metric score", "overall")].high - sa[("metric score", "overall")].low
    assert metric.high - metric.low < math.sqrt(2) * width_a


def test_pair_statistics_match_the_summary():
    rng = np.random.default_rng(5)
    pairs = _pairs(120, rng)
    scores = PairScores(pairs, np.round(rng.normal(0, 1, 120), 1), np.round(rng.normal(0, 1, 120), 1))
    values = {(s.name, s.group): s.value(120) for s in scores.statistics()}
    for group in scores.groups():
        summary = scores.summary(group)
        assert values[("metric score", group)] == pytest.approx(summary.metric_score)
        assert values[("stereotype score", group)] == pytest.approx(summary.stereotype_score)
        assert values[("anti-stereotype score", group)] == pytest.approx(
            summary.antistereotype_score)
        assert values[("neutral %", group)] == pytest.approx(summary.neutral_percent)

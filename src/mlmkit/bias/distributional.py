"""Distributional bias measures: Gaussians fitted to the scores of the two sentence sets.

Counting pairwise wins throws away how far apart the scores are; fitting a Gaussian to
the (pseudo-)log-likelihoods of the stereotypical sentences and one to those of the
anti-stereotypical sentences, and comparing them by KL and Jensen-Shannon divergence,
is more stable with small data. Divergences are in nats (JS ≤ ln 2); KL is closed-form,
JS is integrated numerically.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlmkit.core.statistics import Statistic
from mlmkit.errors import InvalidArgument

GRID_POINTS = 2001  # per component: the mixture is resolved at each Gaussian's own scale
GRID_WIDTH = 12.0  # standard deviations either side of each mean

@dataclass(frozen=True)
class Gaussian:
    """A normal distribution fitted by maximum likelihood (std with ddof = 0)."""

    mean: float
    std: float


def fit_gaussian(values) -> Gaussian:
    """Maximum-likelihood Gaussian of `values` (at least two, not all equal)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size < 2:
        raise InvalidArgument(f"a Gaussian fit needs at least 2 scores, got {x.size}")
    return Gaussian(float(x.mean()), float(x.std()))


def kl_gaussian(mean_p, std_p, mean_q, std_q):
    """KL(P ‖ Q) of two normals, closed form (elementwise over arrays)."""
    mean_p, std_p, mean_q, std_q = (np.asarray(a, np.float64) for a in (mean_p, std_p, mean_q,
                                                                          std_q))
    with np.errstate(divide="ignore", invalid="ignore"):
        return (np.log(std_q / std_p) + (std_p**2 + (mean_p - mean_q) ** 2) / (2 * std_q**2)
                - 0.5)


def _log_normal(x, mean, std):
    return -0.5 * ((x - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)


def js_gaussian(mean_p, std_p, mean_q, std_q):
    """Jensen–Shannon divergence of two normals (nats), by quadrature; elementwise.

    The integrand ½[p log(p/m) + q log(q/m)] = (p+q)/2 · (ln 2 − H(p/(p+q))) is never
    negative, and it vanishes where p = q, so the error shrinks with the divergence
    itself. It is integrated by the trapezoid rule on the union of a grid around each
    Gaussian (each resolved at its own scale).
    """
    mean_p, std_p, mean_q, std_q = np.broadcast_arrays(
        *(np.asarray(a, np.float64) for a in (mean_p, std_p, mean_q, std_q)))
    if np.any(std_p <= 0) or np.any(std_q <= 0):
        raise InvalidArgument("the Jensen-Shannon divergence needs two Gaussians with std > 0 "
                          "(the scores of one set are all equal)")
    unit = np.linspace(-GRID_WIDTH, GRID_WIDTH, GRID_POINTS)
    x = np.sort(np.concatenate([mean_p[..., None] + std_p[..., None] * unit,
                                mean_q[..., None] + std_q[..., None] * unit], axis=-1), axis=-1)
    log_p = _log_normal(x, mean_p[..., None], std_p[..., None])
    log_q = _log_normal(x, mean_q[..., None], std_q[..., None])
    log_m = np.logaddexp(log_p, log_q) - np.log(2.0)
    integrand = 0.5 * (np.exp(log_p) * (log_p - log_m) + np.exp(log_q) * (log_q - log_m))
    return np.trapezoid(np.maximum(integrand, 0.0), x, axis=-1)  # max: rounding noise only


@dataclass(frozen=True)
class Divergences:
    """The two fitted Gaussians and their divergences."""

    stereo: Gaussian
    anti: Gaussian
    kl_stereo_anti: float
    kl_anti_stereo: float
    js: float


def divergences(stereo_scores, anti_scores) -> Divergences:
    """Fit both sets and compare them: KL both ways and JS (in nats)."""
    p, q = fit_gaussian(stereo_scores), fit_gaussian(anti_scores)
    js = float(js_gaussian(p.mean, p.std, q.mean, q.std)) if p.std > 0 and q.std > 0 else \
        float("nan")
    return Divergences(
        stereo=p, anti=q,
        kl_stereo_anti=float(kl_gaussian(p.mean, p.std, q.mean, q.std)),
        kl_anti_stereo=float(kl_gaussian(q.mean, q.std, p.mean, p.std)),
        js=js,
    )


def _weighted_fit(weights: np.ndarray, x: np.ndarray):
    total = weights.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):  # no item drawn: NaN, skipped
        mean = weights @ x / total
        var = np.maximum(weights @ (x * x) / total - mean**2, 0.0)  # rounding below 0
    return mean, np.sqrt(var)


def divergence_statistics(stereo_scores, anti_scores, group: str = "overall") -> list[Statistic]:
    """KL/JS as weighted statistics over paired items (item i has one score in each set)."""
    s = np.asarray(stereo_scores, np.float64)
    a = np.asarray(anti_scores, np.float64)
    if s.shape != a.shape:
        raise InvalidArgument("the stereotypical and anti-stereotypical scores must be paired")
    shift = np.concatenate([s, a]).mean() if s.size else 0.0  # KL/JS are shift-invariant
    s, a = s - shift, a - shift

    def fits(weights):
        return (*_weighted_fit(weights, s), *_weighted_fit(weights, a))

    def safe(fn):
        def wrapped(weights):
            mp, sp, mq, sq = fits(weights)
            ok = (sp > 0) & (sq > 0)
            out = np.full(len(weights), np.nan)
            if ok.any():
                out[ok] = fn(mp[ok], sp[ok], mq[ok], sq[ok])
            return out
        return wrapped

    return [
        Statistic("KL(stereo||anti)", group, safe(kl_gaussian)),
        Statistic("KL(anti||stereo)", group,
                  safe(lambda mp, sp, mq, sq: kl_gaussian(mq, sq, mp, sp))),
        Statistic("JS", group, safe(js_gaussian)),
    ]

"""Ranking metrics of a knowledge probe: precision at k and mean reciprocal rank."""

from __future__ import annotations

import numpy as np

from mlmkit.probe.outcomes import ProbeScores


def probe_scores(ranks: np.ndarray, skipped: int, unknown: int = 0) -> ProbeScores:
    """P@1, P@10 and MRR of 1-based `ranks` (None when nothing was probed)."""
    ranks = np.asarray(ranks, dtype=np.float64)
    if len(ranks) == 0:
        return ProbeScores(n=0, skipped=int(skipped), p_at_1=None, p_at_10=None, mrr=None,
                           unknown=int(unknown))
    return ProbeScores(n=len(ranks), skipped=int(skipped),
                       p_at_1=float(np.mean(ranks <= 1)), p_at_10=float(np.mean(ranks <= 10)),
                       mrr=float(np.mean(1.0 / ranks)), unknown=int(unknown))


def macro_scores(groups: list[ProbeScores]) -> ProbeScores:
    """The mean over groups of each metric (LAMA averages relations this way)."""
    probed = [g for g in groups if g.n]
    n, skipped = sum(g.n for g in groups), sum(g.skipped for g in groups)
    unknown = sum(g.unknown for g in groups)
    if not probed:
        return ProbeScores(n=n, skipped=skipped, p_at_1=None, p_at_10=None, mrr=None,
                           unknown=unknown)
    return ProbeScores(n=n, skipped=skipped,
                       p_at_1=float(np.mean([g.p_at_1 for g in probed])),
                       p_at_10=float(np.mean([g.p_at_10 for g in probed])),
                       mrr=float(np.mean([g.mrr for g in probed])), unknown=unknown)

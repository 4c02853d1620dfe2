"""Learning-rate schedules as pure functions of training progress (a share of the budget).

A schedule of progress, not of step numbers, works the same for budgets in steps, tokens
or wall-clock time, and needs no state of its own to resume.
"""

from __future__ import annotations

import math

from mlmkit.errors import MlmkitError

SCHEDULES = ("linear", "cosine", "wsd", "constant")


def lr_factor(progress: float, *, schedule: str, warmup: float, decay: float = 0.2,
              min_lr: float = 0.0) -> float:
    """The share of the peak learning rate at `progress` in [0, 1].

    `warmup` is the share of the budget spent warming up linearly from 0; after it,
    `linear` and `cosine` decay to `min_lr`, `wsd` stays at the peak and decays linearly
    over the last `decay` share, `constant` stays at the peak.
    """
    if schedule not in SCHEDULES:
        raise MlmkitError(f"unknown schedule {schedule!r}: use one of {list(SCHEDULES)}")
    progress = min(max(progress, 0.0), 1.0)
    if warmup > 0 and progress < warmup:
        return progress / warmup
    if schedule == "constant":
        return 1.0
    if schedule == "wsd":
        start = 1.0 - decay
        if progress < start or decay <= 0:
            return 1.0
        return min_lr + (1.0 - min_lr) * (1.0 - (progress - start) / decay)
    rest = (progress - warmup) / max(1.0 - warmup, 1e-12)
    if schedule == "linear":
        return min_lr + (1.0 - min_lr) * (1.0 - rest)
    return min_lr + (1.0 - min_lr) * 0.5 * (1.0 + math.cos(math.pi * rest))


def warmup_share(warmup: float, total_steps: int | None) -> float:
    """`warmup` as a share of the budget: a value >= 1 is a number of steps."""
    if warmup < 1:
        return warmup
    if not total_steps:
        raise MlmkitError("--warmup given in steps needs a --steps budget; give a share "
                          "(e.g. 0.06) for token or time budgets")
    return min(warmup / total_steps, 1.0)

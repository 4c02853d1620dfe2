"""Learning-rate schedules as functions of training progress (a share of the budget).

A schedule of progress, not of step numbers, works the same for budgets in steps, tokens
or wall-clock time, and needs no state of its own to resume. Its only state is what an
*extension* adds: when a run continues with a larger budget (`--resume RUN --steps N`),
`Schedule.extended` re-stretches it from the current point so the learning rate does not
jump (see `extended` for the rule).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mlmkit.errors import MlmkitError

SCHEDULES = ("linear", "cosine", "wsd", "constant")


def lr_factor(progress: float, *, schedule: str, warmup: float, decay: float = 0.2,
              min_lr: float = 0.0, anchor: tuple[float, float] | None = None) -> float:
    """The share of the peak learning rate at `progress` in [0, 1].

    `warmup` is the share of the budget spent warming up linearly from 0; after it,
    `linear` and `cosine` decay to `min_lr`, `wsd` stays at the peak and decays linearly
    over the last `decay` share, `constant` stays at the peak. `anchor` = (progress,
    factor): linear/cosine decay from `factor` at that progress instead of from the peak
    at the end of warmup (set by an extension).
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
    begin, peak = warmup, 1.0
    if anchor is not None and progress >= anchor[0]:
        begin, peak = anchor
    rest = (progress - begin) / max(1.0 - begin, 1e-12)
    if schedule == "linear":
        return min_lr + (peak - min_lr) * (1.0 - rest)
    return min_lr + (peak - min_lr) * 0.5 * (1.0 + math.cos(math.pi * rest))


def warmup_share(warmup: float, total_steps: int | None) -> float:
    """`warmup` as a share of the budget: a value >= 1 is a number of steps."""
    if warmup < 1:
        return warmup
    if not total_steps:
        raise MlmkitError("--warmup given in steps needs a --steps budget; give a share "
                          "(e.g. 0.06) for token or time budgets")
    return min(warmup / total_steps, 1.0)


@dataclass
class Schedule:
    """The run's schedule: the config's kind and shares, plus an extension's anchor."""

    kind: str
    warmup: float  # share of the budget
    decay: float = 0.2  # wsd: the last share of the budget spent decaying
    min_lr: float = 0.0
    anchor: tuple[float, float] | None = None  # (progress, factor) where decay restarts

    @classmethod
    def from_config(cls, config) -> Schedule:
        return cls(kind=config.schedule, warmup=warmup_share(config.warmup, config.steps),
                   decay=config.decay, min_lr=config.min_lr)

    def factor(self, progress: float) -> float:
        return lr_factor(progress, schedule=self.kind, warmup=self.warmup, decay=self.decay,
                         min_lr=self.min_lr, anchor=self.anchor)

    def in_decay(self, progress: float) -> bool:
        """WSD: whether `progress` is in the final decay (the stable phase has ended)."""
        return self.kind == "wsd" and self.decay > 0 and progress >= 1.0 - self.decay

    def extended(self, old_progress: float, new_progress: float,
                 last_progress: float | None = None) -> Schedule:
        """This schedule continued under a new budget, from the point where the run is:
        `old_progress` under the old budget, `new_progress` under the new one.

        The warmup keeps its length (its share scales with the budget). linear / cosine:
        past the warmup, the decay restarts from the current factor and reaches `min_lr`
        at the new end: no jump, the remaining decay stretched over the remaining budget.
        A finished run (old progress 1, where the factor is `min_lr`) continues from the
        factor of its last step (at `last_progress`), so it goes on decaying from there.
        wsd: the stable phase continues up to the new budget's decay share, then a new
        decay (the run resumes from its state saved at the end of the stable phase, so the
        weights never saw the old decay). constant: unchanged.
        """
        scale = new_progress / old_progress if old_progress > 0 else 1.0
        warmup = min(self.warmup * scale, 1.0)
        if self.kind in ("constant", "wsd") or new_progress < warmup:
            return Schedule(self.kind, warmup, self.decay, self.min_lr, self.anchor)
        at = old_progress if old_progress < 1.0 or last_progress is None else last_progress
        return Schedule(self.kind, warmup, self.decay, self.min_lr,
                        (new_progress, self.factor(at)))

    def state_dict(self) -> dict:
        return {"kind": self.kind, "warmup": self.warmup, "decay": self.decay,
                "min_lr": self.min_lr,
                "anchor": list(self.anchor) if self.anchor is not None else None}

    @classmethod
    def from_state(cls, state: dict) -> Schedule:
        anchor = state.get("anchor")
        return cls(kind=state["kind"], warmup=state["warmup"], decay=state["decay"],
                   min_lr=state["min_lr"], anchor=tuple(anchor) if anchor else None)

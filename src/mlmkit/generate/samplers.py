"""The samplers of iterative unmasking, by name: which masked positions a step reveals.

Every sampler only ever chooses among the still-masked positions of the current block,
so prompt, constraints and tokens already revealed never change ("carry-over").

- `ancestral` (MDLM): on the step t -> s each masked position is revealed with
  probability (t - s) / t; the last step (s = 0) reveals the rest.
- `confidence` (LLaDA low-confidence remasking): reveal the k most confident predictions,
  k from `reveal_counts`; confidence is `prob`, `margin` or `entropy`.
- `random`: reveal k positions chosen uniformly, same k schedule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from mlmkit.errors import InvalidArgument


@dataclass
class StepContext:
    """What a sampler sees at one step of one block."""

    active: torch.Tensor
    """bool [B, L]: still masked and in the current block."""
    counts: torch.Tensor
    """LongTensor [B]: the scheduled number of reveals per row (k-schedule samplers)."""
    t: float
    """Time before the step (1 = all masked), for the ancestral sampler."""
    s: float
    """Time after the step (0 = all revealed)."""
    generator: torch.Generator | None
    confidence: Callable[[], torch.Tensor]
    """Lazily: float64 [n] confidence of the sampled token at each active position."""


def top_per_row(scores: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """bool [B, L]: the `counts[b]` highest-scoring positions of each row (ties: leftmost)."""
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices
    rank = torch.empty_like(order).scatter_(
        1, order, torch.arange(scores.shape[1], device=scores.device).expand_as(order)
    )
    return rank < counts.unsqueeze(1)


def _ancestral(ctx: StepContext) -> torch.Tensor:
    reveal_probability = 1.0 if ctx.s <= 0 else (ctx.t - ctx.s) / ctx.t
    draws = torch.rand(ctx.active.shape, dtype=torch.float64, generator=ctx.generator,
                       device=ctx.active.device)
    return ctx.active & (draws < reveal_probability)


def _random(ctx: StepContext) -> torch.Tensor:
    scores = torch.rand(ctx.active.shape, dtype=torch.float64, generator=ctx.generator,
                        device=ctx.active.device)
    scores = scores.masked_fill(~ctx.active, float("-inf"))
    return ctx.active & top_per_row(scores, ctx.counts)


def _confidence(ctx: StepContext) -> torch.Tensor:
    scores = torch.full(ctx.active.shape, float("-inf"), dtype=torch.float64,
                        device=ctx.active.device)
    scores[ctx.active] = ctx.confidence()
    return ctx.active & top_per_row(scores, ctx.counts)


@dataclass(frozen=True)
class Sampler:
    """A named reveal rule. `scheduled` samplers reveal exactly `counts` per step."""

    name: str
    select: Callable[[StepContext], torch.Tensor]
    scheduled: bool
    help: str


SAMPLERS: dict[str, Sampler] = {
    "ancestral": Sampler("ancestral", _ancestral, False,
                         "MDLM: each mask revealed with probability (t-s)/t per step"),
    "confidence": Sampler("confidence", _confidence, True,
                          "LLaDA: reveal the k most confident predictions per step"),
    "random": Sampler("random", _random, True, "reveal k uniformly random masks per step"),
}


def get_sampler(name: str) -> Sampler:
    """The sampler called `name`; the error lists the valid names."""
    if name not in SAMPLERS:
        raise InvalidArgument(f"unknown --sampler {name!r}: use one of {sorted(SAMPLERS)}")
    return SAMPLERS[name]

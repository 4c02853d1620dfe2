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


# Adaptive reveal policies: how many of the step's predictions to reveal, from the
# predictions themselves. Each returns LongTensor [B] (at least one where a row has an
# active position); the confidence sampler then reveals that many of the most confident.

def _ranked(scores: torch.Tensor, values: torch.Tensor | None = None):
    """(active count [B], `values` (default: `scores`) in descending order of `scores`)."""
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices
    ranked = (scores if values is None else values).gather(1, order)
    return torch.isfinite(scores).sum(1), ranked


def _prefix_count(holds: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
    """Length of the leading run of True in each row of `holds`, between 1 and `active`."""
    leading = torch.cumprod(holds.long(), dim=1).sum(1)
    return torch.minimum(leading.clamp_min(1), active)


def threshold_counts(scores: torch.Tensor, tau: float) -> torch.Tensor:
    """Fast-dLLM's threshold rule: every active position whose confidence exceeds tau, at
    least one. `scores` is float64 [B, L], -inf where inactive."""
    active = torch.isfinite(scores).sum(1)
    passing = (scores > tau).sum(1)
    return torch.minimum(passing.clamp_min(1), active)


def factor_counts(scores: torch.Tensor, factor: float) -> torch.Tensor:
    """Fast-dLLM's factor rule: the largest n with (n + 1)(1 - c_(n)) < f, c_(n) the n-th
    highest confidence; at least one."""
    active, ranked = _ranked(scores)
    n = torch.arange(1, scores.shape[1] + 1, device=scores.device, dtype=torch.float64)
    return _prefix_count((n + 1) * (1 - ranked) < factor, active)


def entropy_bound_counts(scores: torch.Tensor, entropy: torch.Tensor,
                         gamma: float) -> torch.Tensor:
    """EB-sampler: in descending confidence, the longest prefix whose summed entropy minus its
    largest entropy is at most gamma (so at least one). `entropy` float64 [B, L]."""
    active, ranked = _ranked(scores, entropy.masked_fill(~torch.isfinite(scores), 0.0))
    total = torch.cumsum(ranked, dim=1)
    largest = torch.cummax(ranked, dim=1).values
    return _prefix_count(total - largest <= gamma, active)


def spread_out(scores: torch.Tensor, gap: int) -> torch.Tensor:
    """bool [B, L]: the greedy spaced choice among the active positions (finite `scores`):
    in descending confidence (ties: the leftmost first), each position that is not within
    `gap` - 1 of one already kept. Any two kept positions are at least `gap` apart, and each
    row's most confident position is kept.

    Neighbouring masks depend on each other most (the characters of one word, the words of
    one phrase): revealed in one step, each is chosen without seeing the other. Spaced
    reveals fill distant masks together and near ones in turn (the idea of dilated
    unmasking schedules, here ordered by the model's confidence).

    Vectorised in rounds: a free position that ranks first within its window is what the
    greedy pass keeps (every better one nearby was suppressed, not kept); its neighbours are
    then suppressed. Each round keeps at least one position per row with free ones: a few
    rounds for varied confidences, but one per `gap` positions on a plateau (equal
    confidences) or a monotone run, so after SPREAD_ROUNDS rounds the rest is finished one
    position at a time on the CPU (`_greedy_rest`; the choice is the same)."""
    free = torch.isfinite(scores)
    if gap <= 1:
        return free
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices
    rank = torch.empty_like(order).scatter_(
        1, order, torch.arange(scores.shape[1], device=scores.device).expand_as(order)
    ).double().unsqueeze(1)
    last = float(scores.shape[1])
    kept = torch.zeros_like(free)
    for _ in range(SPREAD_ROUNDS):
        if not bool(free.any()):
            return kept
        ranks = torch.where(free.unsqueeze(1), rank, last)
        best = -torch.nn.functional.max_pool1d(-ranks, 2 * gap - 1, stride=1, padding=gap - 1)
        new = free & (ranks == best).squeeze(1)
        kept |= new
        near = torch.nn.functional.max_pool1d(new.double().unsqueeze(1), 2 * gap - 1,
                                              stride=1, padding=gap - 1).squeeze(1) > 0
        free &= ~near
    return kept | _greedy_rest(order, free, gap) if bool(free.any()) else kept


SPREAD_ROUNDS = 16
"""Pooling rounds of `spread_out` before the rest is chosen one position at a time (varied
confidences take about 5; a plateau or monotone run of n masks takes n / gap)."""


def _greedy_rest(order: torch.Tensor, free: torch.Tensor, gap: int) -> torch.Tensor:
    """bool [B, L]: the greedy spaced choice among the `free` positions (none within `gap`
    - 1 of one kept before), one at a time in `order` (descending confidence)."""
    length = free.shape[1]
    out = torch.zeros(free.shape, dtype=torch.bool)
    free_rows, orders = free.cpu(), order.cpu()
    for b in free_rows.any(1).nonzero().flatten().tolist():
        row, blocked, keep = free_rows[b].tolist(), bytearray(length), []
        for p in orders[b].tolist():
            if row[p] and not blocked[p]:
                keep.append(p)
                lo, hi = max(0, p - gap + 1), min(length, p + gap)
                blocked[lo:hi] = bytes([1]) * (hi - lo)
        out[b, keep] = True
    return out.to(free.device)


def adaptive_counts(policy: str, parameter: float, scores: torch.Tensor,
                    entropy: Callable[[], torch.Tensor]) -> torch.Tensor:
    """The reveals per row of the adaptive `policy` (threshold, factor, entropy-bound)."""
    if policy == "threshold":
        return threshold_counts(scores, parameter)
    if policy == "factor":
        return factor_counts(scores, parameter)
    if policy == "entropy-bound":
        return entropy_bound_counts(scores, entropy(), parameter)
    raise InvalidArgument(f"unknown --reveal {policy!r}")


# ReMDM remasking (Wang et al. 2025): on the step t -> s, each revealed token is remasked
# with probability sigma_t, and each mask revealed with probability
# (alpha_s - (1 - sigma_t) alpha_t) / (1 - alpha_t), alpha = 1 - t. sigma_t may not exceed
# sigma_max = min(1, (1 - alpha_s) / alpha_t) = min(1, s / (1 - t)).

def sigma_max(t: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """ReMDM's largest remasking probability on t -> s (0 where nothing is revealed)."""
    revealed = 1 - t
    bound = torch.where(revealed > 0, s / revealed.clamp_min(1e-12), torch.zeros_like(s))
    return bound.clamp(0.0, 1.0)


def remask_sigma(schedule: str, eta: float, t: torch.Tensor, s: torch.Tensor,
                 looping: bool) -> torch.Tensor:
    """sigma_t of `schedule`: cap = min(eta, sigma_max), rescale = eta * sigma_max, loop =
    min(eta, sigma_max) in the loop steps and 0 elsewhere (plain MDLM steps)."""
    top = sigma_max(t, s)
    if schedule == "rescale":
        return eta * top
    if schedule == "loop" and not looping:
        return torch.zeros_like(top)
    return torch.minimum(torch.full_like(top, eta), top)

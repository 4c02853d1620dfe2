"""Count mode: which units a row masks, given rates and unit weights.

- `exact`: round(rate × maskable tokens) per row (static shapes, as cramming): units are
  ordered by a partial top-k of u^(1/w) (sampling without replacement in proportion to
  weight, equivalent to Gumbel top-k on log w) and taken while they fit; with multi-token units a unit is taken while the
  middle of it lies below the target, so the count is the closest a prefix can get.
- `bernoulli`: each unit independently, with probability proportional to its weight and
  scaled so that the expected number of masked tokens is rate × maskable tokens.
"""

from __future__ import annotations

import torch

from mlmkit.masking.registry import COUNTS
from mlmkit.masking.seeding import uniform


def unit_table(unit_ids: torch.Tensor, token_weights: torch.Tensor | None, single: bool):
    """Per (row, unit id): token count and mean token weight (None when uniform), [B, U]
    with U the most units of a row (ids are numbered from 0 in each row): spans and words
    are fewer than tokens, and every later step works on U columns, not L.

    With `single` (one token per unit, unit id = column) both are read off directly."""
    valid = unit_ids >= 0
    if single:
        weights = None if token_weights is None else token_weights.float()
        return valid.float(), weights
    index = unit_ids.clamp(min=0)
    units = max(int(unit_ids.max()) + 1, 1) if unit_ids.numel() else 1
    lengths = torch.zeros(unit_ids.shape[0], units, dtype=torch.float32, device=unit_ids.device)
    lengths.scatter_add_(1, index, valid.float())
    if token_weights is None:
        return lengths, None
    total = torch.zeros_like(lengths).scatter_add_(1, index, token_weights.float() * valid)
    return lengths, total / lengths.clamp(min=1.0)


def top_per_row(key: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """Bool [B, N]: the `count[b]` largest finite keys of each row (count ≤ finite keys).

    One unsorted top-k of the largest count (sorting it would cost more and is not needed), then each row
    drops its extra smallest ones, found by a small top-k of the few extras (rows' counts
    differ by a few in packed batches).
    """
    k = int(count.max())
    values, order = key.topk(k, dim=1, sorted=False)
    keep = values > float("-inf")
    extra = keep.sum(1) - count
    most = int(extra.max()) if extra.numel() else 0
    if most > 0:
        lowest = values.masked_fill(~keep, float("inf")).topk(most, dim=1, largest=False).indices
        drop = torch.arange(most, device=key.device) < extra[:, None]  # ascending order
        keep.scatter_(1, lowest, keep.gather(1, lowest) & ~drop)
    return torch.zeros(key.shape, dtype=torch.bool, device=key.device).scatter_(1, order, keep)


class Count:
    PARAMS: dict = {}

    def __init__(self, **_):
        pass


@COUNTS.register("exact")
class ExactCount(Count):
    name = "exact"

    def choose(self, unit_ids, token_weights, rates, generator, single=False):
        lengths, weights = unit_table(unit_ids, token_weights, single)
        exists = lengths > 0
        target = torch.round(rates.float() * lengths.sum(1))
        # Sampling without replacement in proportion to weight: the largest u^(1/w)
        # (Efraimidis–Spirakis; the same order as Gumbel top-k on log w); uniform: u itself.
        key = uniform(lengths.shape, generator, unit_ids.device)
        if weights is not None:
            key = torch.log(key) / weights.clamp(min=1e-30)
        key = key.masked_fill(~exists, float("-inf"))
        # No row takes more units than its target in tokens: a partial top-k suffices.
        k = min(int(target.max()) + 1, key.shape[1]) if key.numel() else 0
        if k == 0:
            return torch.zeros_like(exists)
        if single:  # every unit one token: the `target` largest keys of each row
            return top_per_row(key, target.long())
        best = key.topk(k, dim=1, sorted=True)
        order = best.indices
        ordered = lengths.gather(1, order)
        middle = ordered.cumsum(1) - 0.5 * ordered
        take = (middle < target[:, None]) & (ordered > 0)
        chosen = torch.zeros_like(exists).scatter_(1, order, take)
        # A row whose first unit in the order is over twice its target would mask nothing
        # (a short text, long spans): it takes the unit of highest key that fits instead.
        fits = exists & (lengths <= target[:, None]) & ~take.any(1, keepdim=True)
        best = key.masked_fill(~fits, float("-inf")).argmax(1, keepdim=True)
        return chosen.scatter_(1, best, chosen.gather(1, best) | fits.gather(1, best))


@COUNTS.register("bernoulli")
class BernoulliCount(Count):
    name = "bernoulli"

    def choose(self, unit_ids, token_weights, rates, generator, single=False):
        lengths, weights = unit_table(unit_ids, token_weights, single)
        rates = rates.float()[:, None]
        if weights is None:
            probability = rates.expand_as(lengths)
        else:
            mass = (weights * lengths).sum(1, keepdim=True).clamp(min=1e-30)
            probability = (rates * lengths.sum(1, keepdim=True) * weights / mass).clamp(max=1.0)
        draw = uniform(lengths.shape, generator, unit_ids.device)
        return (draw < probability) & (lengths > 0)


def tokens_of(chosen_units: torch.Tensor, unit_ids: torch.Tensor, single=False) -> torch.Tensor:
    """Bool [B, L]: the positions of the chosen units."""
    if single:
        return chosen_units & (unit_ids >= 0)
    return chosen_units.gather(1, unit_ids.clamp(min=0)) & (unit_ids >= 0)

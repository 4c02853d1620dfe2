"""Corruption: what a chosen position becomes — [MASK], a random ordinary token, or itself.

Proportions (mask, random, keep) sum to 1: BERT's 80/10/10 by default, 100/0/0 for high
rates and diffusion. Random replacements are drawn from the non-special vocabulary only.
With `per_unit`, a whole unit (a SpanBERT span) gets one fate.
"""

from __future__ import annotations

from mlmkit.errors import MlmkitError
from mlmkit.masking.lookup import take
from mlmkit.masking.seeding import integers_at, uniform, uniform_at


def parse_proportions(value) -> tuple[float, float, float]:
    """[mask, random, keep] from a list/tuple or a {"mask", "random", "keep"} mapping."""
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"mask", "random", "keep"})
        if unknown:
            raise MlmkitError(f"corruption has no field(s) {unknown}: use mask, random, keep")
        mask, random = float(value.get("mask", 0.0)), float(value.get("random", 0.0))
        keep = float(value.get("keep", 1.0 - mask - random))
        parts = (mask, random, keep)
    else:
        parts = tuple(float(v) for v in value)
        if len(parts) != 3:
            raise MlmkitError(f"corruption {list(value)} must be three proportions "
                              "[mask, random, keep], e.g. [0.8, 0.1, 0.1]")
    if min(parts) < 0 or abs(sum(parts) - 1.0) > 1e-6:
        raise MlmkitError(f"corruption proportions {list(parts)} must be non-negative and "
                          "sum to 1 ([mask, random, keep])")
    return parts


class Corruption:
    def __init__(self, proportions=(0.8, 0.1, 0.1), per_unit: bool = False):
        self.mask_p, self.random_p, self.keep_p = parse_proportions(proportions)
        self.per_unit = bool(per_unit)

    def __call__(self, input_ids, mask, unit_ids, mask_id: int, replacements, generator):
        where = mask.view(-1).nonzero().squeeze(1)  # only chosen positions draw a fate
        if self.per_unit:  # the draw at column k serves unit k: one fate per unit
            u = uniform(input_ids.shape, generator, input_ids.device)
            u = take(u.gather(1, unit_ids.clamp(min=0)), where)
        else:
            u = uniform_at(where, input_ids.shape, generator, input_ids.device)
        out = input_ids.clone()
        out.view(-1).index_fill_(0, where[u < self.mask_p], mask_id)
        if self.random_p > 0:  # replacement ids drawn only where a token is replaced
            swap = where[(u >= self.mask_p) & (u < self.mask_p + self.random_p)]
            pick = integers_at(len(replacements), swap, input_ids.shape, generator,
                               input_ids.device)
            out.view(-1).index_copy_(0, swap, replacements.index_select(0, pick))
        return out

    def describe(self) -> str:
        parts = "/".join(f"{round(100 * p):g}" for p in (self.mask_p, self.random_p, self.keep_p))
        return parts + (" per unit" if self.per_unit else "")

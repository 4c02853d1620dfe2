"""Gumbel noise for the Gumbel-max trick: argmax(logits + G) is a draw from softmax(logits),
with no softmax and no cumulative sum, so one vectorised pass samples every row.

Generation draws its noise in float64: the largest value -log(-log U) reaches from float64 U
is about 36.7, so tokens down to ~1e-16 of the top one can still win; from float32 U it is
16.6 (~6e-8). Training samples (ELECTRA's replacements) take float32, where that tail does
not matter and the noise is half the memory.
"""

from __future__ import annotations

import torch


def uniform_to_gumbel(uniform: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """-log(-log U) of uniform draws `uniform`, in `dtype` (a new tensor; U stays as it was)."""
    return _to_gumbel_(uniform.to(dtype, copy=True))


def gumbel_noise(shape, generator: torch.Generator | None, device=None,
                 dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Standard Gumbel noise of `shape` (computed in place: it is the size of the logits)."""
    return _to_gumbel_(torch.rand(shape, dtype=dtype, generator=generator, device=device))


def _to_gumbel_(uniform: torch.Tensor) -> torch.Tensor:
    """-log(-log U) in place; U clamped away from 0 so no draw is infinite."""
    return uniform.clamp_min_(torch.finfo(uniform.dtype).tiny).log_().neg_().log_().neg_()

"""Matrix products whose every row has the bits it gets in a larger product: the exact
paths (`sparse_last_layer.full_forward`) compute a few rows of what a full forward computes
for all of them, and must round each row the same way."""

from __future__ import annotations

from collections.abc import Callable

import torch

EXACT_ROWS = 64
"""The fewest rows a matrix product of the exact path runs on: a CPU BLAS picks another
kernel for a product of a few rows (MKL: under 16), whose sums round differently from the
same rows in the full layer's product; padded to this many rows, each row's bits are the
full product's."""


def exact_rows(function: Callable[..., torch.Tensor], *rows: torch.Tensor) -> torch.Tensor:
    """`function` of row-wise inputs [n, ...], run on them padded with zero rows to at
    least `EXACT_ROWS` rows (its result's first n rows): the bits the same rows get inside
    a larger batch."""
    n = rows[0].shape[0]
    if n >= EXACT_ROWS:
        return function(*rows)
    padded = [torch.cat([x, x.new_zeros(EXACT_ROWS - n, *x.shape[1:])]) for x in rows]
    return function(*padded)[:n]

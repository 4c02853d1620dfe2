"""Poolings: the token vectors of a padded batch [b, L, d] → one vector per row [b, d].

Each is the sentence-transformers `Pooling` module's definition, so the vectors agree with
its `encode`: every token the attention mask covers counts, special tokens ([CLS], [SEP])
included. All arithmetic is float32 whatever the encoder ran in.
"""

from __future__ import annotations

import torch

from mlmkit.errors import InvalidArgument
from mlmkit.options.embedding import POOLINGS


def mean(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)


def cls(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return hidden[:, 0]


def maximum(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return hidden.masked_fill(~mask.bool().unsqueeze(-1), -1e9).max(1).values


def weighted_mean(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token i (from 1) weighs i: later tokens count more (SGPT's position weighting)."""
    positions = torch.arange(1, hidden.shape[1] + 1, device=hidden.device, dtype=hidden.dtype)
    weights = (positions.unsqueeze(0) * mask.to(hidden.dtype)).unsqueeze(-1)
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)


POOLING_FUNCTIONS = {"mean": mean, "cls": cls, "max": maximum, "weighted-mean": weighted_mean,
                     "last-k-layers": mean}


def check_pooling(pooling: str) -> str:
    if pooling not in POOLINGS:
        raise InvalidArgument(f"pooling={pooling!r} is not known: use one of "
                              f"{', '.join(POOLINGS)}")
    return pooling


def pool(hidden: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """float32 [b, d]: the rows of `hidden` [b, L, d] pooled over the tokens `mask` covers."""
    return POOLING_FUNCTIONS[check_pooling(pooling)](hidden.float(), mask)


def pool_segments(hidden: torch.Tensor, segment: torch.Tensor, offset: torch.Tensor,
                  count: int, pooling: str) -> torch.Tensor:
    """float32 [count, d]: the pooling of texts packed together. `hidden` [n, d] holds the
    tokens of every text one after the other; `segment` [n] says whose token each is (-1:
    padding) and `offset` [n] its position in its text (from 0). Equal to `pool` of each
    text on its own."""
    check_pooling(pooling)
    keep = segment >= 0
    hidden, segment, offset = hidden[keep].float(), segment[keep], offset[keep]
    width = hidden.shape[1]
    if pooling == "cls":
        return hidden.new_zeros(count, width).index_copy(0, segment[offset == 0],
                                                         hidden[offset == 0])
    if pooling == "max":
        index = segment[:, None].expand(-1, width)
        return hidden.new_full((count, width), -1e9).scatter_reduce(
            0, index, hidden, reduce="amax", include_self=False)
    weights = (offset + 1).to(hidden.dtype) if pooling == "weighted-mean" else \
        torch.ones_like(segment, dtype=hidden.dtype)
    sums = hidden.new_zeros(count, width).index_add(0, segment, hidden * weights[:, None])
    totals = hidden.new_zeros(count).index_add(0, segment, weights)
    return sums / totals.clamp(min=1e-9)[:, None]

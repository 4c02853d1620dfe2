"""Schedules of iterative unmasking: how many tokens each step reveals, and when.

`reveal_counts` spreads a row's masks evenly over the steps (LLaDA): the per-step counts
differ by at most one and sum to the number of masks. `time_grid` is MDLM's grid from
t = 1 (all masked) to t = 0 (all revealed). Blocks split the masks left to right.
"""

from __future__ import annotations

import torch

from mlmkit.errors import InvalidArgument


def reveal_counts(n_masked: torch.Tensor, steps: int) -> torch.Tensor:
    """LongTensor [B, steps]: tokens to reveal per step, the remainder on the first steps."""
    if steps < 1:
        raise InvalidArgument(f"steps is {steps}: use at least 1")
    n_masked = n_masked.long()
    base = (n_masked // steps).unsqueeze(1)
    extra = (torch.arange(steps, device=n_masked.device).unsqueeze(0)
             < (n_masked % steps).unsqueeze(1))
    return base + extra.long()


def time_grid(steps: int) -> torch.Tensor:
    """float64 [steps + 1]: t from 1 down to 0 in equal steps."""
    return torch.linspace(1.0, 0.0, steps + 1, dtype=torch.float64)


def split_steps(steps: int, n_blocks: int) -> list[int]:
    """The steps of each block: as even as possible, earlier blocks take the remainder."""
    if steps < n_blocks:
        raise InvalidArgument(
            f"--steps {steps} is fewer than the {n_blocks} blocks: every block needs a step; "
            f"use --steps {n_blocks} or more, or a longer --block-length"
        )
    return [steps // n_blocks + (i < steps % n_blocks) for i in range(n_blocks)]


def block_index(masked: torch.Tensor, block_length: int | None) -> torch.Tensor:
    """LongTensor [B, L]: the block of each masked position (its rank // block_length), -1 else.

    Blocks count masked positions left to right, so each block holds `block_length`
    masks (the last one fewer), whatever fixed tokens lie between them.
    """
    rank = torch.cumsum(masked.long(), dim=1) - 1
    if block_length is None:
        blocks = torch.zeros_like(rank)
    else:
        if block_length < 1:
            raise InvalidArgument(f"--block-length {block_length} must be at least 1")
        blocks = rank // block_length
    return torch.where(masked, blocks, torch.full_like(blocks, -1))

"""Classifier-free guidance by prompt masking (LLaDA / SMDM, no extra training needed).

The unconditional input is the canvas with the prompt replaced by [MASK]; the guided
logits are uncond + (w + 1) * (cond - uncond). w = 0 is plain conditional sampling.
"""

from __future__ import annotations

import torch


def unconditional_input(ids: torch.Tensor, prompt: torch.Tensor, mask_id: int) -> torch.Tensor:
    """`ids` with every prompt position replaced by `mask_id` (nothing else changes)."""
    return ids.masked_fill(prompt, mask_id)


def guided_logits(cond: torch.Tensor, uncond: torch.Tensor, scale: float) -> torch.Tensor:
    """uncond + (scale + 1) * (cond - uncond), in float32."""
    cond, uncond = cond.float(), uncond.float()
    return uncond + (scale + 1.0) * (cond - uncond)

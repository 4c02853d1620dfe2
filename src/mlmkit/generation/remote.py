"""What the samplers read from the model itself: its mask id and whether its logits are
shifted, so that models whose code ships with the checkpoint (`trust_remote_code`, as
LLaDA and Dream need) run through the same loop.

- The mask id is the config's `mask_token_id` when it has one (LLaDA's tokenizer has no
  mask token; its config names 126336), else the tokenizer's.
- A model adapted from a causal LM (Dream) predicts the token at position i from its
  output at position i - 1: its config says so with `logits_shift: true` (or the model type
  is `Dream`), and the sampler then reads the output one position to the left.
"""

from __future__ import annotations

import torch

SHIFTED_MODEL_TYPES = frozenset({"dream", "Dream"})


def mask_id(mlm) -> int:
    """The id the sampler writes at a position still to generate."""
    value = getattr(getattr(mlm.model, "config", None), "mask_token_id", None)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return mlm.tokenizer.mask_token_id


def logits_shift(mlm) -> bool:
    """Whether position i is predicted by the model's output at position i - 1."""
    config = getattr(mlm.model, "config", None)
    value = getattr(config, "logits_shift", None)
    if value is not None:
        return bool(value)
    return getattr(config, "model_type", None) in SHIFTED_MODEL_TYPES


def shift_positions(positions: torch.Tensor) -> torch.Tensor:
    """bool [B, L]: the output positions that predict `positions` (one to the left; the
    first column, a [CLS]/BOS token, is never predicted)."""
    shifted = torch.zeros_like(positions)
    shifted[:, :-1] = positions[:, 1:]
    return shifted

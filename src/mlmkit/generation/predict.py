"""One model call of a sampler step: logits at the still-masked positions only.

The encoder runs once on the canvas (with guidance, once on the conditional and the
unconditional canvases stacked in one batch) and the MLM head only at `positions`, via
`mlmkit.models.masked_logits`. Tokens the sampler must never produce get -inf.
"""

from __future__ import annotations

import torch

from mlmkit.generation.guidance import guided_logits, unconditional_input
from mlmkit.models import masked_logits


def predict_logits(
    model: torch.nn.Module,
    ids: torch.Tensor,
    attention_mask: torch.Tensor,
    positions: torch.Tensor,
    *,
    prompt: torch.Tensor | None = None,
    mask_id: int | None = None,
    cfg_scale: float = 0.0,
    suppressed: torch.Tensor | None = None,
) -> torch.Tensor:
    """float32 logits [n, V] at the bool `positions` [B, L], row-major."""
    if cfg_scale != 0.0 and prompt is not None and bool(prompt.any()):
        uncond_ids = unconditional_input(ids, prompt, mask_id)
        both = masked_logits(
            model,
            torch.cat([ids, uncond_ids]),
            torch.cat([attention_mask, attention_mask]),
            torch.cat([positions, positions]),
        )
        cond, uncond = both.split(both.shape[0] // 2)
        logits = guided_logits(cond, uncond, cfg_scale)
    else:
        logits = masked_logits(model, ids, attention_mask, positions).float()
    if suppressed is not None and len(suppressed):
        logits[:, suppressed] = float("-inf")
    return logits

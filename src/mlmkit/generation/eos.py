"""End-of-text handling: a generated [SEP]/EOS ends the text; what follows is padding."""

from __future__ import annotations

import torch


def pad_after_end(
    ids: torch.Tensor, region: torch.Tensor, generated: torch.Tensor, end_ids: list[int],
    pad_id: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids with every `region` position after the first `generated` end token set to
    `pad_id`, bool [B, L] marking the cut: that end token and the region after it).

    `region` is the continuation (generated and user-fixed positions); only a generated
    token can end it.
    """
    if not end_ids:
        return ids, torch.zeros_like(region)
    is_end = generated & torch.isin(ids, torch.tensor(end_ids, device=ids.device))
    seen = torch.cumsum(is_end.long(), dim=1)
    after = region & (seen - is_end.long() > 0)
    return ids.masked_fill(after, pad_id), region & (seen > 0)

"""Masked positions gathered into a fixed number of slots, so a step's shapes stay static.

The sparse head runs on the masked tokens only, and their count changes from batch to
batch: a compiled step then has a new shape every step, which CUDA graphs cannot replay
(a graph is recorded for one set of shapes). Here the masked positions fill the first
slots of a list whose length is the count rounded up to a coarse granule (`capacity`),
the rest point at position 0 and are marked invalid: their logits are computed and
weighted zero. A run then sees a handful of capacities (a 30% masking rate of 65,536
tokens varies by about ±120 tokens, the granule is 1,024), each recorded once; the head
does at most one granule of extra work.
"""

from __future__ import annotations

import torch

from mlmkit.models.adapters import adapter_for

GRANULE_SHARE = 64
"""A capacity is a multiple of (tokens of the batch / GRANULE_SHARE), at least 64 slots."""


def capacity(count: int, tokens: int) -> int:
    """The slots for `count` masked positions of a batch of `tokens` tokens: the count
    rounded up to the granule (one granule when nothing is masked), at most `tokens`."""
    granule = min(tokens, max(64, tokens // GRANULE_SHARE))
    return min(tokens, max(granule, -(-count // granule) * granule))


def fixed_capacity_positions(mask: torch.Tensor, slots: int
                             ) -> tuple[torch.Tensor, torch.Tensor]:
    """(flat indices [slots] into the B×L batch, valid [slots] bool): the masked positions
    in row-major order in the first slots, then position 0 marked invalid. The caller
    chose `slots` ≥ the masked count (`capacity`)."""
    flat = mask.reshape(-1)
    index = torch.nonzero_static(flat, size=slots, fill_value=0).squeeze(1)
    valid = torch.arange(slots, device=mask.device) < flat.sum()
    return index, valid


def logits_at(model: torch.nn.Module, input_ids: torch.Tensor,
              attention_mask: torch.Tensor | None, index: torch.Tensor) -> torch.Tensor:
    """MLM logits [len(index), V] at flat positions `index` of the batch: the encoder in
    full, the head at those positions (`masked_logits` without its data-dependent checks
    and its sparse last layer, whose shapes follow the positions)."""
    adapter = adapter_for(model)
    if adapter is None:
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
        return logits.reshape(-1, logits.shape[-1]).index_select(0, index)
    hidden = adapter.encode(model, input_ids, attention_mask)
    return adapter.head(model, hidden.reshape(-1, hidden.shape[-1]).index_select(0, index))

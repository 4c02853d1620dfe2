"""The output of every masking policy: one dataclass, the same fields whatever the strategy."""

from __future__ import annotations

from dataclasses import dataclass

import torch

IGNORE_INDEX = -100


@dataclass
class MaskedBatch:
    """A corrupted batch and its targets.

    `labels` holds the original id where a position is predicted and -100 elsewhere;
    `mask` is True exactly where `labels != -100`; `rate` is the rate each row was masked at
    (the diffusion time t, needed for the 1/t loss weight).
    """

    input_ids: torch.Tensor  # int64 [B, L], corrupted
    labels: torch.Tensor  # int64 [B, L]
    mask: torch.Tensor  # bool [B, L]
    rate: torch.Tensor  # float32 [B]

    def to(self, device) -> MaskedBatch:
        return MaskedBatch(*(t.to(device) for t in
                             (self.input_ids, self.labels, self.mask, self.rate)))

"""Table lookups by flat index: `index_select` is several times faster on CPU than advanced
indexing (`table[ids]`), and the masking hot path does many of them."""

from __future__ import annotations

import torch


def take(values: torch.Tensor, flat_index: torch.Tensor) -> torch.Tensor:
    """`values.reshape(-1)[flat_index]`, shaped like `flat_index`."""
    return values.reshape(-1).index_select(0, flat_index.reshape(-1)).view(flat_index.shape)


def lookup(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """`table[ids]` for a 1-D table, ids clamped into it (they were validated on CPU; the
    clamp keeps a device batch from reading out of bounds)."""
    return take(table, ids.clamp(0, table.numel() - 1))

"""Exact-enough n-gram keys: two polynomial hashes of a token window packed in one int64.

Both the offline statistics (`mlmkit mask stats`) and the PMI units at masking time key
n-grams this way, so a collocation found offline is recognised in a batch by one
`searchsorted`, with no Python loop over positions.
"""

from __future__ import annotations

import torch

MAX_N = 5
_MODULI = (2_147_483_647, 2_147_483_629)
_BASES = (1_000_003, 999_983)


def window_keys(ids: torch.Tensor, n: int) -> torch.Tensor:
    """Int64 [..., T - n + 1]: the key of every window of `n` consecutive ids along the last dim."""
    ids = ids.long()
    width = ids.shape[-1] - n + 1
    if width <= 0:
        return ids.new_zeros(ids.shape[:-1] + (0,))
    hashes = []
    for modulus, base in zip(_MODULI, _BASES, strict=True):
        h = torch.zeros(ids.shape[:-1] + (width,), dtype=torch.long, device=ids.device)
        for k in range(n):  # n <= 5 passes over the whole batch, not a loop over positions
            h = (h * base + ids[..., k:k + width] + 1) % modulus
        hashes.append(h)
    return hashes[0] * (1 << 31) + hashes[1]


def sequence_key(ids: list[int]) -> int:
    """The key of one n-gram given as a list of ids (same value as `window_keys`)."""
    return int(window_keys(torch.tensor([ids]), len(ids))[0, 0])


def contains(sorted_keys: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """Bool, shaped like `queries`: which queries are in the sorted 1-D `sorted_keys`."""
    if sorted_keys.numel() == 0:
        return torch.zeros_like(queries, dtype=torch.bool)
    flat = queries.reshape(-1)
    where = torch.searchsorted(sorted_keys, flat).clamp_(max=sorted_keys.numel() - 1)
    return (sorted_keys[where] == flat).reshape(queries.shape)

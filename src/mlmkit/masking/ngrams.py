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


def all_window_keys(ids: torch.Tensor, max_n: int) -> dict[int, torch.Tensor]:
    """{n: int64 [..., T - n + 1]} for n = 1..max_n: the key of every window of n consecutive
    ids along the last dim, each length extending the previous one (one pass per n)."""
    ids = ids.long() + 1
    hashes = [torch.zeros_like(ids), torch.zeros_like(ids)]
    out = {}
    for n in range(1, max_n + 1):
        width = ids.shape[-1] - n + 1
        if width <= 0:
            out[n] = ids.new_zeros(ids.shape[:-1] + (0,))
            continue
        for i, (modulus, base) in enumerate(zip(_MODULI, _BASES, strict=True)):
            hashes[i] = (hashes[i][..., :width] * base + ids[..., n - 1:]) % modulus
        out[n] = hashes[0] * (1 << 31) + hashes[1]
    return out


def window_keys(ids: torch.Tensor, n: int) -> torch.Tensor:
    """Int64 [..., T - n + 1]: the key of every window of `n` consecutive ids along the last dim."""
    return all_window_keys(ids, n)[n]


def sequence_key(ids: list[int]) -> int:
    """The key of one n-gram given as a list of ids (same value as `window_keys`)."""
    return int(window_keys(torch.tensor([ids]), len(ids))[0, 0])


FILTER_BITS = 20


def key_filter(sorted_keys: torch.Tensor) -> torch.Tensor:
    """Bool [2^FILTER_BITS]: True at the low bits of every key (a one-hash Bloom filter)."""
    table = torch.zeros(1 << FILTER_BITS, dtype=torch.bool, device=sorted_keys.device)
    table[sorted_keys & ((1 << FILTER_BITS) - 1)] = True
    return table


def contains(sorted_keys: torch.Tensor, queries: torch.Tensor, filter_table=None) -> torch.Tensor:
    """Bool, shaped like `queries`: which queries are in the sorted 1-D `sorted_keys`.

    With `filter_table` (from `key_filter`), only the queries that pass it are searched."""
    found = torch.zeros_like(queries, dtype=torch.bool)
    if sorted_keys.numel() == 0:
        return found
    flat = queries.reshape(-1)
    candidates = None
    if filter_table is not None:
        candidates = filter_table[flat & ((1 << FILTER_BITS) - 1)].nonzero().squeeze(1)
        flat = flat[candidates]
    where = torch.searchsorted(sorted_keys, flat).clamp_(max=sorted_keys.numel() - 1)
    hit = sorted_keys[where] == flat
    if candidates is None:
        return hit.reshape(queries.shape)
    found.view(-1)[candidates] = hit
    return found

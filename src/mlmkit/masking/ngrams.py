"""Exact-enough n-gram keys: two polynomial hashes of a token window packed in one int64.

Both the offline statistics (`mlmkit mask stats`) and the PMI units at masking time key
n-grams this way, so a collocation found offline is recognised in a batch by one
`searchsorted`, with no Python loop over positions.
"""

from __future__ import annotations

import numpy as np
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


def _slot(key):
    """A well-mixed slot number from a key (an int or an int64 tensor), without overflow:
    a linear combination of its two 31-bit hashes modulo a prime."""
    high, low = key >> 31, key & ((1 << 31) - 1)
    return (high * 1_000_000_007 + low * 2_654_435_761) % 4_294_967_291


class KeySet:
    """A set of n-gram keys as an open-addressing hash table (linear probing, load ≤ 1/16):
    membership of a whole batch of windows is a few gathers, with no sort or search."""

    def __init__(self, keys: torch.Tensor):
        keys = torch.unique(keys.long().cpu())
        size = 1 << max(4, int(len(keys) * 16 - 1).bit_length())
        self.mask = size - 1
        table = np.full(size, -1, dtype=np.int64)  # keys are non-negative: -1 is empty
        longest = 0
        for key in keys.tolist():  # once per policy, offline: not the hot path
            slot, probe = _slot(key) & self.mask, 0
            while table[slot] != -1:
                slot, probe = (slot + 1) & self.mask, probe + 1
            table[slot] = key
            longest = max(longest, probe)
        self.table = torch.from_numpy(table)
        self.probes = longest + 1
        self.count = len(keys)

    def to(self, device) -> KeySet:
        moved = object.__new__(KeySet)
        moved.mask, moved.probes, moved.count = self.mask, self.probes, self.count
        moved.table = self.table.to(device)
        return moved

    def contains(self, queries: torch.Tensor) -> torch.Tensor:
        """Bool, shaped like `queries`."""
        found = torch.zeros_like(queries, dtype=torch.bool)
        if self.count == 0:
            return found
        slot = _slot(queries) & self.mask
        for _ in range(self.probes):  # the longest probe sequence of any stored key
            found |= self.table[slot] == queries
            slot = (slot + 1) & self.mask
        return found

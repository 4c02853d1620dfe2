"""Exact-enough n-gram keys: a polynomial hash of a token window in wrapping 64-bit arithmetic.

Both the offline statistics (`mlmkit mask stats`) and the PMI units at masking time key
n-grams this way, so a collocation found offline is recognised in a batch by a few
gathers into a hash table, with no Python loop over positions. Statistics are saved as
token ids, never as keys, so the key function may change between versions.
"""

from __future__ import annotations

import torch

MAX_N = 5
_BASE = 0x5851F42D4C957F2D  # odd 63-bit multiplier: int64 products wrap modulo 2^64
_MIX = 0x2545F4914F6CDD1D  # multiplicative hashing of keys to table slots
_LENGTH_SALT = 0x27BB2EE687B0B0FD  # keys of different lengths never meet in one table
KEEP = (1 << 62) - 1  # keys are non-negative: -1 marks an empty slot


def window_keys(ids: torch.Tensor, n: int) -> torch.Tensor:
    """Int64 [..., T - n + 1]: the key of every window of `n` consecutive ids along the last
    dim, one multiply-add per length (wrapping int64 arithmetic), the length mixed in."""
    ids = ids.long() + 1
    width = ids.shape[-1] - n + 1
    if width <= 0:
        return ids.new_zeros(ids.shape[:-1] + (0,))
    running = ids[..., :width]
    for k in range(1, n):
        running = running * _BASE + ids[..., k:k + width]
    return (running + n * _LENGTH_SALT) & KEEP


def slot(keys: torch.Tensor, bits: int) -> torch.Tensor:
    """Slot numbers in [0, 2^bits) from the high bits of a wrapping product (Fibonacci
    hashing), in a few tensor ops."""
    return ((keys * _MIX) >> (64 - bits)) & ((1 << bits) - 1)


class KeySet:
    """A set of n-gram keys as an open-addressing hash table (linear probing, load ≤ 1/8):
    membership of a whole batch of windows is a few gathers, with no sort or search.
    Keys of several lengths can share one table (the length is part of the key)."""

    def __init__(self, keys: torch.Tensor):
        keys = torch.unique(keys.long().cpu())
        self.bits = max(4, int(len(keys) * 8 - 1).bit_length())
        size = 1 << self.bits
        table = torch.full((size,), -1, dtype=torch.long)
        home = slot(keys, self.bits)
        pending = torch.arange(len(keys))
        probe = 0
        while pending.numel():  # vectorised insertion: one round per probe distance
            at = (home[pending] + probe) & (size - 1)
            free = table[at] == -1
            winner = torch.full((size,), -1, dtype=torch.long)
            winner.scatter_reduce_(0, at[free], pending[free], reduce="amax")
            placed = free & (winner[at] == pending)
            table[at[placed]] = keys[pending[placed]]
            pending = pending[~placed]
            probe += 1
        self.table = table
        self.probes = max(probe, 1)  # the longest probe sequence of any stored key
        self.count = len(keys)

    def to(self, device) -> KeySet:
        moved = object.__new__(KeySet)
        moved.bits, moved.probes, moved.count = self.bits, self.probes, self.count
        moved.table = self.table.to(device)
        return moved

    def contains(self, queries: torch.Tensor) -> torch.Tensor:
        """Bool, shaped like `queries`."""
        found = torch.zeros_like(queries, dtype=torch.bool)
        if self.count == 0 or queries.numel() == 0:
            return found
        flat = queries.reshape(-1)
        at = slot(flat, self.bits)
        stored = self.table.index_select(0, at)
        found.view(-1)[:] = stored == flat
        # An empty slot ends a probe sequence (nothing is ever deleted): only queries that
        # met another key probe on, a few percent at load 1/8.
        which = ((stored != -1) & (stored != flat)).nonzero().squeeze(1)
        if which.numel() and self.probes > 1:
            query, at = flat.index_select(0, which), at.index_select(0, which)
            later = torch.zeros_like(query, dtype=torch.bool)
            for probe in range(1, self.probes):
                later |= self.table.index_select(0, (at + probe) & (self.table.numel() - 1)) \
                    == query
            found.view(-1).index_put_((which,), later, accumulate=True)
        return found

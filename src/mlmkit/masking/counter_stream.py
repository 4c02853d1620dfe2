"""A counter-based random stream: every number is a hash of (seed, step, draw, row, position).

A `torch.Generator` yields numbers in the order they are asked for, so the masks of a row
depend on which rows share its batch, and a per-row generator (the "row" stream) costs a
Python call per row. Here the number at (row, position) of a draw is SplitMix64's output
number `row · 2^32 + position` from a key mixed from (seed, step, draw): the whole batch
is drawn in a few integer tensor ops, on whatever device holds the batch, and a row gets
the same numbers whether it is drawn alone, in half a batch (one of two processes) or in
the whole one, on a CPU or a GPU.

torch has no uint64 arithmetic on every device, so the hash runs on int64: products wrap
modulo 2^64 as unsigned ones do (two's complement), and each right shift is masked to
make it logical. The bits equal those of the textbook unsigned SplitMix64 (tested).

Draws are numbered in the order a policy makes them; a draw whose count of rounds
depends on the batch (rejection sampling) takes a `child` stream, so the draws after it
keep their numbers however many rounds it ran.
"""

from __future__ import annotations

import torch

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
COLUMN_BITS = 32  # positions (columns) below 2^32; rows below 2^31


def splitmix64(value: int) -> int:
    """SplitMix64's output for state `value` (Python integers, the reference)."""
    value = (value + GOLDEN) & MASK64
    value = ((value ^ (value >> 30)) * MIX1) & MASK64
    value = ((value ^ (value >> 27)) * MIX2) & MASK64
    return value ^ (value >> 31)


def _signed(value: int) -> int:
    """An unsigned 64-bit constant as the int64 with the same bits."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _shift_right(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 bits (torch's `>>` on int64 copies the sign bit)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def splitmix64_tensor(key: int, counters: torch.Tensor) -> torch.Tensor:
    """Int64 tensor of SplitMix64 outputs number `counters` (int64) of the stream `key`: the
    bits of `splitmix64((key + counter · GOLDEN) mod 2^64)`, as int64."""
    x = counters * _signed(GOLDEN) + _signed((key + GOLDEN) & MASK64)
    x = (x ^ _shift_right(x, 30)) * _signed(MIX1)
    x = (x ^ _shift_right(x, 27)) * _signed(MIX2)
    return x ^ _shift_right(x, 31)


def to_unit_interval(bits: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """Uniforms strictly inside (0, 1): the top 23 (float32) or 52 (float64) bits, centred
    in their cell (one bit fewer than the significand holds, so the half stays exact)."""
    mantissa = 52 if dtype == torch.float64 else 23
    top = _shift_right(bits, 64 - mantissa)
    return (top.to(dtype) + 0.5) * (2.0 ** -mantissa)


class CounterStream:
    """The random numbers of one masking call on the global rows `rows` (int64 [B])."""

    def __init__(self, seed: int, step: int, rows: torch.Tensor, *, _key: int | None = None):
        self.rows = rows.long()
        self.device = self.rows.device
        self.key = (_key if _key is not None
                    else splitmix64(splitmix64(int(seed) & MASK64) ^ (int(step) & MASK64)))
        self.draws = 0

    def _draw_key(self) -> int:
        self.draws += 1
        return splitmix64(self.key ^ splitmix64(self.draws))

    def child(self) -> CounterStream:
        """A stream of its own for a draw of a batch-dependent number of rounds."""
        return CounterStream(0, 0, self.rows, _key=self._draw_key())

    def bits_at(self, flat_index: torch.Tensor, width: int) -> torch.Tensor:
        """Int64 hashes of the next draw at `flat_index` of a [B, width] table (row-major)."""
        flat_index = flat_index.long()
        rows = self.rows.index_select(0, torch.div(flat_index, width, rounding_mode="floor"))
        counters = (rows << COLUMN_BITS) | (flat_index % width)
        return splitmix64_tensor(self._draw_key(), counters)

    def bits(self, shape) -> torch.Tensor:
        """Int64 hashes of the next draw, `shape` = (B, ...): keyed by (row, flat column)."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        width = 1
        for size in shape[1:]:
            width *= size
        columns = torch.arange(width, device=self.device)
        counters = (self.rows[:, None] << COLUMN_BITS) | columns[None, :]
        return splitmix64_tensor(self._draw_key(), counters).view(shape)

    def uniform(self, shape, dtype=torch.float32) -> torch.Tensor:
        return to_unit_interval(self.bits(shape), dtype)

    def uniform_at(self, flat_index: torch.Tensor, width: int,
                   dtype=torch.float32) -> torch.Tensor:
        return to_unit_interval(self.bits_at(flat_index, width), dtype)

    def normal(self, shape, dtype=torch.float64) -> torch.Tensor:
        """Standard normals by Box–Muller from two draws."""
        radius = torch.sqrt(-2.0 * torch.log(self.uniform(shape, dtype)))
        angle = (2.0 * torch.pi) * self.uniform(shape, dtype)
        return radius * torch.cos(angle)

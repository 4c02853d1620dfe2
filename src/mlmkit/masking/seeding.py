"""Random numbers of a masking call come from (seed, step) alone, so a resumed run masks alike.

Two streams: the "row" stream, a `torch.Generator` seeded from (seed, step) (the run seeds
each row on its own), and the "counter" stream (`CounterStream`), keyed by (seed, step,
global row, position), drawn for a whole batch at once. The components draw through the
functions below, which serve either.
"""

from __future__ import annotations

import torch

from mlmkit.masking.counter_stream import CounterStream, splitmix64

_MASK64 = (1 << 64) - 1


def generator_for(seed: int, step: int, device) -> torch.Generator:
    """A generator on `device` seeded from a well-mixed hash of (seed, step)."""
    mixed = splitmix64(splitmix64(int(seed) & _MASK64) ^ (int(step) & _MASK64))
    generator = torch.Generator(device=torch.device(device))
    generator.manual_seed(mixed & ((1 << 63) - 1))
    return generator


def stream_for(seed: int, step: int, device, rows=None):
    """The counter stream of global `rows` when given, else the (seed, step) generator."""
    if rows is None:
        return generator_for(seed, step, device)
    return CounterStream(seed, step, torch.as_tensor(rows, dtype=torch.long, device=device))


def uniform(shape, generator, device, dtype=torch.float32) -> torch.Tensor:
    """U(0, 1) strictly inside the interval (safe for logs)."""
    if isinstance(generator, CounterStream):
        return generator.uniform(shape, dtype)
    u = torch.rand(shape, generator=generator, device=device, dtype=dtype)
    tiny = torch.finfo(dtype).tiny
    return u.clamp_(min=tiny, max=1.0 - torch.finfo(dtype).eps)


def rand(shape, generator, device, dtype=torch.float32) -> torch.Tensor:
    """U[0, 1) (`torch.rand`, or the counter stream's open-interval uniforms)."""
    if isinstance(generator, CounterStream):
        return generator.uniform(shape, dtype)
    return torch.rand(shape, generator=generator, device=device, dtype=dtype)


def normal(shape, generator, device, dtype=torch.float64) -> torch.Tensor:
    if isinstance(generator, CounterStream):
        return generator.normal(shape, dtype)
    return torch.randn(shape, generator=generator, device=device, dtype=dtype)


def uniform_at(where: torch.Tensor, shape, generator, device) -> torch.Tensor:
    """Uniforms for the flat positions `where` of a `shape` [B, L] batch: a generator draws
    them in order; the counter stream draws each position's own number."""
    if isinstance(generator, CounterStream):
        return generator.uniform_at(where, shape[1])
    return uniform(where.shape, generator, device)


def integers_at(high: int, where: torch.Tensor, shape, generator, device) -> torch.Tensor:
    """Integers in [0, high) for the flat positions `where` of a `shape` [B, L] batch."""
    if isinstance(generator, CounterStream):
        u = generator.uniform_at(where, shape[1], torch.float64)
        return (u * high).long().clamp_(max=high - 1)
    return torch.randint(high, where.shape, generator=generator, device=device)

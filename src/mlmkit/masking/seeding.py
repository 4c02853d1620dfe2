"""Random numbers of a masking call come from (seed, step) alone, so a resumed run masks alike."""

from __future__ import annotations

import torch

_MASK64 = (1 << 64) - 1


def _splitmix64(value: int) -> int:
    value = (value + 0x9E3779B97F4A7C15) & _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


def generator_for(seed: int, step: int, device) -> torch.Generator:
    """A generator on `device` seeded from a well-mixed hash of (seed, step)."""
    mixed = _splitmix64(_splitmix64(int(seed) & _MASK64) ^ (int(step) & _MASK64))
    generator = torch.Generator(device=torch.device(device))
    generator.manual_seed(mixed & ((1 << 63) - 1))
    return generator


def uniform(shape, generator: torch.Generator, device, dtype=torch.float32) -> torch.Tensor:
    """U(0, 1) strictly inside the interval (safe for logs)."""
    u = torch.rand(shape, generator=generator, device=device, dtype=dtype)
    tiny = torch.finfo(dtype).tiny
    return u.clamp_(min=tiny, max=1.0 - torch.finfo(dtype).eps)

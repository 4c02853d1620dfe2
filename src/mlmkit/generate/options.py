"""`SamplerOptions`: how iterative unmasking turns masks into tokens, validated once.

`generate` and `infill` (and their CLI commands) build one `SamplerOptions`; the shared
loop (`mlmkit.generate.unmask`) reads nothing else. Fields that do not depend on the
canvas are checked when the options are made; `resolve(...)` checks the rest (steps and
blocks against the number of masks) before any model call. A new reveal policy is a new
field here and a new rule in `mlmkit.generate.samplers`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

from mlmkit.generate.choose import ChoiceConfig
from mlmkit.generate.confidence import check_confidence
from mlmkit.generate.samplers import get_sampler
from mlmkit.runtime import checks

MAX_ANCESTRAL_STEPS = 10_000
"""The ancestral sampler may take more steps than masks (most reveal nothing and cost no
model call), but not without end."""


@dataclass(frozen=True)
class SamplerOptions:
    """Every choice of the unmasking loop (each is a CLI flag of the same name)."""

    steps: int | None = None
    """Sampler steps in all, divided among the blocks (None: the caller's default, one
    token per step). confidence/random: at most one step per mask; ancestral: at most
    10,000."""
    sampler: str = "confidence"
    """ancestral, confidence or random (see mlmkit.generate.samplers)."""
    confidence: str = "prob"
    """For the confidence sampler: prob, margin or entropy."""
    temperature: float = 1.0
    """0 is argmax; 1 samples from the model's distribution; higher is flatter."""
    top_k: int | None = None
    """Sample among the k likeliest tokens (None: all)."""
    top_p: float | None = None
    """Nucleus sampling: the smallest set of likeliest tokens reaching p, in (0, 1]."""
    block_length: int | None = None
    """Semi-autoregressive blocks of this many masks, left to right (None: one block; the
    last block may be shorter)."""
    cfg_scale: float = 0.0
    """Classifier-free guidance weight w ≥ 0 (0: none)."""
    seed: int = 0
    """Seed of every random choice (batch k of the caller's inputs uses seed + k)."""
    cache: bool = True
    """Skip the model call when the canvas did not change since the last one (exact)."""

    def __post_init__(self):
        if self.steps is not None:
            checks.count("steps", self.steps, 1)
        get_sampler(self.sampler)
        check_confidence(self.confidence)
        if self.block_length is not None:
            checks.count("block_length", self.block_length, 1)
        checks.non_negative("cfg_scale", self.cfg_scale)
        checks.count("seed", self.seed, 0, 2**63 - 1)
        if not isinstance(self.cache, bool):
            raise checks.InvalidArgument(f"cache={self.cache!r} must be True or False")
        self.choice  # noqa: B018 (validates temperature, top-k and top-p)

    @cached_property
    def choice(self) -> ChoiceConfig:
        """Temperature, top-k and top-p of the token choice."""
        return ChoiceConfig(self.temperature, self.top_k, self.top_p)

    @property
    def scheduled(self) -> bool:
        """Whether the sampler reveals a fixed number of masks per step."""
        return get_sampler(self.sampler).scheduled

    def resolve(self, default_steps: int, most_masks: int, vocab_size: int | None = None,
                what: str = "the canvas") -> SamplerOptions:
        """These options with `steps` set (`default_steps` when None), checked against the
        canvas: `most_masks` is the largest number of masks in one row."""
        steps = default_steps if self.steps is None else self.steps
        if most_masks >= 1:
            if self.block_length is not None and self.block_length > most_masks:
                raise checks.InvalidArgument(
                    f"block_length={self.block_length} (--block-length) is longer than the "
                    f"{most_masks} masks of {what}: use at most {most_masks}, or no blocks")
            limit = max(default_steps, most_masks) if self.scheduled else max(
                MAX_ANCESTRAL_STEPS, default_steps)
            if steps > limit:
                why = ("more steps than masks would reveal nothing" if self.scheduled
                       else "the ancestral sampler's limit")
                raise checks.InvalidArgument(
                    f"steps={steps} (--steps) is more than {limit:,} ({why}): use --steps "
                    f"between 1 and {limit:,}")
            blocks = 1 if self.block_length is None else math.ceil(most_masks / self.block_length)
            if steps < blocks:
                raise checks.InvalidArgument(
                    f"steps={steps} (--steps) is fewer than the {blocks} blocks of "
                    f"{self.block_length} masks: every block needs a step; use --steps "
                    f"{blocks} or more, or a longer --block-length")
        if vocab_size is not None and self.top_k is not None:
            checks.count("top_k", self.top_k, 1, vocab_size)
        return replace(self, steps=steps)

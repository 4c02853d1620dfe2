"""Token choice from logits: temperature, top-k, top-p, argmax, with float64 Gumbel noise.

Sampling is Gumbel-max: argmax(logits / T + G). The noise is drawn in float64 because
float32 Gumbel noise is truncated (its largest value is about 16.6), which silently lowers
the effective temperature and never draws tokens rarer than about 1e-7 (Zheng et al. 2024).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mlmkit.core import checks
from mlmkit.core.gumbel import gumbel_noise
from mlmkit.errors import InvalidArgument


@dataclass(frozen=True)
class ChoiceConfig:
    """How a token is chosen from a distribution over the vocabulary."""

    temperature: float = 1.0
    """0 is argmax; 1 samples from the model's distribution; higher is flatter."""
    top_k: int | None = None
    """Keep only the k most likely tokens (None: all)."""
    top_p: float | None = None
    """Keep the smallest set of most likely tokens whose probability reaches p (None: all)."""

    def __post_init__(self):
        checks.non_negative("temperature", self.temperature)
        if self.top_k is not None:
            checks.count("top_k", self.top_k, 1)
        if self.top_p is not None:
            checks.finite("top_p", self.top_p)
            if not 0 < self.top_p <= 1:
                raise InvalidArgument(f"top_p={self.top_p!r} (--top-p) must be in (0, 1], or "
                                      "unset for no nucleus filtering")




def filter_logits(logits: torch.Tensor, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """`logits` with the tokens outside top-k / top-p set to -inf (the top token always stays)."""
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits.double(), dim=-1)
        mass_before = torch.cumsum(probs, dim=-1) - probs
        drop_sorted = mass_before >= top_p
        drop_sorted[..., 0] = False
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def choose_tokens(
    logits: torch.Tensor, config: ChoiceConfig, generator: torch.Generator | None = None
) -> torch.Tensor:
    """One token id per row of `logits` [n, V]: argmax at temperature 0, else a sample."""
    if logits.shape[0] == 0:
        return torch.empty(0, dtype=torch.long, device=logits.device)
    if config.temperature == 0:
        return logits.argmax(dim=-1)
    scores = filter_logits(logits.double(), config.top_k, config.top_p)
    if config.temperature != 1:
        scores = scores / config.temperature
    return gumbel_noise(scores.shape, generator, device=logits.device).add_(scores).argmax(-1)

"""Confidence of a prediction, for low-confidence remasking: which positions to reveal first.

`prob` is the model's probability of the chosen token (LLaDA), `margin` the top-1 minus
top-2 probability, `entropy` the negative entropy of the distribution (higher = surer).
"""

from __future__ import annotations

import torch

from mlmkit.errors import InvalidArgument


def _prob(probs: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    return probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def _margin(probs: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    top = torch.topk(probs, min(2, probs.shape[-1]), dim=-1).values
    return top[:, 0] - (top[:, 1] if top.shape[1] > 1 else 0)


def _entropy(probs: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    return torch.special.xlogy(probs, probs).sum(-1)


CONFIDENCES = {"prob": _prob, "margin": _margin, "entropy": _entropy}


def confidence(kind: str, logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """float64 confidence [n] of each row of `logits` [n, V] whose chosen token is `tokens`."""
    probs = torch.softmax(logits.double(), dim=-1)
    return CONFIDENCES[check_confidence(kind)](probs, tokens)


def check_confidence(kind: str) -> str:
    """`kind` if it names a confidence measure; else an error listing the valid ones."""
    if kind not in CONFIDENCES:
        raise InvalidArgument(f"unknown --confidence {kind!r}: use one of {sorted(CONFIDENCES)}")
    return kind

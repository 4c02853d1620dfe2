"""Pseudo-log-likelihood of token sequences, for choosing among infill candidates: the
scoring engine's PLL (`mlmkit.scoring.masked_copies.score_token_ids`) on the content tokens."""

from __future__ import annotations

import numpy as np

from mlmkit.generation.canvas import special_wrap
from mlmkit.scoring.masked_copies import score_token_ids


def token_pll(mlm, token_ids: list[list[int]], *, batch_tokens: int | None = None,
              precision: str = "auto") -> list[np.ndarray]:
    """float64 log P(w_i | rest) per content token of each sequence (no special tokens)."""
    if not token_ids:
        return []
    prefix, suffix = special_wrap(mlm.tokenizer)
    full = [prefix + list(ids) + suffix for ids in token_ids]
    targets = [list(range(len(prefix), len(prefix) + len(ids))) for ids in token_ids]
    scores = score_token_ids(mlm, full, targets, metric="pll", batch_tokens=batch_tokens,
                             precision=precision)
    return [np.asarray(s, dtype=np.float64) for s in scores]

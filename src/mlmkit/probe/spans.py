"""Multi-token answers: log P(answer's tokens | prompt) with as many masks as tokens.

The answer's span in the filled statement is scored by the PLL engine with
PLL-word-l2r restricted to the span (the span is one "word"): token i is predicted with
tokens i..n masked and tokens < i visible. The sum is the chain-rule log-probability of
the whole answer given the prompt with n masks (PET's multi-mask decoding, left to
right). For a one-token answer it is exactly the single-mask score.
"""

from __future__ import annotations

import numpy as np

from mlmkit.core.progress import progress_wanted
from mlmkit.scoring.masked_copies import score_token_ids


def score_spans(mlm, filled_ids: list[list[int]], spans: list[list[int]], *,
                batch_tokens: int | None = None, precision: str = "fp32",
                progress: bool | None = None) -> np.ndarray:
    """float64 log-probability of each span's tokens (all masked, filled left to right)."""
    if not filled_ids:
        return np.zeros(0, dtype=np.float64)
    word_ids = []
    for ids, span in zip(filled_ids, spans, strict=True):
        words: list[int | None] = [None] * len(ids)
        for t in span:
            words[t] = 0
        word_ids.append(words)
    values = score_token_ids(mlm, filled_ids, spans, metric="pll_word_l2r", word_ids=word_ids,
                             batch_tokens=batch_tokens, precision=precision,
                             progress=progress_wanted(progress))
    return np.array([np.sum(v, dtype=np.float64) for v in values], dtype=np.float64)

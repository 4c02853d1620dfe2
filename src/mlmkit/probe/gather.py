"""Single-token answers: log P(token | masked prompt), one forward per distinct prompt."""

from __future__ import annotations

import numpy as np
import torch

from mlmkit.probe.answers import AnswerTokens
from mlmkit.probe.forward import for_each_mask_batch


def score_single_tokens(mlm, answers: AnswerTokens, *, batch_tokens: int | None = None,
                        precision: str = "fp32") -> np.ndarray:
    """float64 [Q] log-probabilities of the single-token answers (NaN for the others)."""
    out = np.full(len(answers.token), np.nan, dtype=np.float64)
    pairs = np.nonzero(answers.single)[0]
    context, token = answers.context[pairs], answers.token[pairs]
    row_of = np.full(len(answers.contexts), -1, dtype=np.int64)

    def consume(batch: np.ndarray, log_probs: torch.Tensor) -> None:
        row_of[batch] = np.arange(len(batch))
        chosen = row_of[context] >= 0
        rows = torch.from_numpy(row_of[context[chosen]]).to(log_probs.device)
        cols = torch.from_numpy(token[chosen]).to(log_probs.device)
        out[pairs[chosen]] = log_probs[rows, cols].double().cpu().numpy()
        row_of[batch] = -1

    for_each_mask_batch(mlm, answers.contexts, answers.mask_column, consume,
                        batch_tokens=batch_tokens, precision=precision)
    return out

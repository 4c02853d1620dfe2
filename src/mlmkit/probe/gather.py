"""Single-token answers: log P(token | masked prompt), one forward per distinct prompt."""

from __future__ import annotations

import numpy as np
import torch

from mlmkit.probe.answers import AnswerTokens
from mlmkit.probe.forward import for_each_mask_batch


def score_single_tokens(mlm, answers: AnswerTokens, *, batch_tokens: int | None = None,
                        precision: str = "fp32", progress: bool | None = None) -> np.ndarray:
    """float64 [Q] log-probabilities of the single-token answers (NaN for the others).

    Prompts longer than the model accepts are left NaN too: the caller scores those
    answers as spans, through the engine's sliding windows.
    """
    out = np.full(len(answers.token), np.nan, dtype=np.float64)
    fits = np.array([len(c) <= mlm.max_length for c in answers.contexts], dtype=bool)
    keep = np.nonzero(fits)[0]
    pairs = np.nonzero(answers.single)[0]
    pairs = pairs[fits[answers.context[pairs]]] if len(pairs) else pairs
    new_index = np.full(len(answers.contexts), -1, dtype=np.int64)
    new_index[keep] = np.arange(len(keep))
    context, token = new_index[answers.context[pairs]], answers.token[pairs]
    row_of = np.full(len(keep), -1, dtype=np.int64)

    def consume(batch: np.ndarray, log_probs: torch.Tensor) -> None:
        row_of[batch] = np.arange(len(batch))
        chosen = row_of[context] >= 0
        rows = torch.from_numpy(row_of[context[chosen]]).to(log_probs.device)
        cols = torch.from_numpy(token[chosen]).to(log_probs.device)
        out[pairs[chosen]] = log_probs[rows, cols].double().cpu().numpy()
        row_of[batch] = -1

    for_each_mask_batch(mlm, [answers.contexts[c] for c in keep], answers.mask_column[keep],
                        consume, batch_tokens=batch_tokens, precision=precision,
                        progress=progress)
    return out

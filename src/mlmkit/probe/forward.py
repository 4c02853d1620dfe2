"""One forward per prompt, the MLM head only at its mask, in padded-token-budget batches.

Prompts are sorted by length so batches carry little padding, and the number of rows
per batch is bounded so the [rows, V] head output stays small; each batch's
log-probabilities go to a callback, so no [n_prompts, V] array is ever held.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from mlmkit.models import masked_log_probs
from mlmkit.scoring.engine import (
    PRECISIONS,
    cut_batches,
    default_batch_tokens,
    max_rows_for_head,
)


def for_each_mask_batch(
    mlm,
    ids: list[list[int]],
    mask_column: np.ndarray,
    consume: Callable[[np.ndarray, torch.Tensor], None],
    *,
    batch_tokens: int | None = None,
    precision: str = "fp32",
    names: Callable[[int], str] | None = None,
    progress: bool | None = None,
) -> None:
    """Call `consume(prompt_indices, log_probs [b, V])` for batches covering every prompt.

    A prompt longer than the model accepts is an error (named by `names(i)`), never cut.
    """
    from mlmkit.errors import MlmkitError

    if precision not in PRECISIONS:
        raise MlmkitError(f"unknown precision {precision!r}: use one of {list(PRECISIONS)}")
    if not ids:
        return
    model, tokenizer = mlm.model, mlm.tokenizer
    lengths = np.array([len(x) for x in ids], dtype=np.int64)
    too_long = np.nonzero(lengths > mlm.max_length)[0]
    if len(too_long):
        i = int(too_long[0])
        name = names(i) if names is not None else f"prompt {i}"
        raise MlmkitError(f"{name}: the prompt has {lengths[i]} tokens, more than the model's "
                          f"{mlm.max_length}: shorten the input text (it is not truncated)")
    order = np.argsort(lengths, kind="stable")
    budget = int(batch_tokens or default_batch_tokens(model, int(lengths.max())))
    if budget < 1:
        raise MlmkitError(f"batch_tokens {budget} must be positive")
    vocab = int(getattr(model.config, "vocab_size", len(tokenizer)))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    flat = np.concatenate([np.concatenate([np.asarray(x, dtype=np.int64) for x in ids]), [pad]])
    autocast = torch.autocast(device_type=mlm.device.type, dtype=torch.bfloat16,
                              enabled=precision == "bf16")
    from mlmkit.runtime.progress import Progress

    with torch.inference_mode(), autocast, Progress("probing", len(ids), "prompts",
                                                    enabled=progress) as bar:
        for lo, hi in cut_batches(lengths[order], budget, max_rows_for_head(vocab)):
            batch = order[lo:hi]
            k = np.arange(int(lengths[batch].max()), dtype=np.int64)[None, :]
            valid = k < lengths[batch][:, None]
            grid = flat[np.where(valid, offsets[batch][:, None] + k, len(flat) - 1)]
            attention = valid.astype(np.int64)
            positions = np.stack([np.arange(len(batch)), mask_column[batch]], axis=1)
            device = mlm.device
            log_probs = masked_log_probs(
                model, torch.from_numpy(grid).to(device), torch.from_numpy(attention).to(device),
                torch.from_numpy(positions).to(device),
            )
            consume(batch, log_probs)
            bar.advance(len(batch))

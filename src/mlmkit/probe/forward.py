"""One forward per prompt, the MLM head only at its mask, through the one batching layer.

`mlmkit.engine.batching.run_jobs` sorts the prompts by length, cuts token-budget batches
(whose [rows, V] head output stays bounded) and runs the primitive; each batch's
log-probabilities go to a callback, so no [n_prompts, V] array is ever held.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from mlmkit.engine.batching import TokenJobs, run_jobs
from mlmkit.errors import InvalidData


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
    if not ids:
        return
    lengths = np.array([len(x) for x in ids], dtype=np.int64)
    too_long = np.nonzero(lengths > mlm.max_length)[0]
    if len(too_long):
        i = int(too_long[0])
        name = names(i) if names is not None else f"prompt {i}"
        raise InvalidData(f"{name}: the prompt has {lengths[i]} tokens, more than the model's "
                          f"{mlm.max_length}: shorten the input text (it is not truncated)")
    jobs = TokenJobs(ids, [[int(c)] for c in mask_column])

    def reduce(batch, log_probs: torch.Tensor) -> None:
        consume(batch.index, log_probs)  # one read per row: row k is prompt batch.index[k]

    run_jobs(mlm, jobs, reduce, batch_tokens=batch_tokens, precision=precision,
             progress=progress, description="probing", unit="prompts")

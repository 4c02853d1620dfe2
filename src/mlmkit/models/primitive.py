"""The core primitive: the encoder once, the MLM head only at the positions asked for.

Training (sparse prediction), PLL scoring, fill-mask, iterative unmasking, probes and
bias measures all call `masked_logits` / `masked_log_probs`. The head is a d×V
projection: applying it at every position costs 20–70% of the FLOPs and B×L×V floats.
"""

from __future__ import annotations

import logging
from functools import partial

import torch

from mlmkit.models.adapters import adapter_for
from mlmkit.models.exact_rows import exact_rows
from mlmkit.models.sparse_last_layer import in_full_forward, sparse_hidden

logger = logging.getLogger(__name__)
_warned_fallback: set[str] = set()


def _flat_index(positions: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Flat indices into B×L from a bool mask [B, L] or (row, col) pairs [n, 2]."""
    batch, length = shape
    if positions.dtype == torch.bool:
        if positions.shape != shape:
            raise ValueError(
                f"positions mask has shape {tuple(positions.shape)}, expected {tuple(shape)}"
            )
        return positions.reshape(-1).nonzero().squeeze(1)
    if positions.ndim != 2 or positions.shape[1] != 2:
        raise ValueError(
            f"positions must be a bool mask [B, L] or (row, col) pairs [n, 2]; "
            f"got shape {tuple(positions.shape)}"
        )
    rows, cols = positions[:, 0], positions[:, 1]
    if len(rows) and (
        rows.min() < 0 or cols.min() < 0 or rows.max() >= batch or cols.max() >= length
    ):
        raise ValueError(f"positions out of range for a batch of shape {tuple(shape)}")
    return rows * length + cols


def masked_logits(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    positions: torch.Tensor,
) -> torch.Tensor:
    """MLM logits [n_positions, vocab] at `positions`, in row-major order.

    `positions` is a bool mask [B, L] or a LongTensor [n, 2] of (row, col) pairs.
    `attention_mask` None: every position is a token (a batch of one length, no padding:
    the attention runs without a mask). The last transformer layer runs only at
    `positions` where the architecture allows it (`sparse_last_layer_supported`).
    Differentiable (it is the training loss path) and usable under inference_mode.
    An architecture without an adapter falls back to the full model's logits.
    """
    if attention_mask is not None and not torch.compiler.is_compiling() \
            and bool(attention_mask.all()):
        attention_mask = None  # no padding (packed blocks): the attention needs no mask
    adapter = adapter_for(model)
    index = _flat_index(positions.to(input_ids.device), input_ids.shape)
    if adapter is None:
        name = type(model).__name__
        if name not in _warned_fallback:
            _warned_fallback.add(name)
            logger.warning(
                "mlmkit has no adapter for %s: computing full logits at every position "
                "(correct, but slower and larger in memory)",
                name,
            )
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
        return logits.reshape(-1, logits.shape[-1]).index_select(0, index)
    length = input_ids.shape[1]
    selected = sparse_hidden(model, input_ids, attention_mask, index // length, index % length)
    if selected is None:  # an architecture whose last layer runs in full
        hidden = adapter.encode(model, input_ids, attention_mask)
        selected = hidden.reshape(-1, hidden.shape[-1]).index_select(0, index)
    if in_full_forward():  # the head's bits as in a full forward's product over all rows
        return exact_rows(partial(adapter.head, model), selected)
    return adapter.head(model, selected)


def masked_log_probs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    positions: torch.Tensor,
) -> torch.Tensor:
    """float32 log-probabilities [n_positions, vocab] at `positions` (see `masked_logits`)."""
    logits = masked_logits(model, input_ids, attention_mask, positions)
    return torch.log_softmax(logits.float(), dim=-1)

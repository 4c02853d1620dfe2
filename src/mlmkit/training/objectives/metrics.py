"""Held-out metrics of objectives: masked-token loss and top-1/top-5 accuracy, and
pseudo-perplexity.

Sums run in float64. Masked-token metrics use masks fixed once per run, so numbers from
different steps (and from a resumed run) compare the same predictions.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from mlmkit.models import masked_log_probs


@torch.no_grad()
def masked_token_metrics(model, batches, autocast, log_probs_fn=None) -> dict[str, float]:
    """Mean loss, top-1 and top-5 accuracy over the masked positions of `batches`.

    Each batch is a dict with input_ids, attention_mask, mask (bool) and labels;
    `log_probs_fn(model, input_ids, attention_mask, mask)` gives the log-probabilities at the
    masked positions (default: the primitive's `masked_log_probs`).
    """
    log_probs_fn = log_probs_fn or masked_log_probs
    loss_sum, top1, top5, count = 0.0, 0, 0, 0
    for batch in batches:
        mask = batch["mask"]
        if not mask.any():
            continue
        with autocast():
            log_probs = log_probs_fn(model, batch["input_ids"], batch["attention_mask"], mask)
        targets = batch["labels"][mask]
        loss_sum += float(-log_probs.gather(1, targets[:, None]).double().sum())
        best = log_probs.topk(min(5, log_probs.shape[1]), dim=-1).indices
        top1 += int((best[:, 0] == targets).sum())
        top5 += int((best == targets[:, None]).any(dim=1).sum())
        count += int(mask.sum())
    if count == 0:
        return {}
    return {"loss": loss_sum / count, "accuracy": top1 / count, "top5_accuracy": top5 / count,
            "masked_tokens": count}


def pseudo_perplexity(log_probs: list[np.ndarray]) -> float:
    """exp(-sum PLL / number of tokens) over all sentences (float64)."""
    total = sum(float(x.sum()) for x in log_probs)
    count = sum(len(x) for x in log_probs)
    return math.exp(-total / count) if count else float("nan")

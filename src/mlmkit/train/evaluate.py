"""Held-out metrics: masked-token loss and top-1/top-5 accuracy, and pseudo-perplexity.

Sums run in float64. Masked-token metrics use masks fixed once per run, so numbers from
different steps (and from a resumed run) compare the same predictions.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from mlmkit.models import masked_log_probs


@torch.no_grad()
def masked_token_metrics(model, batches, autocast) -> dict[str, float]:
    """Mean loss, top-1 and top-5 accuracy over the masked positions of `batches`.

    Each batch is a dict with input_ids, attention_mask, mask (bool) and labels.
    """
    loss_sum, top1, top5, count = 0.0, 0, 0, 0
    for batch in batches:
        mask = batch["mask"]
        if not mask.any():
            continue
        with autocast():
            log_probs = masked_log_probs(model, batch["input_ids"], batch["attention_mask"], mask)
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


@torch.no_grad()
def pseudo_log_likelihoods(model, tokenizer, sentences: list[list[int]], autocast,
                           max_rows: int = 256) -> list[np.ndarray]:
    """Per-token log P(w_t | sentence with w_t masked) for each sentence (Salazar et al.).

    Each sentence is wrapped in [CLS] ... [SEP]; every row of a batch masks one position.
    """
    device = next(model.parameters()).device
    cls, sep, mask_id = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    rows = [(s, t) for s, ids in enumerate(sentences) for t in range(len(ids))]
    results = [np.zeros(len(ids), dtype=np.float64) for ids in sentences]
    for start in range(0, len(rows), max_rows):
        chunk = rows[start:start + max_rows]
        width = max(len(sentences[s]) for s, _ in chunk) + 2
        ids = torch.full((len(chunk), width), pad, dtype=torch.long)
        attention = torch.zeros_like(ids)
        for row, (s, _) in enumerate(chunk):  # building inputs, not the hot path
            tokens = [cls, *sentences[s], sep]
            ids[row, :len(tokens)] = torch.tensor(tokens)
            attention[row, :len(tokens)] = 1
        cols = torch.tensor([t + 1 for _, t in chunk])
        row_index = torch.arange(len(chunk))
        targets = ids[row_index, cols].clone()
        ids[row_index, cols] = mask_id
        positions = torch.stack([row_index, cols], dim=1)
        with autocast():
            log_probs = masked_log_probs(model, ids.to(device), attention.to(device),
                                         positions.to(device))
        picked = log_probs.gather(1, targets.to(device)[:, None]).squeeze(1).double().cpu()
        for (s, t), value in zip(chunk, picked.tolist(), strict=True):
            results[s][t] = value
    return results


def pseudo_perplexity(log_probs: list[np.ndarray]) -> float:
    """exp(-sum PLL / number of tokens) over all sentences (float64)."""
    total = sum(float(x.sum()) for x in log_probs)
    count = sum(len(x) for x in log_probs)
    return math.exp(-total / count) if count else float("nan")

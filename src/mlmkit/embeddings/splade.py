"""SPLADE training's pieces: differentiable sparse vectors from the MLM head, the ranking
loss on their dot products and the FLOPS regulariser that makes them sparse.

A SPLADE vector has one weight per vocabulary entry: max over the text's tokens of
log(1 + relu(MLM logit)). Training pulls a query's vector towards its passage's (the
in-batch-negatives ranking loss on dot products, sentence-transformers'
SparseMultipleNegativesRankingLoss at its scale 1) while FLOPS (Paria et al. 2020) pushes the
mean activation of each vocabulary entry over the batch towards zero: the sum over the
vocabulary of its square is, up to a factor, the expected cost of a dot product between two
sparse vectors. Queries and documents get separate weights (queries should be sparser: they
are encoded at search time), each raised quadratically from 0 over the first part of the
run, as sentence-transformers' SparseEncoderTrainer does by default, because a regulariser
at full weight from the first step collapses the vectors to zero before they learn anything.
Together they equal sentence-transformers' SpladeLoss(SparseMultipleNegativesRankingLoss).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from mlmkit.models.adapters import adapter_for

SPLADE_SCALE = 1.0  # SparseMultipleNegativesRankingLoss's: dot products are unbounded
QUERY_REGULARIZER = 5e-5  # the weights sentence-transformers' SPLADE examples train with
DOCUMENT_REGULARIZER = 3e-5
REGULARIZER_WARMUP = 1 / 3  # the share of the steps over which the weights rise (quadratic)


def splade_vectors(model, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """float32 (float64 for a float64 model) [b, V] with gradients: max over the tokens `mask` [b, L] covers of
    log(1 + relu(MLM logit)); the head runs only at those tokens."""
    full = bool(mask.all())
    attention = None if full else mask
    adapter = adapter_for(model)
    if adapter is None:  # no adapter: the full model's logits, the real tokens' kept
        logits = model(input_ids=input_ids, attention_mask=attention).logits[mask.bool()]
    else:
        hidden = adapter.encode(model, input_ids, attention)
        logits = adapter.head(model, hidden[mask.bool()])
    values = torch.log1p(torch.relu(logits.to(torch.promote_types(logits.dtype, torch.float32))))
    rows = torch.arange(len(input_ids), device=values.device)[:, None].expand_as(mask)
    index = rows[mask.bool()][:, None].expand_as(values)
    return values.new_zeros(len(input_ids), values.shape[1]).scatter_reduce(
        0, index, values, reduce="amax", include_self=True)


def flops(vectors: torch.Tensor) -> torch.Tensor:
    """FLOPS: Σ over the vocabulary of (mean over the batch of the activation)²."""
    return vectors.mean(dim=0).square().sum()


def regularizer_weight(weight: float, step: int, total_steps: int,
                       warmup: float = REGULARIZER_WARMUP) -> float:
    """`weight` × (step / warm-up steps)² during the warm-up (step counted from 0), then
    `weight` (sentence-transformers' SpladeRegularizerWeightSchedulerCallback, quadratic)."""
    if warmup <= 0:
        return weight
    warm = max(1, int(total_steps * warmup))
    return weight if step >= warm else weight * (step / warm) ** 2


def splade_loss(columns: Sequence[torch.Tensor], scale: float = SPLADE_SCALE,
                query_weight: float = QUERY_REGULARIZER,
                document_weight: float = DOCUMENT_REGULARIZER) -> torch.Tensor:
    """`columns` = [queries, positives, negatives...], each [b, V] sparse vectors: the
    cross-entropy of `scale` × dot product with positive i as query i's answer among every
    document of the batch, plus `document_weight` × FLOPS of every document and
    `query_weight` × FLOPS of the queries."""
    queries, documents = columns[0], torch.cat(list(columns[1:]), dim=0)
    logits = queries @ documents.T * scale
    ranking = F.cross_entropy(logits, torch.arange(len(queries), device=logits.device))
    return ranking + document_weight * flops(documents) + query_weight * flops(queries)


def active_dims(vectors: torch.Tensor) -> float:
    """The mean number of non-zero weights per vector (what a sparse index stores)."""
    return float((vectors > 0).sum(dim=1).float().mean()) if len(vectors) else 0.0

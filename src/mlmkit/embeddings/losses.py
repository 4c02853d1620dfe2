"""The contrastive losses that turn a masked LM into a sentence encoder, as functions of the
embeddings of one batch (the encoder's forward pass is the caller's).

Each equals the sentence-transformers loss of the same name on the same embeddings (its
default scale 20 and cosine similarity), so a model trained here learns what it would learn
there:

- `ranking_loss` (MultipleNegativesRankingLoss, InfoNCE): anchor i should be closer to its
  positive i than to every other candidate of the batch: the other anchors' positives and
  every hard negative. With (text, text) pairs and dropout on, it is unsupervised SimCSE.
  Its `rows=` slices let GradCache (`cached-mnrl`, CachedMultipleNegativesRankingLoss;
  `mlmkit.finetuning.embedding_cache`) back-propagate it a slice of anchors at a time.
- `cosent_loss` (CoSENT): for scored pairs (STS-B), every pair scored higher should have a
  higher cosine than every pair scored lower; only the order of the scores counts.
- `matryoshka_loss`: a loss summed over nested prefixes of the vectors (768, 512, ..., 64
  dimensions), each prefix normalised, so a vector cut to its first N dimensions still works.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from mlmkit.errors import InvalidArgument

DEFAULT_SCALE = 20.0


def cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """[n, m]: the cosine of every row of `a` with every row of `b`."""
    return F.normalize(a, p=2, dim=1) @ F.normalize(b, p=2, dim=1).T


def ranking_loss(columns: Sequence[torch.Tensor], scale: float = DEFAULT_SCALE,
                 scores: torch.Tensor | None = None, rows: slice | None = None) -> torch.Tensor:
    """In-batch negatives: `columns` = [anchors, positives, negatives_1, ...], each [b, d].
    The candidates of anchor i are every positive and every negative of the batch; the
    loss is the cross-entropy of `scale` × cosine with positive i as the answer.

    `rows` (a slice of the anchors) gives those anchors' share of the loss (their
    cross-entropies summed, divided by b): the shares of slices that cover the batch sum to
    the loss, so GradCache can back-propagate it slice by slice, holding one slice's
    [rows, candidates] logits at a time."""
    candidates = torch.cat(list(columns[1:]), dim=0)
    if rows is None:
        logits = cosine_matrix(columns[0].float(), candidates.float()) * scale
        return F.cross_entropy(logits, torch.arange(len(columns[0]), device=logits.device))
    answers = torch.arange(len(columns[0]), device=candidates.device)[rows]
    logits = cosine_matrix(columns[0][rows].float(), candidates.float()) * scale
    return F.cross_entropy(logits, answers, reduction="sum") / len(columns[0])


def cosent_loss(columns: Sequence[torch.Tensor], scale: float = DEFAULT_SCALE,
                scores: torch.Tensor | None = None) -> torch.Tensor:
    """CoSENT: log(1 + Σ exp(scale·(cos_j − cos_i))) over the pairs (i, j) of the batch
    where pair i is scored higher than pair j; `columns` = [firsts, seconds]."""
    if scores is None:
        raise InvalidArgument("the cosent loss needs a score per pair: give the scored pairs' "
                              "score column (score_field=, --score-field)")
    first, second = (column.float() for column in columns[:2])
    cosine = (F.normalize(first, p=2, dim=1) * F.normalize(second, p=2, dim=1)).sum(1) * scale
    difference = cosine[None, :] - cosine[:, None]  # [i, j]: cos_j - cos_i
    higher = scores[:, None] > scores[None, :]  # pair i is scored above pair j
    terms = difference[higher]
    return torch.logsumexp(torch.cat([terms.new_zeros(1), terms]), dim=0)


LOSSES: dict[str, Callable] = {"mnrl": ranking_loss, "cached-mnrl": ranking_loss,
                               "simcse": ranking_loss, "cosent": cosent_loss}


def matryoshka_loss(loss: Callable, columns: Sequence[torch.Tensor], dims: Sequence[int],
                    weights: Sequence[float] | None = None, scale: float = DEFAULT_SCALE,
                    scores: torch.Tensor | None = None, **rows) -> torch.Tensor:
    """Σ weight · loss(the first `dim` dimensions of every column, normalised) over `dims`
    (`rows=`, the ranking loss's slice of anchors, is passed on)."""
    weights = [1.0] * len(dims) if weights is None else list(weights)
    total = 0.0
    for dim, weight in zip(dims, weights, strict=True):
        cut = [F.normalize(column[:, :dim].float(), p=2, dim=-1) for column in columns]
        total = total + weight * loss(cut, scale=scale, scores=scores, **rows)
    return total

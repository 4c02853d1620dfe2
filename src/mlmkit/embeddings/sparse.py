"""SPLADE vectors from the MLM head: each vocabulary entry weighs
max over the text's tokens of log(1 + relu(logit)), kept as the top-k (token, weight) pairs.

SPLADE (Formal et al. 2021) reads the MLM head at every token of the text, unlike `embed`:
the batches run through the primitive (`masked_logits`) with every column read, so the
engine keeps the head's [positions, V] output within its bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from mlmkit.core import checks
from mlmkit.embeddings.embed import _texts
from mlmkit.engine.batching import TokenJobs, run_jobs
from mlmkit.models.load import prepare_mlm


@dataclass
class SparseVector:
    """A text's top-k vocabulary weights, heaviest first."""

    tokens: list[str]
    token_ids: list[int]
    weights: list[float]

    def to_dict(self) -> dict:
        return {"tokens": self.tokens, "token_ids": self.token_ids, "weights": self.weights}


def embed_sparse(model, texts: str | Sequence[str], *, top_k: int = 64,
                 batch_tokens: int | None = None, precision: str = "auto", device=None,
                 threads: int | None = None,
                 progress: bool | None = None) -> SparseVector | list[SparseVector]:
    """SPLADE max pooling of `texts`: per text, the `top_k` vocabulary entries of largest
    max-over-tokens log(1 + relu(MLM logit)), with their weights (zero weights left out)."""
    items = _texts(texts)
    top_k = checks.count("top_k", top_k, 1)
    mlm, precision = prepare_mlm(model, device=device, precision=precision, threads=threads)
    ids = mlm.tokenizer(items, add_special_tokens=True)["input_ids"]
    k = min(top_k, int(mlm.model.config.vocab_size))

    def reduce(batch, logits):
        values = torch.log1p(torch.relu(logits.float()))
        pooled = torch.zeros(batch.rows, values.shape[1], dtype=values.dtype,
                             device=values.device)
        index = batch.row_of_position.unsqueeze(1).expand_as(values)
        pooled.scatter_reduce_(0, index, values, reduce="amax", include_self=True)
        weights, vocab = pooled.topk(k, dim=1)
        return [(w.tolist(), v.tolist()) for w, v in zip(weights, vocab, strict=True)]

    jobs = TokenJobs(ids, [list(range(len(row))) for row in ids])
    found = run_jobs(mlm, jobs, reduce, batch_tokens=batch_tokens, precision=precision,
                     progress=progress, description="SPLADE", unit="texts", call="logits",
                     max_length=mlm.max_length, name_of=lambda i: f"text {i + 1}")
    results = []
    for weights, vocab in found if found is not None else []:
        keep = [i for i, w in enumerate(weights) if w > 0]
        token_ids = [int(vocab[i]) for i in keep]
        results.append(SparseVector(tokens=mlm.tokenizer.convert_ids_to_tokens(token_ids),
                                    token_ids=token_ids,
                                    weights=[float(np.float32(weights[i])) for i in keep]))
    return results[0] if isinstance(texts, str) else results

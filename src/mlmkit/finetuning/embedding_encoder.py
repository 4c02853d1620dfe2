"""The texts of one training step → pooled vectors with gradients, in as little padding as
the lengths allow.

Every text of a step (all columns: anchors, positives, negatives) runs through the encoder
(the masked LM's `base_model`: the head never runs) in one pass over length groups: the
texts are sorted by length and cut into groups whose padded size stays within `SLACK` of
their real tokens (and within the token budget), each padded to its own longest text (a
group of one length runs without an attention mask). A text's vector does not depend on
which texts share its group, so the vectors and the loss equal those of one padded batch
per column (sentence-transformers' way) up to float rounding; only the padding the
encoder computes on shrinks.
"""

from __future__ import annotations

import numpy as np
import torch

from mlmkit.core.devices import autocast
from mlmkit.embeddings.pooling import pool

SLACK = 1.25  # a group's padded tokens may exceed its real tokens by a quarter


def length_groups(lengths: np.ndarray, max_tokens: int) -> list[np.ndarray]:
    """Row indices in groups of similar length (ascending), each within `SLACK` × its real
    tokens and `max_tokens` padded tokens (a single longer row is a group of its own)."""
    order = np.argsort(lengths, kind="stable")
    groups, start, real = [], 0, 0
    for position, row in enumerate(order):
        length = int(lengths[row])
        rows = position - start + 1
        if rows > 1 and (rows * length > SLACK * (real + length) or rows * length > max_tokens):
            groups.append(order[start:position])
            start, real = position, 0
        real += length
    groups.append(order[start:])
    return groups


class TrainingEncoder:
    """Pooled vectors [n, d] (float32, with gradients) of token-id lists."""

    def __init__(self, model, pad_id: int, pooling: str, precision: str, max_tokens: int):
        self.model, self.pad_id, self.pooling = model, pad_id, pooling
        self.precision, self.max_tokens = precision, max_tokens
        self.device = next(model.parameters()).device

    def __call__(self, ids: list[list[int]]) -> torch.Tensor:
        lengths = np.fromiter(map(len, ids), np.int64, len(ids))
        parts, order = [], []
        for group in length_groups(lengths, self.max_tokens):
            longest = int(lengths[group].max())
            batch = np.full((len(group), longest), self.pad_id, dtype=np.int64)
            for row, index in enumerate(group):
                batch[row, :lengths[index]] = ids[index]
            input_ids = torch.from_numpy(batch).to(self.device)
            mask = torch.from_numpy(np.arange(longest)[None, :] < lengths[group][:, None])
            mask = mask.to(self.device, torch.long)
            full = bool(lengths[group].min() == longest)
            with autocast(self.precision, self.device):
                hidden = self.model.base_model(input_ids=input_ids,
                                               attention_mask=None if full else mask
                                               ).last_hidden_state
            parts.append(pool(hidden, mask, self.pooling))
            order.append(group)
        vectors = torch.cat(parts)
        inverse = torch.empty(len(ids), dtype=torch.long)
        inverse[torch.from_numpy(np.concatenate(order))] = torch.arange(len(ids))
        return vectors[inverse.to(vectors.device)]

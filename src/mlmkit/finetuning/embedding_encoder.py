"""The texts of one training step → pooled vectors with gradients, in as little padding as
the lengths allow.

Every text of a step (all columns: anchors, positives, negatives) runs through the encoder
(the masked LM's `base_model`: the head never runs), in one of two ways:

- packed (the RoPE families of `mlmkit.models.unpadded`: ModernBERT, EuroBERT): the texts
  are packed into rows of about `PACK_TOKENS` tokens, each token attending only to its own
  text, positions restarting per text, and the whole step runs as one forward pass with
  almost no padding. One pass matters on a CPU: each pass ends in a dense gradient of the
  embedding matrix (vocabulary × width) that is zero-filled and summed.
- length groups (every other family: absolute positions cannot restart inside a row): the
  texts are sorted by length and cut into groups whose padded size stays within `SLACK` of
  their real tokens (and within the token budget), each padded to its own longest text (a
  group of one length runs without an attention mask).

A text's vector does not depend on which texts share its row or group, so the vectors and
the loss equal those of one padded batch per column (sentence-transformers' way) up to
float rounding; only the padding the encoder computes on shrinks.
"""

from __future__ import annotations

import numpy as np
import torch

from mlmkit.core.devices import autocast
from mlmkit.embeddings.pooling import pool, pool_segments
from mlmkit.models.unpadded import ROTARY_MODEL_TYPES, unpadded_hidden

SLACK = 1.25  # a group's padded tokens may exceed its real tokens by a quarter
PACK_TOKENS = 64  # a packed row's length (or the longest text): attention costs its square


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


def pack_rows(lengths: np.ndarray, capacity: int) -> list[list[int]]:
    """Texts into rows of at most `capacity` tokens (a longer text alone in its row),
    longest first, each into the first row with room."""
    rows, room = [], []
    for index in np.argsort(-lengths, kind="stable"):
        length = int(lengths[index])
        slot = next((k for k, free in enumerate(room) if free >= length), None)
        if slot is None:
            rows.append([int(index)])
            room.append(capacity - length)
        else:
            rows[slot].append(int(index))
            room[slot] -= length
    return rows


def grouped_vectors(ids: list[list[int]], lengths: np.ndarray, max_tokens: int, pad_id: int,
                    device, encode) -> torch.Tensor:
    """`encode(input_ids, mask, full)` of each length group of `ids` (`length_groups`,
    each padded to its own longest text; `mask` [g, L] long, `full`: no padding in the
    group), the vectors put back in the order of `ids`."""
    parts, order = [], []
    for group in length_groups(lengths, max_tokens):
        longest = int(lengths[group].max())
        batch = np.full((len(group), longest), pad_id, dtype=np.int64)
        for row, index in enumerate(group):
            batch[row, :lengths[index]] = ids[index]
        mask = torch.from_numpy(np.arange(longest)[None, :] < lengths[group][:, None])
        parts.append(encode(torch.from_numpy(batch).to(device), mask.to(device, torch.long),
                            bool(lengths[group].min() == longest)))
        order.append(group)
    vectors = torch.cat(parts)
    inverse = torch.empty(len(ids), dtype=torch.long)
    inverse[torch.from_numpy(np.concatenate(order))] = torch.arange(len(ids))
    return vectors[inverse.to(vectors.device)]


class TrainingEncoder:
    """Pooled vectors [n, d] (float32, with gradients) of token-id lists."""

    def __init__(self, model, pad_id: int, pooling: str, precision: str, max_tokens: int):
        self.model, self.pad_id, self.pooling = model, pad_id, pooling
        self.precision, self.max_tokens = precision, max_tokens
        self.device = next(model.parameters()).device
        self.packed = getattr(model.config, "model_type", None) in ROTARY_MODEL_TYPES \
            and getattr(model.config, "_attn_implementation", "sdpa") in ("sdpa", "eager")

    def __call__(self, ids: list[list[int]]) -> torch.Tensor:
        lengths = np.fromiter(map(len, ids), np.int64, len(ids))
        if self.packed:
            return self._packed(ids, lengths)
        return self._grouped(ids, lengths)

    def _packed(self, ids: list[list[int]], lengths: np.ndarray) -> torch.Tensor:
        rows = pack_rows(lengths, max(PACK_TOKENS, int(lengths.max())))
        width = max(int(lengths[row].sum()) for row in rows)
        tokens = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        documents = np.zeros((len(rows), width), dtype=np.int64)  # 1, 2, ... per row; 0 pad
        segment = np.full((len(rows), width), -1, dtype=np.int64)
        offset = np.zeros((len(rows), width), dtype=np.int64)
        for r, row in enumerate(rows):
            at = 0
            for number, index in enumerate(row, start=1):
                length = int(lengths[index])
                tokens[r, at:at + length] = ids[index]
                documents[r, at:at + length] = number
                segment[r, at:at + length] = index
                offset[r, at:at + length] = np.arange(length)
                at += length
        with autocast(self.precision, self.device):
            hidden = unpadded_hidden(self.model, torch.from_numpy(tokens).to(self.device),
                                     torch.from_numpy(documents).to(self.device))
        return pool_segments(hidden.reshape(-1, hidden.shape[-1]),
                             torch.from_numpy(segment.reshape(-1)).to(self.device),
                             torch.from_numpy(offset.reshape(-1)).to(self.device),
                             len(ids), self.pooling)

    def _grouped(self, ids: list[list[int]], lengths: np.ndarray) -> torch.Tensor:
        def encode(input_ids, mask, full):
            with autocast(self.precision, self.device):
                hidden = self.model.base_model(input_ids=input_ids,
                                               attention_mask=None if full else mask
                                               ).last_hidden_state
            return pool(hidden, mask, self.pooling)

        return grouped_vectors(ids, lengths, self.max_tokens, self.pad_id, self.device, encode)

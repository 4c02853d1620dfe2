"""The texts of one SPLADE training step → sparse vectors [n, V] with gradients.

Unlike the dense encoder (`embedding_encoder`), SPLADE reads the MLM head at every token,
so a forward group holds [tokens, V] logits: the texts run in the same length groups
(sorted by length, each group padded to its own longest text), each group's head applied
only at its real tokens. A text's vector does not depend on its group, so the vectors equal
those of one padded batch per column (sentence-transformers') up to float rounding.
"""

from __future__ import annotations

import numpy as np
import torch

from mlmkit.core.devices import autocast
from mlmkit.embeddings.splade import splade_vectors
from mlmkit.finetuning.embedding_encoder import grouped_vectors


class SparseTrainingEncoder:
    """SPLADE vectors [n, V] (float32, with gradients) of token-id lists."""

    def __init__(self, model, pad_id: int, precision: str, max_tokens: int):
        self.model, self.pad_id = model, pad_id
        self.precision, self.max_tokens = precision, max_tokens
        self.device = next(model.parameters()).device

    def __call__(self, ids: list[list[int]]) -> torch.Tensor:
        def encode(input_ids, mask, full):
            with autocast(self.precision, self.device):
                return splade_vectors(self.model, input_ids, mask)

        lengths = np.fromiter(map(len, ids), np.int64, len(ids))
        return grouped_vectors(ids, lengths, self.max_tokens, self.pad_id, self.device, encode)

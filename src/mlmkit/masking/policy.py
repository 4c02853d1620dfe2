"""`MaskingPolicy`: units × rate × count × weights × corruption behind one call.

    out = policy(input_ids, attention_mask, step=step, seed=seed,
                 word_starts=..., document_ids=...)

Every call derives its randomness from (seed, step) on the batch's device, so a resumed run
masks exactly as an uninterrupted one; given `rows` (the global row number of each row),
from (seed, step, row, position) through the counter stream, so a row masks alike in any
batch, on any device; the only learned state (the loss-EMA table) goes
through `state_dict`. Everything on the hot path is batched torch: no loop over rows or
positions.
"""

from __future__ import annotations

import torch

from mlmkit.errors import MlmkitError
from mlmkit.masking.batch import IGNORE_INDEX, MaskedBatch
from mlmkit.masking.counts import tokens_of
from mlmkit.masking.lookup import lookup
from mlmkit.masking.seeding import stream_for

STATE_VERSION = 1


class MaskingPolicy:
    """A complete masking strategy; build one with `mlmkit.masking.build_policy`."""

    def __init__(self, *, vocabulary, units, rate, count, weights, corruption, config=None):
        self.vocabulary = vocabulary
        self.units, self.rate, self.count = units, rate, count
        self.weights, self.corruption = weights, corruption
        self.config = config or {}
        self.last_step = None

    def _check(self, input_ids, attention_mask, word_starts, document_ids):
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
            raise MlmkitError("input_ids must be a [batch, length] tensor of token ids")
        if input_ids.dtype not in (torch.int64, torch.int32):
            raise MlmkitError(f"input_ids must hold integer ids, not {input_ids.dtype}")
        for name, tensor in (("attention_mask", attention_mask), ("word_starts", word_starts),
                             ("document_ids", document_ids)):
            if tensor is not None and tensor.shape != input_ids.shape:
                raise MlmkitError(f"{name} has shape {tuple(tensor.shape)} but input_ids has "
                                  f"{tuple(input_ids.shape)}: they must match")
        if input_ids.device.type == "cpu" and input_ids.numel():
            low, high = int(input_ids.min()), int(input_ids.max())
            if low < 0 or high >= self.vocabulary.size:
                raise MlmkitError(f"input_ids hold id {high if high >= self.vocabulary.size else low}"
                                  f", outside the tokenizer's vocabulary of {self.vocabulary.size}")

    def maskable(self, input_ids, attention_mask=None) -> torch.Tensor:
        """Bool [B, L]: positions a policy may choose (no special, protected or padding)."""
        never = self.vocabulary.never_mask(input_ids.device)
        ok = ~lookup(never, input_ids)
        if attention_mask is not None:
            ok &= attention_mask.bool()
        return ok

    def unit_ids(self, input_ids, attention_mask=None, *, step=0, seed=0, word_starts=None,
                 document_ids=None, rows=None) -> torch.Tensor:
        """The units a call with these arguments would choose among (for tests and previews)."""
        generator = stream_for(seed, step, input_ids.device, rows)
        self.rate(input_ids.shape[0], step, generator, input_ids.device)  # same draw order
        maskable = self.maskable(input_ids, attention_mask)
        starts = self._word_starts(input_ids, word_starts)
        return self.units.assign(input_ids, maskable, starts, document_ids, generator)

    def _word_starts(self, input_ids, word_starts):
        if not self.units.needs_words:
            return None
        if word_starts is not None:
            return word_starts.bool()
        return self.vocabulary.word_starts(input_ids)

    def __call__(self, input_ids, attention_mask=None, *, step: int = 0, seed: int = 0,
                 word_starts=None, document_ids=None, rows=None) -> MaskedBatch:
        self._check(input_ids, attention_mask, word_starts, document_ids)
        if rows is not None and len(rows) != input_ids.shape[0]:
            raise MlmkitError(f"rows names {len(rows)} rows but input_ids has "
                              f"{input_ids.shape[0]}: give one global row number per row")
        input_ids = input_ids.long()
        device = input_ids.device
        generator = stream_for(seed, step, device, rows)
        rates = self.rate(input_ids.shape[0], step, generator, device)
        maskable = self.maskable(input_ids, attention_mask)
        starts = self._word_starts(input_ids, word_starts)
        units = self.units.assign(input_ids, maskable, starts, document_ids, generator)
        weights = self.weights.token_weights(input_ids, maskable, document_ids)
        single = self.units.single
        chosen = self.count.choose(units, weights, rates, generator, single=single)
        mask = tokens_of(chosen, units, single=single)
        corrupted = self.corruption(input_ids, mask, units, self.vocabulary.mask_id,
                                    self.vocabulary.replacements(device), generator)
        labels = torch.where(mask, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
        self.last_step = int(step)
        return MaskedBatch(input_ids=corrupted, labels=labels, mask=mask, rate=rates)

    def update_losses(self, token_ids: torch.Tensor, losses: torch.Tensor) -> None:
        """Feed per-token training losses to loss-based weights (a no-op for the others)."""
        self.weights.update(token_ids, losses)

    def state_dict(self) -> dict:
        return {"version": STATE_VERSION, "describe": self.describe(),
                "last_step": self.last_step, "weights": self.weights.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        if state.get("version") != STATE_VERSION:
            raise MlmkitError(f"masking-policy state version {state.get('version')!r} is not "
                              f"{STATE_VERSION}: it was saved by another mlmkit version")
        if state.get("describe") != self.describe():
            raise MlmkitError(f"the saved masking state is of policy {state.get('describe')!r}, "
                              f"not {self.describe()!r}: resume with the same masking config")
        self.last_step = state.get("last_step")
        self.weights.load_state_dict(state.get("weights", {}))

    def describe(self) -> str:
        rate = self.rate.describe() if hasattr(self.rate, "describe") else str(self.rate)
        return (f"units={self.units.describe()} rate={rate} count={self.count.name} "
                f"weights={self.weights.describe()} corruption={self.corruption.describe()}")

    def __repr__(self) -> str:
        return f"MaskingPolicy({self.describe()})"

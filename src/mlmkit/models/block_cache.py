"""Block cache: approximate key/value reuse outside the active block (Fast-dLLM's dual cache).

In semi-autoregressive unmasking only the active block's tokens change from step to step.
`BlockCache.refresh` runs the encoder on the whole canvas (exact) and keeps every layer's
keys and values; `BlockCache.window` then runs the encoder on the active block's columns
only, its queries attending to fresh keys and values inside the window and to the cached
ones outside it. The cached ones are stale by what changed inside the block since the
refresh, so the result is an approximation: the sampler refreshes at every new block and
`benchmarks/sampling.py` measures the error and the speed.

It works through the attention-function registry of transformers (every layer's keys and
values pass through it), so it needs no copy of the models' code: the families in
`FAMILIES` (their base-model attribute and position ids) are the ones tested.
"""

from __future__ import annotations

import contextlib
import contextvars

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from mlmkit.errors import InvalidArgument

FAMILIES = {
    "bert": ("bert", "absolute"),
    "roberta": ("roberta", "roberta"),
    "xlm-roberta": ("roberta", "roberta"),
    "camembert": ("roberta", "roberta"),
    "modernbert": ("model", "absolute"),
}
"""model_type -> (attribute of the base encoder, how its position ids are counted)."""

_NAME = "mlmkit_block_cache"
_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("mlmkit_block_cache", default=None)
_registered = False


def supported(model) -> bool:
    """Whether `model`'s architecture has a block cache."""
    return getattr(getattr(model, "config", None), "model_type", None) in FAMILIES


def check_supported(model) -> None:
    """An error naming the families with a block cache, for any other model."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in FAMILIES:
        raise InvalidArgument(
            f"--block-cache is not available for {model_type or type(model).__name__} "
            f"models (only {', '.join(sorted(FAMILIES))}): drop --block-cache")


def _attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
               sliding_window=None, **kwargs):
    """The attention function while a cache is active: records or reuses keys/values."""
    state = _ACTIVE.get()
    return state.attend(module, query, key, value, scaling, sliding_window)


def _register() -> None:
    global _registered
    if _registered:
        return
    AttentionInterface.register(_NAME, _attention)
    AttentionMaskInterface.register(_NAME, sdpa_mask)
    _registered = True


def position_ids(model, ids: torch.Tensor, pad_id: int | None) -> torch.Tensor:
    """The position ids the model gives the canvas `ids` (RoBERTa counts from pad + 1)."""
    kind = FAMILIES[model.config.model_type][1]
    if kind == "roberta":
        pad = model.config.pad_token_id if pad_id is None else pad_id
        real = ids.ne(pad).long()
        return torch.cumsum(real, dim=1) * real + pad
    return torch.arange(ids.shape[1], device=ids.device).expand_as(ids)


class BlockCache:
    """Per-layer keys and values of one canvas batch, refreshed once per block."""

    def __init__(self, model):
        check_supported(model)
        _register()
        self.model = model
        self.encoder = getattr(model, FAMILIES[model.config.model_type][0])
        self.keys: dict[int, torch.Tensor] = {}
        self.values: dict[int, torch.Tensor] = {}
        self.mode = "record"
        self.columns: slice | None = None
        self.key_padding: torch.Tensor | None = None
        self.positions: torch.Tensor | None = None

    @contextlib.contextmanager
    def _active(self):
        config = self.model.config
        before = config._attn_implementation
        token = _ACTIVE.set(self)
        config._attn_implementation = _NAME
        try:
            yield
        finally:
            config._attn_implementation = before
            _ACTIVE.reset(token)

    def _mask(self, module, query_positions: torch.Tensor, sliding_window) -> torch.Tensor:
        """bool [B, 1, W, L]: key padding, and the sliding window of local-attention layers
        (transformers passes the flash-style inclusive bound + 1)."""
        allowed = self.key_padding[:, None, None, :]
        if sliding_window is not None:
            distance = (query_positions[:, :, None] - self.positions[:, None, :]).abs()
            allowed = allowed & (distance <= sliding_window - 1)[:, None]
        return allowed

    def attend(self, module, query, key, value, scaling, sliding_window):
        """Attention of `query` [B, H, W, d] over the full row: fresh keys/values inside
        the window, cached ones outside it (recorded in full on a refresh)."""
        layer = id(module)
        if self.mode == "record":
            self.keys[layer], self.values[layer] = key, value
            full_key, full_value = key, value
        else:
            full_key = self.keys[layer].clone()
            full_value = self.values[layer].clone()
            full_key[:, :, self.columns] = key
            full_value[:, :, self.columns] = value
        query_positions = self.positions[:, self.columns] if self.mode == "window" \
            else self.positions
        mask = self._mask(module, query_positions, sliding_window)
        out = F.scaled_dot_product_attention(query, full_key.to(query.dtype),
                                             full_value.to(query.dtype), attn_mask=mask,
                                             scale=scaling)
        return out.transpose(1, 2).contiguous(), None

    def refresh(self, ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Hidden states [B, L, d] of the whole canvas (exact); keeps every layer's keys and
        values for the window passes that follow."""
        self.mode, self.columns = "record", slice(None)
        self.key_padding = attention_mask.bool()
        self.positions = torch.arange(ids.shape[1], device=ids.device).expand_as(ids)
        self.position_ids = position_ids(self.model, ids, None)
        with self._active():
            return self.encoder(input_ids=ids, attention_mask=attention_mask,
                                position_ids=self.position_ids).last_hidden_state

    def window(self, ids: torch.Tensor, columns: slice) -> torch.Tensor:
        """Hidden states [B, W, d] of the canvas columns `columns` only, every other column
        seen through the keys and values of the last refresh (approximate)."""
        if not self.keys:
            raise RuntimeError("BlockCache.window before refresh")
        self.mode, self.columns = "window", columns
        window_ids = ids[:, columns]
        with self._active():
            return self.encoder(input_ids=window_ids,
                                attention_mask=self.key_padding[:, columns].long(),
                                position_ids=self.position_ids[:, columns]).last_hidden_state

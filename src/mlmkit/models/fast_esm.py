"""ESM's encoder up to its last layer, written for speed: the input of the last layer that
`sparse_last_layer` then computes only where the head reads.

A protein's pseudo-log-likelihood runs one masked copy per residue through the encoder,
so the encoder's element-wise work is paid hundreds of times per protein. transformers'
ESM layer spends a good part of a CPU forward outside its matrix products: the query is
scaled in a pass of its own, q and k are rotated with `rotate_half` (two slices, a
negation, a concatenation, two products and a sum), and GELU is written as five
element-wise operations. This module computes the same layers with one scaled attention
call (the query's scale applied to the scores), the rotation of `fast_modernbert` (ESM's
rotary embedding is ModernBERT's) and PyTorch's fused erf GELU; the embeddings (token
dropout included), the rotary angles and every weight are the model's own. The hidden
states equal transformers' within float rounding (tests/models/test_fast_esm.py). Without
gradients on a CPU the rows run a group at a time (`row_groups`: the element-wise steps in
cache).

Used for inference and for training without dropout: with a dropout drawing, gradient
checkpointing or FSDP-sharded layers the caller runs transformers' forward instead.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mlmkit.models.fast_modernbert import rotate_projections
from mlmkit.models.row_groups import row_groups


def _esm_layer(layer, hidden: torch.Tensor, mask: torch.Tensor | None,
               rotary: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
    """One `EsmLayer` (pre-LN attention, then pre-LN feed-forward, both residual)."""
    attention, projections = layer.attention, layer.attention.self
    batch, length, width = hidden.shape
    heads, head_dim = projections.num_attention_heads, projections.attention_head_size
    normed = attention.LayerNorm(hidden)
    shape = (batch, length, 1, heads, head_dim)
    query = projections.query(normed).view(shape)
    key = projections.key(normed).view(shape)
    value = projections.value(normed).view(batch, length, heads, head_dim)
    if rotary is None:
        query, key = query[:, :, 0], key[:, :, 0]
    else:
        cos, sin = rotary[0][:, :, None], rotary[1][:, :, None]
        (query,) = rotate_projections(query, cos, sin, 1)
        (key,) = rotate_projections(key, cos, sin, 1)
    context = F.scaled_dot_product_attention(
        query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), attn_mask=mask,
        scale=head_dim ** -0.5)
    context = context.transpose(1, 2).reshape(batch, length, width)
    hidden = _residual(attention.output.dense(context), hidden)
    inner = F.gelu(layer.intermediate.dense(layer.LayerNorm(hidden)))
    return _residual(layer.output.dense(inner), hidden)


def _residual(out: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    """out + hidden, in place where the dtypes agree; under bf16 autocast the sum takes
    the residual stream's float32, as transformers' layer does."""
    return out.add_(hidden) if out.dtype == hidden.dtype else out + hidden


def embeddings_and_rotary(base: torch.nn.Module, input_ids: torch.Tensor,
                          attention_mask: torch.Tensor | None):
    """(the embeddings an `EsmModel` gives its first layer, its rotary (cos, sin) or None),
    by the model's own modules."""
    hidden = base.embeddings(input_ids=input_ids, attention_mask=attention_mask)
    if base.rotary_embeddings is None:
        return hidden, None
    positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
    return hidden, base.rotary_embeddings(hidden, positions)


def esm_last_layer_input(base: torch.nn.Module, input_ids: torch.Tensor,
                         attention_mask: torch.Tensor | None):
    """(hidden states [B, L, d] entering `base`'s last layer, the attention mask that layer
    takes (bool [B, 1, 1, L] or None), its keyword inputs ({"position_embeddings": (cos,
    sin) or None})) of an `EsmModel` whose layers draw no dropout; None under gradient
    checkpointing or positions other than rotary or absolute (the caller checks dropout
    and sharding: `sparse_last_layer.sparse_hidden`)."""
    if getattr(base.config, "position_embedding_type", "absolute") not in ("rotary", "absolute") \
            or (base.training and getattr(base.encoder, "gradient_checkpointing", False)):
        return None
    hidden, rotary = embeddings_and_rotary(base, input_ids, attention_mask)
    mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]
    grouped = input_ids.device.type == "cpu" and not torch.is_grad_enabled()
    groups = row_groups(*input_ids.shape) if grouped else [(0, len(hidden))]
    for layer in base.encoder.layer[:-1]:
        if len(groups) == 1:
            hidden = _esm_layer(layer, hidden, mask, rotary)
            continue
        out = torch.empty_like(hidden)
        for start, end in groups:
            out[start:end] = _esm_layer(layer, hidden[start:end],
                                        None if mask is None else mask[start:end], rotary)
        hidden = out
    return hidden, mask, {"position_embeddings": rotary}


"""ESM's encoder up to its last layer with transformers' own arithmetic, bit for bit, in
less memory traffic: the input of the last layer for `full_forward` (a protein's exact
pseudo-log-likelihood).

A PLL sums hundreds of log-probabilities, so it is compared with a one-copy-at-a-time
implementation bit for bit, not within float tolerance (`fast_esm`'s fused operations round
differently). On a CPU the batched copies then spend much of their time outside the matrix
products: transformers' layer writes each element-wise step (the query's scale, the rotary
halves, five GELU steps) to a freshly allocated tensor the size of the batch, which leaves
the caches. This module runs the same operations on the same values in the same order —
the same kernels, so the same bits — but in place and a group of copies at a time
(`row_groups`), so that the intermediate tensors stay in cache; a CPU BLAS gives every row
the bits it gets in any larger product (tests/models/test_exact_esm.py compares the last
layer's input with transformers' by `torch.equal`, for one copy and for many, short and
long).

It applies where the bits are defined by those operations alone: on a CPU (the row
argument is a CPU BLAS's), float32 weights and activations, no autocast, no gradient, no
dropout, SDPA attention without a padding mask (PLL copies of one length); elsewhere it
returns None and the caller runs transformers' forward. Rows of under about a dozen
tokens are the exception the BLAS makes: a one-copy forward of so short a peptide runs its
products on a few rows, which MKL computes with another kernel, and rounds differently
(by up to about 4e-7) from the same rows in a batch, here as in transformers' batches.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from mlmkit.models.fast_esm import embeddings_and_rotary
from mlmkit.models.row_groups import row_groups


def rotated(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """transformers' ESM rotation of one projection, `x.float() * cos + rotate_half(x.float())
    * sin` cast back to x's dtype: the same products and sum in the same dtype, the rotated
    halves written into one buffer instead of a negation and a concatenation."""
    dtype, x = x.dtype, x.float()
    half = x.shape[-1] // 2
    turned = x.new_empty(x.shape, dtype=torch.promote_types(x.dtype, sin.dtype))
    turned[..., :half].copy_(x[..., half:]).neg_()
    turned[..., half:] = x[..., :half]
    return (x * cos).add_(turned.mul_(sin)).to(dtype)


def _gelu_(x: torch.Tensor) -> torch.Tensor:
    """ESM's GELU, `x * 0.5 * (1.0 + erf(x / sqrt(2)))`, in place on `x`: the same steps."""
    inner = x / math.sqrt(2.0)
    inner.erf_().add_(1.0)
    return x.mul_(0.5).mul_(inner)


def _layer(layer, hidden: torch.Tensor, rotary, out: torch.Tensor) -> None:
    """One EsmLayer of transformers (pre-LN attention under SDPA, pre-LN feed-forward, both
    residual) on a group of rows, written into `out`."""
    attention = layer.attention.self
    batch, length, width = hidden.shape
    heads, head_dim = attention.num_attention_heads, attention.attention_head_size
    normed = layer.attention.LayerNorm(hidden)
    shape = (batch, length, heads, head_dim)
    query = attention.query(normed).view(shape).transpose(1, 2)
    key = attention.key(normed).view(shape).transpose(1, 2)
    value = attention.value(normed).view(shape).transpose(1, 2)
    query.mul_(head_dim ** -0.5)
    if rotary is not None:
        cos, sin = rotary[0].unsqueeze(1), rotary[1].unsqueeze(1)
        query, key = rotated(query, cos, sin), rotated(key, cos, sin)
    context = F.scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                             scale=attention.scaling, is_causal=False)
    context = context.transpose(1, 2).contiguous().reshape(batch, length, width)
    attended = layer.attention.output.dense(context).add_(hidden)
    inner = _gelu_(layer.intermediate.dense(layer.LayerNorm(attended)))
    torch.add(layer.output.dense(inner), attended, out=out)


def _applies(base: torch.nn.Module, input_ids: torch.Tensor, attention_mask) -> bool:
    config = base.config
    drawing = base.training and any(  # attention dropout is a float on the attention
        (isinstance(m, torch.nn.Dropout) and m.p > 0)
        or (isinstance(getattr(m, "dropout", None), float) and m.dropout > 0)
        for m in base.modules())
    return (input_ids.device.type == "cpu" and attention_mask is None
            and not torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")
            and base.embeddings.word_embeddings.weight.dtype == torch.float32
            and config._attn_implementation == "sdpa" and not drawing
            and not config.is_decoder and not config.add_cross_attention
            and getattr(config, "position_embedding_type", "absolute") in ("rotary", "absolute"))


def esm_last_layer_input_exact(base: torch.nn.Module, input_ids: torch.Tensor,
                               attention_mask: torch.Tensor | None):
    """(hidden states [B, L, d] entering `base`'s last layer, its attention mask (None), its
    keyword inputs ({"position_embeddings": (cos, sin) or None})) of an `EsmModel`, equal bit
    for bit to those of transformers' forward; None where that is not assured (see the
    module's docstring)."""
    if not _applies(base, input_ids, attention_mask):
        return None
    hidden, rotary = embeddings_and_rotary(base, input_ids, None)
    groups = row_groups(*input_ids.shape)
    for layer in base.encoder.layer[:-1]:
        out = torch.empty_like(hidden)
        for start, end in groups:
            _layer(layer, hidden[start:end], rotary, out[start:end])
        hidden = out
    return hidden, None, {"position_embeddings": rotary}

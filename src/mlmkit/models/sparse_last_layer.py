"""The last transformer layer computed only at the positions whose output is read.

Every layer but the last needs its output at every position (the next layer attends to
all of them). The last one does not: its keys and values come from every position, but
its queries, attention output, feed-forward block and final norm are needed only where
the MLM head reads (one column of a PLL copy, the masked 15–40% of a training block).
This module runs the Hugging Face encoder up to the input of its last layer (a pre-hook
captures that input, with the attention mask and rotary embeddings the model built for
it, and stops the forward), then computes the last layer with queries at the chosen
(row, column) pairs only. The result equals the full forward's hidden states at those
positions within float tolerance (tests/models/test_sparse_last_layer.py, every family).

Families: BERT, RoBERTa, XLM-R, CamemBERT, ELECTRA, DistilBERT, ALBERT, ModernBERT, ESM
(whose layers up to the last run in `fast_esm`'s faster code rather than the model's
forward; under `full_forward`, in `exact_esm`'s, which has the forward's bits).
Others (DeBERTa-v2's relative attention, architectures without an adapter) keep the full
last layer: `sparse_last_layer_supported(model)` says which. `MLMKIT_SPARSE_LAST_LAYER=0`
in the environment runs the full last layer everywhere (the benchmarks' reference rows).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F

from mlmkit.models.exact_esm import esm_last_layer_input_exact, rotated
from mlmkit.models.exact_rows import exact_rows
from mlmkit.models.fast_esm import esm_last_layer_input
from mlmkit.models.fast_modernbert import attention_in_float32, rotate_projections, widened

try:
    from torch.distributed.fsdp import FSDPModule
except ImportError:  # a torch built without distributed
    FSDPModule = None


_FULL_FORWARD = threading.local()


@contextlib.contextmanager
def full_forward():
    """Within it, on this thread, `masked_logits` runs the model's own operations (no
    family's faster layers). A batched forward then gives each row the logits of that
    row's own forward, bit for bit on a CPU; the faster paths differ from it by float32
    rounding (about one unit in the last place of each log-probability), which a sum over
    hundreds of positions (a protein's pseudo-log-likelihood, compared with a
    one-copy-at-a-time implementation) adds up to 1e-5 and more. The last layer is still
    computed only where it is read for a family with an `exact` layer function (ESM, SDPA
    attention) and one read per row: the model's own operations in the model's order on
    fewer rows, the same bits (tests/models/test_sparse_last_layer.py)."""
    previous = getattr(_FULL_FORWARD, "on", False)
    _FULL_FORWARD.on = True
    try:
        yield
    finally:
        _FULL_FORWARD.on = previous


def in_full_forward() -> bool:
    """Whether this thread is inside `full_forward()`."""
    return getattr(_FULL_FORWARD, "on", False)


class _Captured(Exception):
    """Raised by the pre-hook once the last layer's input is captured: stops the forward."""


@dataclass(frozen=True)
class SparseFamily:
    """Where an architecture's last layer is and how to run it at a few positions."""

    base: str
    """Attribute of the masked-LM model holding the base (encoder) model."""
    last_layer: Callable[[torch.nn.Module], tuple[torch.nn.Module, int]]
    """(base model) -> (the last layer module, how many times it runs per forward)."""
    forward: Callable[..., torch.Tensor]
    """(layer, hidden [B, L, d], mask, rows [n], cols [n], inputs) -> hidden [n, d]."""
    final: Callable[[torch.nn.Module, torch.Tensor], torch.Tensor] | None = None
    """(base model, hidden [n, d]) -> what the base model returns (a final norm), if any."""
    prefix: Callable[..., tuple | None] | None = None
    """(base model, input_ids, attention_mask) -> (hidden, mask, inputs) entering the last
    layer, computed by the family's own faster code instead of the model's forward up to a
    hook (ESM: `fast_esm`); it returns None where it does not apply (then the hook)."""
    positions: tuple[str, ...] = ("absolute",)
    """The `position_embedding_type`s the layer function handles."""
    exact: Callable[..., torch.Tensor] | None = None
    """Like `forward`, for one read per row in row order, with the model's own operations
    in the model's order (under `full_forward`): the full layer's bits at the read column."""
    exact_prefix: Callable[..., tuple | None] | None = None
    """Like `prefix`, with the model's own operations in the model's order (under
    `full_forward`): transformers' bits entering the last layer (ESM: `exact_esm`)."""


def _argument(args: tuple, kwargs: dict, index: int, name: str):
    if name in kwargs:
        return kwargs[name]
    return args[index] if len(args) > index else None


def _slots(rows: torch.Tensor, batch: int) -> tuple[torch.Tensor, int]:
    """The rank of each read among the reads of its row, and the most reads of any row."""
    if rows.numel() == 0:
        return rows, 0
    counts = torch.bincount(rows, minlength=batch)
    order = torch.argsort(rows, stable=True)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.empty_like(rows)
    slot[order] = torch.arange(rows.numel(), device=rows.device) - starts[rows[order]]
    return slot, int(counts.max())


def _attend(query, key, value, mask, rows, cols, *, scaling: float, dropout: float):
    """Attention of `query` [n, H, dh] (one per read (row, col)) over its row's `key` and
    `value` [B, H, L, dh] under the model's `mask` ([B|1, h, 1|L, L] bool or additive, or
    None). Reads are laid out [B, m, ...] (m: most reads of a row) so one batched SDPA runs
    them all; the padding slots are computed and dropped. Returns [n, H * dh]."""
    batch, heads, _, head_dim = key.shape
    n = query.shape[0]
    slot, most = _slots(rows, batch)
    if most == 1 and n == batch and torch.equal(rows, torch.arange(batch, device=rows.device)):
        q = query.unsqueeze(2)  # one read per row, in row order (PLL copies): no scatter
        slot = None
    else:
        q = query.new_zeros(batch, most, heads, head_dim)
        q = q.index_put((rows, slot), query).transpose(1, 2)
    if mask is not None:
        mask = mask.expand(batch, -1, -1, -1)
        if mask.shape[-2] != 1:  # a mask per query (ModernBERT's sliding window): its rows
            picked = mask[rows, :, cols, :]  # [n, h, L]
            if slot is None:
                mask = picked.unsqueeze(2)
            else:
                fill = True if mask.dtype == torch.bool else 0.0
                padded = mask.new_full((batch, mask.shape[1], most, mask.shape[-1]), fill)
                padded[rows, :, slot, :] = picked
                mask = padded
    dtype, context = q.dtype, contextlib.nullcontext()
    if attention_in_float32(q):  # a bf16 CPU backward (fast_modernbert)
        q, key, value, mask, context = widened(q, key, value, mask)
    with context:
        out = F.scaled_dot_product_attention(q, key, value, attn_mask=mask, dropout_p=dropout,
                                             scale=scaling)  # [B, H, m, dh]
    out = out.to(dtype).transpose(1, 2)
    out = out[:, 0] if slot is None else out[rows, slot]
    return out.reshape(n, heads * head_dim)


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """[B, L, d] -> [B, H, L, d / H]."""
    b, length, d = x.shape
    return x.view(b, length, heads, d // heads).transpose(1, 2)


def _self_attend(hidden, mask, rows, cols, query, key, value, heads: int, scaling: float,
                 dropout: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(the read rows' hidden states x [n, d], their attention context [n, d]) of a layer
    whose separate `query`, `key` and `value` projections split into `heads` heads."""
    x = hidden[rows, cols]
    context = _attend(query(x).view(len(x), heads, -1), _heads(key(hidden), heads),
                      _heads(value(hidden), heads), mask, rows, cols, scaling=scaling,
                      dropout=dropout)
    return x, context


def _p(dropout: torch.nn.Module | float, training: bool) -> float:
    p = dropout.p if isinstance(dropout, torch.nn.Module) else float(dropout)
    return p if training else 0.0


def _bert_layer(layer, hidden, mask, rows, cols, inputs):
    """BertLayer and its copies (RoBERTa, XLM-R, CamemBERT, ELECTRA)."""
    att = layer.attention.self
    x, context = _self_attend(hidden, mask, rows, cols, att.query, att.key, att.value,
                              att.num_attention_heads, att.scaling,
                              _p(att.dropout, att.training))
    attended = layer.attention.output(context, x)
    return layer.output(layer.intermediate(attended), attended)


def _distilbert_layer(layer, hidden, mask, rows, cols, inputs):
    att = layer.attention
    x, context = _self_attend(hidden, mask, rows, cols, att.q_lin, att.k_lin, att.v_lin,
                              att.n_heads, att.scaling, _p(att.dropout, att.training))
    attended = layer.sa_layer_norm(att.out_lin(context) + x)
    return layer.output_layer_norm(layer.ffn.ff_chunk(attended) + attended)


def _albert_layer(layer, hidden, mask, rows, cols, inputs):
    att = layer.attention
    x, context = _self_attend(hidden, mask, rows, cols, att.query, att.key, att.value,
                              att.num_attention_heads, att.scaling,
                              _p(att.attention_dropout, att.training))
    attended = att.LayerNorm(x + att.output_dropout(att.dense(context)))
    return layer.full_layer_layer_norm(layer.ff_chunk(attended) + attended)


def _modernbert_layer(layer, hidden, mask, rows, cols, inputs):
    att = layer.attn
    cos, sin = inputs["position_embeddings"]  # [B|1, L, dh]
    batch, length, d = hidden.shape
    heads = d // att.head_dim
    normed = layer.attn_norm(hidden)
    x = hidden[rows, cols]
    if type(att.Wqkv) is torch.nn.Linear:  # the query's third of the product at the reads only
        weight, bias = att.Wqkv.weight, att.Wqkv.bias
        key_value = F.linear(normed, weight[d:], None if bias is None else bias[d:])
        query = F.linear(normed[rows, cols], weight[:d], None if bias is None else bias[:d])
    else:  # a wrapped projection (a LoRA adapter): its own forward, its own weights
        qkv = att.Wqkv(normed)
        key_value, query = qkv[..., d:], qkv[rows, cols, :d]
    key_value = key_value.view(batch, length, 2, heads, att.head_dim)
    query = query.view(len(x), 1, heads, att.head_dim)
    at = rows if cos.shape[0] > 1 else torch.zeros_like(rows)
    # rotated in float32 whatever the dtype (transformers' rule); one gradient buffer
    key, value = rotate_projections(key_value, cos[:, :, None], sin[:, :, None], 1)
    (query,) = rotate_projections(query, cos[at, cols][:, None], sin[at, cols][:, None], 1)
    key, value = key.transpose(1, 2), value.transpose(1, 2)
    context = _attend(query, key, value, mask, rows, cols, scaling=att.head_dim ** -0.5,
                      dropout=_p(att.attention_dropout, att.training))
    x = x + att.out_drop(att.Wo(context))
    return x + layer.mlp(layer.mlp_norm(x))


def _esm_layer(layer, hidden, mask, rows, cols, inputs):
    """EsmLayer: pre-LN attention (rotary or absolute positions), pre-LN feed-forward."""
    att = layer.attention.self
    batch, length, d = hidden.shape
    heads, head_dim = att.num_attention_heads, att.attention_head_size
    normed = layer.attention.LayerNorm(hidden)
    key = att.key(normed).view(batch, length, 1, heads, head_dim)
    value = att.value(normed).view(batch, length, heads, head_dim)
    x = hidden[rows, cols]
    query = att.query(normed[rows, cols]).view(len(x), 1, heads, head_dim)
    rotary = inputs.get("position_embeddings")
    if rotary is None:
        key, query = key[:, :, 0], query[:, 0]
    else:
        cos, sin = rotary  # [B|1, L, dh]
        at = rows if cos.shape[0] > 1 else torch.zeros_like(rows)
        (key,) = rotate_projections(key, cos[:, :, None], sin[:, :, None], 1)
        (query,) = rotate_projections(query, cos[at, cols][:, None], sin[at, cols][:, None], 1)
    context = _attend(query, key.transpose(1, 2), value.transpose(1, 2), mask, rows, cols,
                      scaling=head_dim ** -0.5, dropout=_p(att.dropout, att.training))
    return layer.feed_forward_chunk(layer.attention.output(context, x))


EXACT_QUERY_ROWS = 8
"""Copies of a read column's query in the exact path's attention. PyTorch's CPU attention
multiplies a block of queries (32, 64 or 256 by the length) by the keys in one product,
and the BLAS rounds a product of very few rows its own way: on Intel CPUs below 2 rows,
on AMD ones below 4 (MKL). A full forward's blocks are that large but for the last one,
so 8 copies get a query the bits it has there; a column among the last 8 may sit in a
short last block, and is computed in a query of the full length, as the forward does."""


def _exact_attention(query, key, value, mask, cols, length: int) -> torch.Tensor:
    """SDPA of one query per row ([B, H, 1, dh], read at column `cols` of `length`) with
    the bits of the full forward's attention there ([B, H, dh]): `EXACT_QUERY_ROWS` copies
    of the query, or, for the columns a short last block may hold, copies at every
    position (the forward's blocks) read at the column's own."""
    out = query.new_empty(query.shape[0], query.shape[1], query.shape[3])
    near_end = cols >= length - EXACT_QUERY_ROWS
    for chosen, copies in ((~near_end, EXACT_QUERY_ROWS), (near_end, length)):
        if not bool(chosen.any()):
            continue
        repeated = query[chosen].expand(-1, -1, copies, -1).contiguous()
        context = F.scaled_dot_product_attention(
            repeated, key[chosen], value[chosen],
            attn_mask=None if mask is None else mask[chosen], scale=1.0)
        at = cols[chosen] if copies == length else torch.zeros_like(cols[chosen])
        out[chosen] = context[torch.arange(len(at), device=at.device), :, at]
    return out


def _esm_layer_exact(layer, hidden, mask, rows, cols, inputs):
    """EsmLayer under SDPA attention at one column per row: transformers' operations in
    transformers' order (the query scaled before its rotation, the rotation's products and
    sum as `exact_esm.rotated` computes them, SDPA at scale 1, ESM's own GELU), each product
    on at least `EXACT_ROWS` rows and the attention as `_exact_attention` computes it (SDPA
    on a few query rows rounds differently): the full layer's bits at the read columns.
    Returns [B, d]."""
    att = layer.attention.self
    batch, length, _ = hidden.shape
    heads, head_dim = att.num_attention_heads, att.attention_head_size
    normed = layer.attention.LayerNorm(hidden)
    query = exact_rows(att.query, normed[rows, cols])
    query = query.view(batch, 1, heads, head_dim).transpose(1, 2)
    key = att.key(normed).view(batch, length, heads, head_dim).transpose(1, 2)
    value = att.value(normed).view(batch, length, heads, head_dim).transpose(1, 2)
    query = query * head_dim ** -0.5
    rotary = inputs.get("position_embeddings")
    if rotary is not None:
        cos, sin = rotary  # [B|1, L, dh]
        at = rows if cos.shape[0] > 1 else torch.zeros_like(rows)
        query = rotated(query, cos[at, cols][:, None, None], sin[at, cols][:, None, None])
        key = rotated(key, cos[:, None], sin[:, None])
    if mask is not None:
        mask = mask.expand(batch, -1, -1, -1)
        if mask.shape[-2] != 1:
            mask = mask[rows, :, cols].unsqueeze(2)
    context = _exact_attention(query, key, value, mask, cols, length)
    context = context.reshape(batch, heads * head_dim)
    attended = exact_rows(layer.attention.output, context, hidden[rows, cols])
    return exact_rows(layer.feed_forward_chunk, attended)


def _albert_last(base):
    config = base.config
    layers, groups = config.num_hidden_layers, config.num_hidden_groups
    calls = sum(1 for i in range(layers) if int(i / (layers / groups)) == groups - 1)
    return base.encoder.albert_layer_groups[-1].albert_layers[-1], calls


_BERT_LIKE = {"base": None, "last_layer": lambda base: (base.encoder.layer[-1], 1),
              "forward": _bert_layer}

SPARSE_FAMILIES: dict[str, SparseFamily] = {
    "bert": SparseFamily(**{**_BERT_LIKE, "base": "bert"}),
    "roberta": SparseFamily(**{**_BERT_LIKE, "base": "roberta"}),
    "xlm-roberta": SparseFamily(**{**_BERT_LIKE, "base": "roberta"}),
    "camembert": SparseFamily(**{**_BERT_LIKE, "base": "roberta"}),
    "electra": SparseFamily(**{**_BERT_LIKE, "base": "electra"}),
    "distilbert": SparseFamily("distilbert", lambda base: (base.transformer.layer[-1], 1),
                               _distilbert_layer),
    "albert": SparseFamily("albert", _albert_last, _albert_layer),
    "modernbert": SparseFamily("model", lambda base: (base.layers[-1], 1), _modernbert_layer,
                               final=lambda base, h: base.final_norm(h)),
    "esm": SparseFamily("esm", lambda base: (base.encoder.layer[-1], 1), _esm_layer,
                        final=lambda base, h: base.encoder.emb_layer_norm_after(h),
                        prefix=esm_last_layer_input, positions=("absolute", "rotary"),
                        exact=_esm_layer_exact, exact_prefix=esm_last_layer_input_exact),
}


def _family(model: torch.nn.Module) -> SparseFamily | None:
    config = getattr(model, "config", None)
    family = SPARSE_FAMILIES.get(getattr(config, "model_type", None))
    if family is None or getattr(config, "is_decoder", False) \
            or getattr(config, "add_cross_attention", False) \
            or getattr(config, "_attn_implementation", "sdpa") not in ("sdpa", "eager", None):
        return None
    if getattr(config, "position_embedding_type", "absolute") not in (*family.positions, None):
        return None
    return family


def sparse_last_layer_supported(model: torch.nn.Module) -> bool:
    """Whether `masked_logits` computes `model`'s last layer only at the positions read
    (True for BERT, RoBERTa, XLM-R, CamemBERT, ELECTRA, DistilBERT, ALBERT, ModernBERT,
    ESM with SDPA or eager attention); False: the full last layer runs (same results)."""
    return _family(model) is not None


def _dropout_active(layer: torch.nn.Module) -> bool:
    """Whether running `layer` draws random numbers (training with a dropout above 0): then
    the full layer runs (unless the caller gives up the random stream, `sparse_hidden`'s
    `keep_random_stream`), so a run's random stream, hence its losses, stay those of a full
    forward."""
    if not layer.training:
        return False
    for module in layer.modules():
        if isinstance(module, torch.nn.Dropout) and module.p > 0:
            return True
        for name in ("attention_dropout", "dropout"):  # attention dropout held as a float
            p = getattr(module, name, None)
            if isinstance(p, float) and p > 0:
                return True
    return False


def _sharded(layer: torch.nn.Module) -> bool:
    """Whether FSDP2 shards `layer` (its parameters are gathered by its own forward, which
    the sparse computation does not call): then the full layer runs."""
    if FSDPModule is None:  # a torch built without distributed
        return False
    return any(isinstance(m, FSDPModule) for m in layer.modules())


def _root_sharded(model: torch.nn.Module, base: torch.nn.Module) -> bool:
    """Whether FSDP2 wraps the model itself (whose forward gathers the embeddings that a
    family's `prefix` reads directly)."""
    return FSDPModule is not None and (isinstance(model, FSDPModule)
                                       or isinstance(base, FSDPModule))


def sparse_hidden(model: torch.nn.Module, input_ids: torch.Tensor,
                  attention_mask: torch.Tensor | dict | None, rows: torch.Tensor,
                  cols: torch.Tensor, *, keep_random_stream: bool = True,
                  **inputs) -> torch.Tensor | None:
    """The base model's output hidden states [n, d] at (rows[i], cols[i]), computing the
    last layer only there; None when this model cannot (the caller runs the full encoder).
    `inputs` go to the base model's forward with the ids and mask (the position ids of
    unpadded rows, `models.unpadded`). With `keep_random_stream=False` a last layer with
    active dropout runs at the positions read too: its dropout then draws for those rows
    only, the same distribution as the full layer's but not its random stream (for callers
    whose batches differ from a padded forward's anyway, such as packed fine-tuning)."""
    family = _family(model)
    if family is None or rows.numel() == 0 or torch.compiler.is_compiling() \
            or os.environ.get("MLMKIT_SPARSE_LAST_LAYER", "1") == "0":
        return None
    exact = in_full_forward()
    if exact and (family.exact is None or model.config._attn_implementation != "sdpa"
                  or not torch.equal(rows, torch.arange(len(input_ids), device=rows.device))):
        return None  # the model's own forward in full
    base = getattr(model, family.base)
    layer, calls = family.last_layer(base)
    if (keep_random_stream and _dropout_active(layer)) or _sharded(layer):
        return None
    prefix = family.exact_prefix if exact else family.prefix
    if prefix is not None and not inputs and (exact or not _dropout_active(base)) \
            and not _root_sharded(model, base):
        entering = prefix(base, input_ids, attention_mask)
        if entering is not None:
            hidden, mask, inputs = entering
            return _last_layer(family, base, layer, hidden, mask, rows, cols, inputs, exact)
    captured: dict = {}
    seen = [0]
    thread = threading.get_ident()

    def capture(module, args, kwargs):
        if threading.get_ident() != thread:  # another thread's forward of the same model
            return None
        seen[0] += 1
        if seen[0] == calls:
            captured["args"], captured["kwargs"] = args, kwargs
            raise _Captured

    handle = layer.register_forward_pre_hook(capture, with_kwargs=True)
    try:
        base(input_ids=input_ids, attention_mask=attention_mask, **inputs)
    except _Captured:
        pass
    finally:
        handle.remove()
    if not captured:
        return None
    args, kwargs = captured["args"], captured["kwargs"]
    hidden = _argument(args, kwargs, 0, "hidden_states")
    mask = _argument(args, kwargs, 1, "attention_mask")
    return _last_layer(family, base, layer, hidden, mask, rows, cols, kwargs, exact)


def _last_layer(family: SparseFamily, base, layer, hidden, mask, rows, cols, inputs,
                exact: bool) -> torch.Tensor:
    """The last layer at the reads from its input, then the base model's final norm; with
    `exact`, the model's own operations (the norm's product padded to `EXACT_ROWS`)."""
    if exact:
        out = family.exact(layer, hidden, mask, rows, cols, inputs)
        return out if family.final is None else exact_rows(partial(family.final, base), out)
    out = family.forward(layer, hidden, mask, rows, cols, inputs)
    return out if family.final is None else family.final(base, out)

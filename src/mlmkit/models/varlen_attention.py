"""Variable-length attention: the documents of a packed batch as separate sequences of one
flat token stream, through PyTorch's own FlashAttention varlen kernel
(`torch.nn.attention.varlen.varlen_attn`), so that a row of documents costs Σ nᵢ² instead
of L² and no L×L mask is built.

transformers picks each layer's attention function by name (`config._attn_implementation`);
this module registers one, `VARLEN_ATTENTION`. It reads the document boundaries from the
keyword arguments transformers hands to every attention call (`cu_seq_lens_q` and
`max_length_q`, the names of its own FlashAttention path), and runs SDPA for any other batch
(a padded one: the run's held-out evaluation and pseudo-perplexity), so a model set to it
stays usable everywhere.

The kernel exists on CUDA only (sm80 or newer), takes bf16/fp16 and has no dropout:
`varlen_usable` says whether a run can use it, and elsewhere unpadded attention stays on
SDPA with a document mask (`models.unpadded`). The layout, the keyword plumbing through
every family and the SDPA fallback run on the CPU too (tests swap in a reference kernel).
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from mlmkit.errors import InvalidArgument

try:  # a recent torch (2.13 has it)
    from torch.nn.attention.varlen import varlen_attn
except ImportError:  # an older torch: no varlen kernel
    varlen_attn = None

VARLEN_ATTENTION = "mlmkit_varlen"
HALF_DTYPES = (torch.bfloat16, torch.float16)
ATTENTION_DROPOUT_FIELDS = ("attention_dropout", "attention_probs_dropout_prob")


def document_layout(documents: torch.Tensor) -> dict:
    """The encoder's keyword arguments that give the kernel a packed batch's documents:
    `cu_seq_lens` (int32 [n + 1], where each sequence starts in the flat stream of B×L
    tokens, then B×L) and the longest sequence (bounded by the row length L, so no value
    is read back to the host and a compiled layer sees one constant). Each document of
    each row is a sequence; each padding token (document 0) is one of its own, attending
    only itself as in `models.unpadded.document_mask`."""
    flat = documents.reshape(-1)
    index = torch.arange(flat.numel(), device=flat.device)
    start = (index % documents.shape[1] == 0) | (flat == 0)
    start[1:] |= flat[1:] != flat[:-1]
    end = torch.tensor([flat.numel()], device=flat.device)
    cu = torch.cat([index[start], end]).to(torch.int32)
    batch, length = documents.shape
    # transformers hands a 4-D mask to the layers as it is (it builds none); this one is
    # never read: the boundaries above are the mask
    unused_mask = torch.ones((batch, 1, 1, 1), dtype=torch.bool, device=flat.device)
    return {"attention_mask": unused_mask, "cu_seq_lens_q": cu, "cu_seq_lens_k": cu,
            "max_length_q": int(length), "max_length_k": int(length)}


def _kernel(query, key, value, cu_seq_lens, max_length, scale, window_size, enable_gqa):
    """PyTorch's varlen kernel on [T, H, D] tensors, in half precision (its only kind: a
    float32 input, e.g. queries rotated in float32 under autocast, is cast to bf16)."""
    dtype = query.dtype
    if dtype not in HALF_DTYPES:
        query, key, value = (x.to(torch.bfloat16) for x in (query, key, value))
    out = varlen_attn(query, key, value, cu_seq_lens, cu_seq_lens, max_length, max_length,
                      scale=scale, window_size=window_size, enable_gqa=enable_gqa)
    return out.to(dtype)


def varlen_attention_forward(module, query, key, value, attention_mask, dropout: float = 0.0,
                             scaling: float | None = None, sliding_window: int | None = None,
                             cu_seq_lens_q: torch.Tensor | None = None,
                             max_length_q: int | None = None, **kwargs):
    """transformers' attention-function contract: query [B, H, L, D], key/value
    [B, Hkv, L, D] -> (output [B, L, H, D], None). `sliding_window` is transformers'
    FlashAttention convention (ModernBERT's local layers: |i - j| < sliding_window)."""
    if cu_seq_lens_q is None:  # an ordinary batch: SDPA with its mask
        return sdpa_attention_forward(module, query, key, value, attention_mask,
                                      dropout=dropout, scaling=scaling, **kwargs)
    if dropout:
        raise InvalidArgument(f"varlen attention has no attention dropout (got {dropout}): "
                              "train with --dropout 0 or without varlen attention")
    batch, heads, length, dim = query.shape

    def flat(x):  # [B, H, L, D] -> [B·L, H, D]: the rows as one stream of tokens
        return x.transpose(1, 2).reshape(batch * length, x.shape[1], dim)

    window = (-1, -1) if sliding_window is None else (sliding_window - 1, sliding_window - 1)
    out = _kernel(flat(query), flat(key), flat(value), cu_seq_lens_q, max_length_q,
                  scaling, window, key.shape[1] != heads)
    return out.view(batch, length, heads, dim), None


def varlen_available() -> bool:
    """Whether this torch has the varlen kernel and a CUDA device to run it."""
    return varlen_attn is not None and torch.cuda.is_available()


def attention_dropout(config) -> float:
    """The attention-probability dropout a model config trains with (0 when it has none)."""
    return max((float(getattr(config, name, 0.0) or 0.0) for name in ATTENTION_DROPOUT_FIELDS),
               default=0.0)


def varlen_usable(model: torch.nn.Module, device, precision: str) -> bool:
    """Whether unpadded training of `model` on `device` at `precision` can run the varlen
    kernel: a CUDA device of compute capability 8.0 or newer, this torch's kernel, bf16,
    no attention dropout and a head width FlashAttention takes (a multiple of 8, ≤ 256)."""
    device = torch.device(device)
    if device.type != "cuda" or not varlen_available() or precision != "bf16":
        return False
    config = model.config
    dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return (torch.cuda.get_device_capability(device) >= (8, 0)
            and attention_dropout(config) == 0.0 and dim % 8 == 0 and dim <= 256)


def use_varlen_attention(model: torch.nn.Module) -> None:
    """Set `model`'s attention to the varlen function (registered with transformers on
    first use). Unpadded batches then run the kernel; padded ones, SDPA."""
    AttentionInterface.register(VARLEN_ATTENTION, varlen_attention_forward)
    AttentionMaskInterface.register(VARLEN_ATTENTION, sdpa_mask)  # padded batches
    model.set_attn_implementation(VARLEN_ATTENTION)


def uses_varlen(model: torch.nn.Module) -> bool:
    return getattr(model.config, "_attn_implementation", None) == VARLEN_ATTENTION

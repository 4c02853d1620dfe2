"""Unpadded (packed, padding-free) attention: documents packed into rows with no pad tokens,
each token attending only to its own document, with positions restarting per document.

What transformers 5.x offers: "padding-free" training (`DataCollatorWithFlattening`,
`position_ids` restarting per sequence, `cu_seq_lens_*` kwargs) reaches a variable-length
kernel only through the FlashAttention package (`flash_attention_2/3`, CUDA); mlmkit
registers its own attention function over PyTorch's varlen kernel instead
(`models.varlen_attention`). There the attention of a packed row really costs Σ nᵢ² instead
of L². ModernBERT's own unpadding path (its `_unpad_modernbert_input`) went with the 5.x
attention refactor. With `sdpa`
or `eager` attention (every CPU), a 4-D mask passed as the attention mask is used as it
is, so the same isolation is exact but the attention still computes the whole L×L block:
on a CPU this removes the *padding* (no token is wasted on pad ids, unlike one document
per padded row) and the *cross-document attention* (each document is encoded as if
alone), not the masked-out products.

The document of each token travels as an "indexed" attention mask [B, L]: 1, 2, ... the
document's number in its row, 0 on padding (the convention FlashAttention packers use).
Supported: the RoPE families whose transformers classes take a 4-D mask and position ids
(ModernBERT and its Ettin/mmBERT presets, with their local-attention window kept within
the document; EuroBERT and NeoBERT's shape), and the absolute-position families of BERT's
shape (BERT, RoBERTa, XLM-R, ELECTRA): their learned positions restart at each document
(RoBERTa's after the padding index, as a document alone gets them) and every token is of
type 0, so each document is embedded as if alone.

Three kernels, chosen by the model's attention implementation:
- `sdpa`/`eager` (the default, every device): the 4-D document mask above.
- `flex_attention` (`--flex-attention`): the same pairs as a FlexAttention block mask:
  blocks of 128×128 that hold no pair of one document are skipped, so a packed row costs
  about Σ nᵢ² on a GPU. transformers compiles FlexAttention on first use (about half a
  minute on a CPU), and on a CPU FlexAttention has a forward pass only (no backward): there
  it serves evaluation and tests.
- `models.varlen_attention` (picked by `pretrain --unpadded` on a CUDA device where this
  torch has the varlen kernel, at bf16 without attention dropout): PyTorch's FlashAttention
  varlen kernel over the documents as one flat stream; no mask at all.
"""

from __future__ import annotations

import torch

from mlmkit.errors import InvalidArgument
from mlmkit.models.adapters import adapter_for
from mlmkit.models.cross_entropy import cross_entropy_top1
from mlmkit.models.sparse_last_layer import sparse_hidden
from mlmkit.models.varlen_attention import document_layout, uses_varlen

try:  # torch >= 2.5
    from torch.nn.attention.flex_attention import create_block_mask
except ImportError:  # an older torch: no FlexAttention
    create_block_mask = None

# model type -> the attribute holding its encoder (the adapters' split)
ROTARY_MODEL_TYPES = {"modernbert": "model", "eurobert": "model"}
ABSOLUTE_MODEL_TYPES = {"bert": "bert", "roberta": "roberta", "xlm-roberta": "roberta",
                        "electra": "electra"}
UNPADDED_MODEL_TYPES = (*ROTARY_MODEL_TYPES, *ABSOLUTE_MODEL_TYPES)
ROTARY_FAMILIES = ("modernbert", "ettin", "mmbert", "eurobert", "neobert")
UNPADDED_FAMILIES = (*ROTARY_FAMILIES, "bert", "roberta", "xlm-roberta", "electra")
# model types whose learned positions start after the padding index
POSITIONS_AFTER_PADDING = ("roberta", "xlm-roberta")


def flex_attention_available() -> bool:
    """Whether this torch has FlexAttention (torch 2.5 or newer)."""
    return create_block_mask is not None


def check_unpadded_family(family: str, what: str = "--model") -> None:
    """A one-line error for a family without unpadded attention."""
    if family not in UNPADDED_FAMILIES:
        raise InvalidArgument(f"--unpadded: {what} family {family!r} has no unpadded "
                              f"attention in mlmkit: use one of "
                              f"{', '.join(UNPADDED_FAMILIES)}, or drop --unpadded")


def check_unpadded_model(model: torch.nn.Module) -> None:
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in UNPADDED_MODEL_TYPES:
        raise InvalidArgument(f"--unpadded: a {model_type!r} model has no unpadded attention "
                              f"in mlmkit: use a model of type {' or '.join(UNPADDED_MODEL_TYPES)}"
                              ", or drop --unpadded")


def document_positions(documents: torch.Tensor) -> torch.Tensor:
    """Position ids [B, L] restarting at 0 where the document number changes."""
    length = documents.shape[1]
    index = torch.arange(length, device=documents.device).expand_as(documents)
    change = torch.ones_like(documents, dtype=torch.bool)
    change[:, 1:] = documents[:, 1:] != documents[:, :-1]
    start = torch.where(change, index, torch.zeros_like(index)).cummax(dim=1).values
    return index - start


def document_mask(documents: torch.Tensor, window: int | None = None) -> torch.Tensor:
    """Bool [B, 1, L, L]: query i may attend key j (same document; within `window` when
    given). A padding token attends only itself (no row is empty)."""
    same = documents[:, :, None] == documents[:, None, :]
    same &= (documents > 0)[:, :, None]
    length = documents.shape[1]
    index = torch.arange(length, device=documents.device)
    if window is not None:
        same &= (index[:, None] - index[None, :]).abs() <= window
    same |= torch.eye(length, dtype=torch.bool, device=documents.device)
    return same[:, None]


def document_block_mask(documents: torch.Tensor, window: int | None = None):
    """The FlexAttention `BlockMask` of `document_mask`: the same pairs, as a function of
    (row, head, query, key) evaluated block by block."""
    batch, length = documents.shape

    def same_document(b, h, q, k):
        allowed = (documents[b, q] == documents[b, k]) & (documents[b, q] > 0) | (q == k)
        if window is not None:
            allowed = allowed & ((q - k).abs() <= window)
        return allowed

    return create_block_mask(same_document, batch, None, length, length,
                             device=documents.device)


def unpadded_kernel(model: torch.nn.Module) -> str:
    """Which kernel `unpadded_hidden` runs for `model`, in words (a run's summary says it)."""
    if uses_varlen(model):
        return "varlen FlashAttention (each document a sequence)"
    if _uses_flex(model):
        return "FlexAttention with a document block mask"
    implementation = getattr(model.config, "_attn_implementation", None) or "sdpa"
    return f"{implementation} with a document mask"


def _uses_flex(model) -> bool:
    return getattr(model.config, "_attn_implementation", None) == "flex_attention"


def _attention_mask(documents: torch.Tensor, model, dtype: torch.dtype,
                    window: int | None = None):
    """The document mask in the form the model's attention implementation reads."""
    if _uses_flex(model):
        return document_block_mask(documents, window)
    return _as_attention_mask(document_mask(documents, window), model, dtype)


def _as_attention_mask(mask: torch.Tensor, model, dtype: torch.dtype) -> torch.Tensor:
    """The mask as the model's attention implementation adds it: sdpa takes bool; eager
    adds it to the scores (0 where allowed, the dtype's minimum elsewhere)."""
    if getattr(model.config, "_attn_implementation", "sdpa") == "sdpa":
        return mask
    additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return additive.masked_fill_(~mask, torch.finfo(dtype).min)


def _model_inputs(model, input_ids: torch.Tensor, documents: torch.Tensor,
                  token_type_ids: torch.Tensor | None = None) -> dict:
    """The encoder's inputs besides the mask: positions restarting per document (absolute
    ones where the family's start, RoBERTa's after the padding index), and the token types
    (`token_type_ids` packed as the ids are, else 0: each document its own first segment)."""
    positions = document_positions(documents)
    model_type = model.config.model_type
    if model_type in ROTARY_MODEL_TYPES:
        return {"input_ids": input_ids, "position_ids": positions}
    if model_type in POSITIONS_AFTER_PADDING:
        positions = positions + model.config.pad_token_id + 1
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)
    return {"input_ids": input_ids, "position_ids": positions,
            "token_type_ids": token_type_ids}


def _encoder(model: torch.nn.Module) -> torch.nn.Module:
    return getattr(model, {**ROTARY_MODEL_TYPES, **ABSOLUTE_MODEL_TYPES}[model.config.model_type])


def _masks(model: torch.nn.Module, documents: torch.Tensor):
    """The document mask as the encoder takes it: ModernBERT's per layer type (its local
    layers' window kept within the document), one mask elsewhere."""
    dtype = _encoder(model).get_input_embeddings().weight.dtype
    if model.config.model_type != "modernbert":
        return _attention_mask(documents, model, dtype)
    window = getattr(model.config, "sliding_window", None)
    masks = {"full_attention": _attention_mask(documents, model, dtype)}
    if "sliding_attention" in set(model.config.layer_types):
        masks["sliding_attention"] = _attention_mask(documents, model, dtype, window)
    return masks


def unpadded_hidden(model: torch.nn.Module, input_ids: torch.Tensor,
                    documents: torch.Tensor,
                    token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
    """Hidden states [B, L, d] of a masked LM's encoder with attention kept within each
    document of `documents` (the indexed mask) and positions restarting per document
    (token types: `token_type_ids`, else 0)."""
    check_unpadded_model(model)
    encoder = _encoder(model)
    inputs = _model_inputs(model, input_ids, documents, token_type_ids)
    if uses_varlen(model):  # no mask: the documents travel as sequence boundaries
        return encoder(**inputs, **document_layout(documents)).last_hidden_state
    return encoder(**inputs, attention_mask=_masks(model, documents)).last_hidden_state


def unpadded_hidden_at(model: torch.nn.Module, input_ids: torch.Tensor,
                       documents: torch.Tensor, at: torch.Tensor,
                       token_type_ids: torch.Tensor | None = None, *,
                       keep_random_stream: bool = True) -> torch.Tensor:
    """`unpadded_hidden` at the flat positions `at` [n] (row × width + column): [n, d].
    Where the family allows it (`models.sparse_last_layer`) the last layer runs only at
    those positions (a classifier reading each document's first token needs one query per
    document there, not one per token); the values equal the full encoder's rows within
    float rounding, and so do the gradients. With `keep_random_stream=False` the last layer
    runs there even when it draws dropout (`sparse_hidden`): equal in distribution then."""
    check_unpadded_model(model)
    if uses_varlen(model) or _uses_flex(model):
        hidden = unpadded_hidden(model, input_ids, documents, token_type_ids)
    else:
        inputs = _model_inputs(model, input_ids, documents, token_type_ids)
        masks = _masks(model, documents)
        width = input_ids.shape[1]
        out = sparse_hidden(model, inputs.pop("input_ids"), masks, at // width, at % width,
                            keep_random_stream=keep_random_stream, **inputs)
        if out is not None:
            return out
        hidden = _encoder(model)(input_ids=input_ids, attention_mask=masks,
                                 **inputs).last_hidden_state
    return hidden.reshape(-1, hidden.shape[-1]).index_select(0, at)


def unpadded_logits(model: torch.nn.Module, input_ids: torch.Tensor, documents: torch.Tensor,
                    positions: torch.Tensor) -> torch.Tensor:
    """MLM logits [n, V] at the bool `positions` [B, L] (row-major), unpadded: the encoder
    runs in full (no sparse last layer), the head only at `positions`."""
    hidden = unpadded_hidden(model, input_ids, documents)
    return adapter_for(model).head(model, hidden[positions])


def unpadded_mlm_loss(model, input_ids, attention_mask, mask, labels, label_smoothing: float):
    """`objectives.mlm.sparse_mlm_loss` with unpadded attention: `attention_mask` is the
    indexed mask (document number per token, 0 on padding; `train.data.prepare_rows`)."""
    logits = unpadded_logits(model, input_ids, attention_mask, mask)  # float32 loss of any dtype
    targets = labels[mask]
    per_token, top1 = cross_entropy_top1(logits, targets, label_smoothing)
    return per_token.sum(), (top1 == targets).sum(), targets, per_token

"""ESM's encoder with transformers' arithmetic: the last layer's input equals transformers'
bit for bit (`torch.equal`), whatever the number of copies, the length or the positions;
where the bits are not assured it steps aside; and batched PLL copies through it have the
logits of each copy alone, bit for bit."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import transformers
from transformers.models.esm.modeling_esm import apply_rotary_pos_emb

from mlmkit.models import masked_logits
from mlmkit.models import sparse_last_layer as sparse
from mlmkit.models.exact_esm import esm_last_layer_input_exact, rotated
from mlmkit.models.row_groups import row_groups
from mlmkit.protein import protein_tokenizer


def _esm(positions: str, hidden: int = 64, heads: int = 4, layers: int = 3):
    tokenizer = protein_tokenizer()
    config = transformers.EsmConfig(
        vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
        mask_token_id=tokenizer.mask_token_id, hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=heads, intermediate_size=4 * hidden, max_position_embeddings=400,
        position_embedding_type=positions, token_dropout=True,
        emb_layer_norm_before=positions == "absolute", hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    return transformers.EsmForMaskedLM(config).eval(), tokenizer


def _copies(tokenizer, length: int, count: int) -> torch.Tensor:
    """`count` PLL copies of one random protein of `length` tokens, masked in turn."""
    generator = torch.Generator().manual_seed(length)
    sequence = torch.randint(4, 24, (length,), generator=generator)
    sequence[0], sequence[-1] = tokenizer.cls_token_id, tokenizer.eos_token_id
    ids = sequence.repeat(count, 1)
    ids[torch.arange(count), 1 + torch.arange(count) % (length - 2)] = tokenizer.mask_token_id
    return ids


@pytest.mark.parametrize("positions", ["rotary", "absolute"])
@pytest.mark.parametrize(("length", "count"), [(30, 1), (30, 70), (265, 9), (300, 1)])
def test_last_layer_input_is_transformers_bit_for_bit(positions, length, count):
    model, tokenizer = _esm(positions)
    ids = _copies(tokenizer, length, count)
    with torch.inference_mode():
        want = model.esm(input_ids=ids, output_hidden_states=True).hidden_states[-2]
        hidden, mask, inputs = esm_last_layer_input_exact(model.esm, ids, None)
    assert torch.equal(hidden, want)
    assert mask is None
    assert (inputs["position_embeddings"] is None) == (positions == "absolute")


def test_steps_aside_where_the_bits_are_not_assured():
    model, tokenizer = _esm("rotary")
    ids = _copies(tokenizer, 30, 4)
    with torch.inference_mode():
        assert esm_last_layer_input_exact(model.esm, ids, torch.ones_like(ids)) is None
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert esm_last_layer_input_exact(model.esm, ids, None) is None
    assert esm_last_layer_input_exact(model.esm, ids, None) is None  # gradients on
    model.train()
    attention = model.esm.encoder.layer[1].attention.self
    attention.dropout = 0.1  # a float on the attention, not a module
    with torch.inference_mode():
        assert esm_last_layer_input_exact(model.esm, ids, None) is None
    attention.dropout = 0.0
    with torch.inference_mode():  # training, but nothing draws
        assert esm_last_layer_input_exact(model.esm, ids, None) is not None
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.1
    with torch.inference_mode():
        assert esm_last_layer_input_exact(model.esm, ids, None) is None
    model.eval()
    model.to(torch.bfloat16)
    with torch.inference_mode():
        assert esm_last_layer_input_exact(model.esm, ids, None) is None


@pytest.mark.parametrize("positions", ["rotary", "absolute"])
def test_full_forward_pll_copies_are_each_copy_alone_bit_for_bit(positions, monkeypatch):
    """Under `full_forward()`, PLL copies (one read per row, in row order) run through this
    encoder, in several groups, then ESM's last layer only at the read column with
    transformers' operations: each copy's logits are those of its own forward alone, bit for
    bit (a sum of hundreds of them is a protein's PLL). With padding, transformers' forward
    runs up to the last layer, the same bits."""
    model, tokenizer = _esm(positions, hidden=48, heads=3)
    prefixes, lasts = [], []
    family = sparse.SPARSE_FAMILIES["esm"]
    monkeypatch.setitem(sparse.SPARSE_FAMILIES, "esm", replace(
        family, exact=lambda *a: lasts.append(1) or family.exact(*a),
        exact_prefix=lambda *a: prefixes.append(a[1].shape) or family.exact_prefix(*a)))
    ids = _copies(tokenizer, 120, 40)
    pairs = torch.stack([torch.arange(40), 1 + torch.arange(40)], 1)
    with torch.inference_mode():
        with sparse.full_forward():
            got = masked_logits(model, ids, None, pairs)
        for row, column in pairs.tolist():
            alone = model(input_ids=ids[row:row + 1]).logits[0, column]
            assert torch.equal(got[row], alone)
        padded = _copies(tokenizer, 30, 3)
        mask = torch.ones_like(padded)
        padded[1, 20:], mask[1, 20:] = tokenizer.pad_token_id, 0
        with sparse.full_forward():
            got = masked_logits(model, padded, mask, pairs[:3])
        full = model(input_ids=padded, attention_mask=mask).logits[pairs[:3, 0], pairs[:3, 1]]
        assert torch.equal(got, full)
    assert len(row_groups(*ids.shape)) > 1
    assert lasts == [1, 1] and len(prefixes) == 2


@pytest.mark.parametrize("length", [33, 35, 66, 67, 195])
def test_columns_in_a_short_last_block_of_queries_keep_their_bits(length):
    """PyTorch's CPU attention splits the queries into blocks of 32 (64 from 192 queries);
    at these lengths the last block holds 1 to 3 of them, whose products a BLAS may round
    its own way: PLL copies read there still get each copy's bits."""
    model, tokenizer = _esm("rotary", hidden=48, heads=3, layers=2)
    count = length - 2
    ids = _copies(tokenizer, length, count)
    pairs = torch.stack([torch.arange(count), 1 + torch.arange(count)], 1)
    with torch.inference_mode():
        with sparse.full_forward():
            got = masked_logits(model, ids, None, pairs)
        for row, column in pairs.tolist():
            alone = model(input_ids=ids[row:row + 1]).logits[0, column]
            assert torch.equal(got[row], alone), (row, column)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("angles", [torch.float32, torch.float64])
def test_rotated_is_transformers_rotation_bit_for_bit(dtype, angles):
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(3, 4, 20, 16, generator=generator).to(dtype)
    cos = torch.randn(1, 1, 20, 16, generator=generator, dtype=angles)
    sin = torch.randn(1, 1, 20, 16, generator=generator, dtype=angles)
    want, _ = apply_rotary_pos_emb(x, x, cos[0], sin[0], unsqueeze_dim=1)
    got = rotated(x, cos, sin)
    assert got.dtype == want.dtype == dtype
    assert torch.equal(got, want)

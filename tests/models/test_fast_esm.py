"""ESM's fast encoder: the last layer's input equals transformers' (rotary and absolute
positions, padding, token dropout), the primitive through it equals the full logits, and it
steps aside where it must (gradient checkpointing, dropout drawing)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import transformers

from mlmkit.models import masked_logits
from mlmkit.models import sparse_last_layer as sparse
from mlmkit.models.exact_rows import EXACT_ROWS
from mlmkit.models.fast_esm import esm_last_layer_input
from mlmkit.models.row_groups import GROUP_TOKENS, row_groups
from mlmkit.protein import protein_tokenizer


def _esm(positions: str, seed: int = 0):
    """A tiny random ESM: ESM-2's shape (rotary) or ESM-1b/1v's (absolute, a layer norm
    on the embeddings)."""
    tokenizer = protein_tokenizer()
    config = transformers.EsmConfig(
        vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
        mask_token_id=tokenizer.mask_token_id, hidden_size=32, num_hidden_layers=3,
        num_attention_heads=4, intermediate_size=64, max_position_embeddings=40,
        position_embedding_type=positions, token_dropout=True,
        emb_layer_norm_before=positions == "absolute", hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)
    torch.manual_seed(seed)
    return transformers.EsmForMaskedLM(config).eval(), tokenizer


def _batch(tokenizer, lengths=(12, 7, 12)):
    generator = torch.Generator().manual_seed(3)
    ids = torch.randint(4, 24, (len(lengths), max(lengths)), generator=generator)
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, 0], ids[row, n - 1] = tokenizer.cls_token_id, tokenizer.eos_token_id
        ids[row, n:] = tokenizer.pad_token_id
        mask[row, :n] = 1
    ids[0, 3] = ids[2, 5] = ids[2, 6] = tokenizer.mask_token_id  # token dropout rescales
    return ids, mask


@pytest.mark.parametrize("positions", ["rotary", "absolute"])
def test_last_layer_input_equals_transformers(positions):
    model, tokenizer = _esm(positions)
    ids, mask = _batch(tokenizer)
    with torch.inference_mode():
        want = model.esm(input_ids=ids, attention_mask=mask,
                         output_hidden_states=True).hidden_states[-2]
        hidden, layer_mask, inputs = esm_last_layer_input(model.esm, ids, mask)
        real = mask.bool()
        torch.testing.assert_close(hidden[real], want[real], atol=2e-5, rtol=1e-4)
        assert layer_mask.shape == (3, 1, 1, 12)
        assert (inputs["position_embeddings"] is None) == (positions == "absolute")
        pairs = torch.tensor([[0, 3], [1, 6], [2, 5], [2, 0]])
        full = model(input_ids=ids, attention_mask=mask).logits[pairs[:, 0], pairs[:, 1]]
        torch.testing.assert_close(masked_logits(model, ids, mask, pairs), full,
                                   atol=2e-5, rtol=1e-4)


def test_the_hook_path_equals_too(monkeypatch):
    """Where the fast encoder steps aside, the last layer still runs sparse on the input
    captured from transformers' forward (its own mask and rotary angles)."""
    model, tokenizer = _esm("rotary")
    monkeypatch.setitem(sparse.SPARSE_FAMILIES, "esm",
                        replace(sparse.SPARSE_FAMILIES["esm"], prefix=lambda *a: None))
    ids, mask = _batch(tokenizer)
    pairs = torch.tensor([[0, 3], [1, 6], [2, 11]])
    with torch.inference_mode():
        full = model(input_ids=ids, attention_mask=mask).logits[pairs[:, 0], pairs[:, 1]]
        torch.testing.assert_close(masked_logits(model, ids, mask, pairs), full,
                                   atol=2e-5, rtol=1e-4)


def test_steps_aside_under_checkpointing_and_dropout(monkeypatch):
    model, tokenizer = _esm("rotary")
    ids, mask = _batch(tokenizer)
    model.train()
    model.activation_checkpointing_enable()
    assert esm_last_layer_input(model.esm, ids, mask) is None
    model.activation_checkpointing_disable()
    assert esm_last_layer_input(model.esm, ids, mask) is not None  # training, no dropout
    calls = []
    family = sparse.SPARSE_FAMILIES["esm"]
    monkeypatch.setitem(sparse.SPARSE_FAMILIES, "esm", replace(
        family, prefix=lambda *a: calls.append(1) or family.prefix(*a)))
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.1
    masked_logits(model, ids, mask, torch.tensor([[0, 3]]))
    assert calls == []  # dropout draws: transformers' forward, the same random stream
    model.eval()
    masked_logits(model, ids, mask, torch.tensor([[0, 3]]))
    assert calls == [1]


def test_bf16_autocast_keeps_a_float32_residual_stream():
    model, tokenizer = _esm("rotary")
    ids, mask = _batch(tokenizer)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        hidden, _, _ = esm_last_layer_input(model.esm, ids, mask)
        want = model.esm(input_ids=ids, attention_mask=mask,
                         output_hidden_states=True).hidden_states[-2]
    assert hidden.dtype == want.dtype == torch.float32
    real = mask.bool()
    torch.testing.assert_close(hidden[real], want[real], atol=0.05, rtol=0.05)


def test_full_forward_runs_the_models_own_layers(monkeypatch):
    """`full_forward()`: neither the sparse last layer nor the fast layers, on this thread
    and only within it."""
    model, tokenizer = _esm("rotary")
    calls = []
    family = sparse.SPARSE_FAMILIES["esm"]
    monkeypatch.setitem(sparse.SPARSE_FAMILIES, "esm", replace(
        family, forward=lambda *a: calls.append(1) or family.forward(*a)))
    ids, mask = _batch(tokenizer)
    pairs = torch.tensor([[0, 3], [2, 5]])
    with torch.inference_mode():
        full = model(input_ids=ids, attention_mask=mask).logits[pairs[:, 0], pairs[:, 1]]
        with sparse.full_forward():
            torch.testing.assert_close(masked_logits(model, ids, mask, pairs), full)
        assert calls == []
        masked_logits(model, ids, mask, pairs)
        assert calls == [1]


def test_rows_run_in_groups_without_gradients_with_the_same_result():
    """Without gradients the rows run a group at a time (`row_groups`); each row's hidden
    states are those of the whole batch at once (as with gradients), padding masks sliced
    along with the rows."""
    model, tokenizer = _esm("rotary")
    ids, mask = _batch(tokenizer, lengths=(12, 7, 12) * 80)
    assert len(row_groups(*ids.shape)) > 1
    whole, _, _ = esm_last_layer_input(model.esm, ids, mask)
    with torch.no_grad():
        grouped, _, _ = esm_last_layer_input(model.esm, ids, mask)
    assert torch.equal(grouped, whole.detach())


def test_row_groups_cover_the_batch_in_groups_of_enough_tokens():
    for batch, length in [(1, 5), (3, 1026), (70, 30), (200, 265), (5, 2)]:
        groups = row_groups(batch, length)
        assert groups[0][0] == 0 and groups[-1][1] == batch
        assert all(a[1] == b[0] for a, b in zip(groups, groups[1:], strict=False))
        sizes = [end - start for start, end in groups]
        assert max(sizes) - min(sizes) <= 1
        assert len(groups) == 1 or min(sizes) * length >= max(EXACT_ROWS, GROUP_TOKENS - length)

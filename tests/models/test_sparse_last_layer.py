"""The sparse last layer: the primitive's logits equal the full forward's on every family."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from mlmkit.models import masked_logits
from mlmkit.models.sparse_last_layer import sparse_last_layer_supported
from tests.conftest import FAMILY_TOKENIZER

FAMILIES = sorted(FAMILY_TOKENIZER)
# model types whose last layer runs sparse (Ettin and mmBERT are ModernBERT models)
SPARSE = {"bert", "roberta", "xlm-roberta", "distilbert", "albert", "electra", "modernbert",
          "esm"}


def _batch(vocab: int, pad: int, lengths=(9, 6, 9), seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.randint(5, vocab, (len(lengths), width), generator=generator)
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
        ids[row, n:] = pad
    return ids, mask


def _full(model, ids, mask):
    return model(input_ids=ids, attention_mask=mask).logits


@pytest.fixture(autouse=True)
def _counted_sparse(monkeypatch):
    """Counts the sparse layer's runs, so a test can say it ran (not the full fallback)."""
    from mlmkit.models import sparse_last_layer as module

    runs = []
    for name, family in list(module.SPARSE_FAMILIES.items()):
        def forward(*args, _inner=family.forward, **kwargs):
            runs.append(1)
            return _inner(*args, **kwargs)

        monkeypatch.setitem(module.SPARSE_FAMILIES, name, replace(family, forward=forward))
    return runs


@pytest.mark.parametrize("family", FAMILIES)
def test_sparse_equals_full_forward(tiny_mlm, family, _counted_sparse):
    mlm = tiny_mlm(family)
    model = mlm.model
    sparse = model.config.model_type in SPARSE
    assert sparse_last_layer_supported(model) == sparse
    pad = mlm.tokenizer.pad_token_id or 0
    ids, mask = _batch(model.config.vocab_size, pad)
    with torch.inference_mode():
        full = _full(model, ids, mask)
        # several reads in some rows, none in another, out of row-major order
        pairs = torch.tensor([[2, 8], [0, 3], [0, 0], [2, 1], [0, 8]])
        got = masked_logits(model, ids, mask, pairs)
        want = full[pairs[:, 0], pairs[:, 1]]
        torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)
        # one read per row in row order (the PLL layout), no attention mask (one length)
        same = ids[[0, 2]]
        full_same = _full(model, same, None)
        one = torch.tensor([[0, 4], [1, 7]])
        torch.testing.assert_close(masked_logits(model, same, None, one),
                                   full_same[one[:, 0], one[:, 1]], atol=2e-5, rtol=1e-4)
        none = masked_logits(model, ids, mask, torch.zeros((0, 2), dtype=torch.long))
        assert none.shape == (0, full.shape[-1])  # nothing read: an empty result
    assert len(_counted_sparse) == (2 if sparse else 0)


@pytest.mark.parametrize("family", ["bert", "modernbert", "esm2"])
def test_sparse_gradients_equal_full(tiny_mlm, family):
    """Training reads the masked positions: the loss and its gradients are the full ones."""
    model = tiny_mlm(family).model
    ids, mask = _batch(model.config.vocab_size, tiny_mlm(family).tokenizer.pad_token_id or 0)
    chosen = torch.zeros_like(ids, dtype=torch.bool)
    chosen[0, [1, 3, 4]] = chosen[1, 2] = chosen[2, [0, 5, 7, 8]] = True
    targets = ids[chosen]
    model.train()  # the presets' dropout is 0.1: the full layer runs; 0: the sparse one
    saved = {m: m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)}
    # attention dropout held as a float (ESM's self-attention)
    floats = {m: m.dropout for m in model.modules() if isinstance(getattr(m, "dropout", None),
                                                                   float)}
    try:
        for m in saved:
            m.p = 0.0
        for m in floats:
            m.dropout = 0.0
        grads = []
        for sparse in (True, False):
            model.zero_grad()
            logits = masked_logits(model, ids, mask, chosen) if sparse else \
                _full(model, ids, mask)[chosen]
            loss = torch.nn.functional.cross_entropy(logits, targets)
            loss.backward()
            grads.append((loss.detach(), [p.grad.clone() for p in model.parameters()
                                          if p.grad is not None]))
    finally:
        for m, p in saved.items():
            m.p = p
        for m, p in floats.items():
            m.dropout = p
        model.zero_grad()
        model.eval()
    (loss_s, grad_s), (loss_f, grad_f) = grads
    torch.testing.assert_close(loss_s, loss_f, atol=1e-5, rtol=1e-5)
    assert len(grad_s) == len(grad_f)
    for a, b in zip(grad_s, grad_f, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_eager_attention_and_active_dropout(tiny_mlm, _counted_sparse):
    """Eager attention (bf16 CPU training sets it) runs sparse; dropout > 0 runs the full
    layer, so a run's random stream is the full forward's."""
    model = tiny_mlm("bert").model
    ids, mask = _batch(model.config.vocab_size, 0)
    pairs = torch.tensor([[0, 1], [1, 5], [2, 2]])
    model.set_attn_implementation("eager")
    try:
        with torch.inference_mode():
            torch.testing.assert_close(masked_logits(model, ids, mask, pairs),
                                       _full(model, ids, mask)[pairs[:, 0], pairs[:, 1]],
                                       atol=2e-5, rtol=1e-4)
    finally:
        model.set_attn_implementation("sdpa")
    assert len(_counted_sparse) == 1
    model.train()
    try:
        masked_logits(model, ids, mask, pairs)  # dropout 0.1 is active in training
    finally:
        model.eval()
    assert len(_counted_sparse) == 1


def test_modernbert_sliding_window_last_layer(tokenizer_factory, _counted_sparse):
    """A last layer with local attention shorter than the input: each query row keeps its
    own window of the mask."""
    from mlmkit.models import build_mlm

    model = build_mlm("modernbert-tiny", tokenizer_factory("bpe"), max_length=8, seed=0).eval()
    assert model.config.layer_types[-1] == "sliding_attention"
    assert model.config.sliding_window < 7  # the window cuts an 8-token input
    ids, mask = _batch(model.config.vocab_size, 1, lengths=(8, 5, 8))
    pairs = torch.tensor([[0, 0], [0, 7], [1, 4], [2, 6], [2, 1]])
    with torch.inference_mode():
        torch.testing.assert_close(masked_logits(model, ids, mask, pairs),
                                   _full(model, ids, mask)[pairs[:, 0], pairs[:, 1]],
                                   atol=2e-5, rtol=1e-4)
    assert len(_counted_sparse) == 1


def test_training_loss_equals_the_full_last_layer(tiny_mlm, monkeypatch, _counted_sparse):
    """The MLM objective's loss (sparse prediction, dropout 0) with the sparse last layer and
    with the full one (MLMKIT_SPARSE_LAST_LAYER=0, today's loop before it)."""
    from mlmkit.training.objectives.mlm import sparse_mlm_loss

    model = tiny_mlm("roberta").model
    ids, mask = _batch(model.config.vocab_size, tiny_mlm("roberta").tokenizer.pad_token_id)
    chosen = torch.rand(ids.shape, generator=torch.Generator().manual_seed(3)) < 0.3
    chosen &= mask.bool()
    losses = []
    with torch.no_grad():
        for flag in ("1", "0"):
            monkeypatch.setenv("MLMKIT_SPARSE_LAST_LAYER", flag)
            losses.append(sparse_mlm_loss(model, ids, mask, chosen, ids, 0.1)[0])
    assert len(_counted_sparse) == 1  # the first ran sparse, the second in full
    torch.testing.assert_close(losses[0], losses[1], atol=1e-4, rtol=1e-6)


def test_sparse_modernbert_in_bfloat16_equals_full(tiny_mlm, _counted_sparse):
    """A bf16 model rotates in float32 as transformers does (through the same hand-written
    function as float32, models/fast_modernbert.py): both equal the full forward."""
    import copy

    model = copy.deepcopy(tiny_mlm("modernbert").model).to(torch.bfloat16)
    ids, mask = _batch(model.config.vocab_size, 0)
    pairs = torch.tensor([[2, 8], [0, 3], [1, 5]])
    with torch.inference_mode():
        want = _full(model, ids, mask)[pairs[:, 0], pairs[:, 1]].float()
        got = masked_logits(model, ids, mask, pairs).float()
    torch.testing.assert_close(got, want, atol=0.05, rtol=0.02)
    assert len(_counted_sparse) == 1


def test_sparse_modernbert_training_under_bf16_autocast_equals_full(tiny_mlm, monkeypatch,
                                                                    _counted_sparse):
    """bf16 training on a CPU with native bf16: the sparse last layer's loss and gradients
    equal the full layer's within bf16 rounding."""
    import copy

    from mlmkit.training.objectives.mlm import sparse_mlm_loss

    model = copy.deepcopy(tiny_mlm("modernbert").model).train()
    ids, mask = _batch(model.config.vocab_size, 0)
    chosen = torch.rand(ids.shape, generator=torch.Generator().manual_seed(4)) < 0.3
    chosen &= mask.bool()
    results = []
    for flag in ("1", "0"):
        monkeypatch.setenv("MLMKIT_SPARSE_LAST_LAYER", flag)
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = sparse_mlm_loss(model, ids, mask, chosen, ids, 0.0)[0]
        loss.backward()
        results.append((loss.detach(), {n: p.grad.clone() for n, p in
                                        model.named_parameters() if p.grad is not None}))
    assert len(_counted_sparse) == 1
    torch.testing.assert_close(results[0][0], results[1][0], rtol=1e-2, atol=1e-2)
    for name, grad in results[1][1].items():
        scale = grad.abs().max().clamp_min(1e-12)
        assert (results[0][1][name] - grad).abs().max() / scale < 5e-2, name

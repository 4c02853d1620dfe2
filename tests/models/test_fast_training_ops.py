"""The training step's hand-written backward passes equal autograd's: the fused
cross-entropy (objectives/cross_entropy.py) and ModernBERT's rotary/QKV and GeGLU
(models/fast_modernbert.py)."""

import copy

import pytest
import torch
import torch.nn.functional as F

from mlmkit.models.cross_entropy import cross_entropy_top1
from mlmkit.models.fast_modernbert import use_fast_layers


def _loss_and_grad(function, logits, targets):
    logits = logits.clone().requires_grad_()
    per_token, top1 = function(logits, targets)
    (per_token * torch.linspace(0.5, 2.0, len(targets))).sum().backward()
    return per_token.detach(), top1, logits.grad


def _reference(logits, targets):
    return F.cross_entropy(logits, targets, reduction="none"), logits.detach().argmax(-1)


@pytest.mark.parametrize("scale", [1.0, 40.0])  # 40: targets far below the top (tiny p)
def test_cross_entropy_equals_torch(scale):
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(37, 503, generator=generator) * scale
    targets = torch.randint(0, 503, (37,), generator=generator)
    ours, reference = (_loss_and_grad(f, logits, targets)
                       for f in (cross_entropy_top1, _reference))
    assert torch.allclose(ours[0], reference[0], rtol=1e-5, atol=1e-5)
    assert torch.equal(ours[1], reference[1])
    assert torch.allclose(ours[2], reference[2], rtol=1e-5, atol=1e-7)
    assert torch.isfinite(ours[0]).all()


def test_cross_entropy_backward_twice_is_refused_not_wrong():
    """The backward scales the kept softmax in place: a second backward through the same
    graph must fail autograd's version check, never return a gradient from a spent buffer."""
    logits = torch.randn(5, 11, requires_grad=True)
    per_token, _ = cross_entropy_top1(logits, torch.tensor([0, 3, 10, 2, 2]))
    per_token.sum().backward(retain_graph=True)
    first = logits.grad.clone()
    assert torch.allclose(first, torch.softmax(logits.detach(), -1)
                          - F.one_hot(torch.tensor([0, 3, 10, 2, 2]), 11), atol=1e-6)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        per_token.sum().backward()


def test_cross_entropy_with_label_smoothing_is_torchs():
    logits, targets = torch.randn(5, 11), torch.tensor([0, 3, 10, 2, 2])
    per_token, _ = cross_entropy_top1(logits, targets, label_smoothing=0.1)
    expected = F.cross_entropy(logits, targets, reduction="none", label_smoothing=0.1)
    assert torch.equal(per_token, expected)


def _step(model, input_ids, attention_mask, labels):
    model.zero_grad()
    out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    out.loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.loss.detach(), out.logits.detach(), grads


def test_fast_modernbert_layers_equal_transformers(tiny_mlm):
    reference = copy.deepcopy(tiny_mlm("modernbert").model).train()
    fast = copy.deepcopy(reference)
    assert use_fast_layers(fast) == 2 * reference.config.num_hidden_layers
    generator = torch.Generator().manual_seed(0)
    # longer than the local-attention window, with padding in one row
    input_ids = torch.randint(5, reference.config.vocab_size, (2, 90), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 70:] = 0
    labels = torch.where(torch.rand(input_ids.shape, generator=generator) < 0.3, input_ids, -100)
    expected, got = (_step(m, input_ids, attention_mask, labels) for m in (reference, fast))
    assert torch.allclose(got[0], expected[0], atol=1e-6)
    assert torch.allclose(got[1], expected[1], atol=1e-5)
    assert got[2].keys() == expected[2].keys()
    for name, grad in expected[2].items():
        assert torch.allclose(got[2][name], grad, rtol=1e-4, atol=1e-6), name


def test_fast_layers_leave_other_families_alone(tiny_mlm):
    model = copy.deepcopy(tiny_mlm("bert").model)
    assert use_fast_layers(model) == 0


def test_cross_entropy_stays_float32_under_autocast():
    logits, targets = torch.randn(6, 300) * 5, torch.randint(0, 300, (6,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        per_token, _ = cross_entropy_top1(logits, targets)
    assert per_token.dtype == torch.float32
    assert torch.allclose(per_token, F.cross_entropy(logits, targets, reduction="none"),
                          atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_cross_entropy_of_half_logits_is_that_of_their_float32_cast(dtype):
    """A bf16 step passes its logits as they are (no float32 copy): the loss, the top-1 and
    the gradient (rounded once to the logits' dtype) equal those of `.float()` first."""
    generator = torch.Generator().manual_seed(1)
    logits = (torch.randn(29, 701, generator=generator) * 8).to(dtype)
    targets = torch.randint(0, 701, (29,), generator=generator)
    weights = torch.linspace(0.5, 2.0, 29)

    def run(cast):
        leaf = logits.clone().requires_grad_()
        per_token, top1 = cross_entropy_top1(leaf.float() if cast else leaf, targets)
        (per_token * weights).sum().backward()
        return per_token.detach(), top1, leaf.grad

    ours, cast = run(False), run(True)
    assert ours[0].dtype == torch.float32 and ours[2].dtype == dtype
    assert torch.equal(ours[0], cast[0]) and torch.equal(ours[1], cast[1])
    assert torch.equal(ours[2], cast[2])
    reference = F.cross_entropy(logits.float(), targets, reduction="none")
    assert torch.allclose(ours[0], reference, rtol=1e-5, atol=1e-5)


def test_fast_modernbert_layers_equal_transformers_under_bf16_autocast(tiny_mlm):
    """bf16 training (the default where bf16 is native) runs the fast layers too: the
    rotation is still computed in float32 and rounded once, as transformers does, and
    GeGLU runs transformers' bf16 ops; loss, logits and gradients equal transformers'
    within bf16 rounding."""
    reference = copy.deepcopy(tiny_mlm("modernbert").model).train()
    fast = copy.deepcopy(reference)
    use_fast_layers(fast)
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(5, reference.config.vocab_size, (2, 40), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[0, 30:] = 0
    labels = torch.where(torch.rand(input_ids.shape, generator=generator) < 0.3, input_ids, -100)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected, got = (_step(m, input_ids, attention_mask, labels) for m in (reference, fast))
    assert torch.allclose(got[0], expected[0], atol=1e-3)
    assert torch.allclose(got[1], expected[1], rtol=2e-2, atol=2e-2)
    assert got[2].keys() == expected[2].keys()
    for name, grad in expected[2].items():
        scale = grad.abs().max().clamp_min(1e-12)
        assert (got[2][name] - grad).abs().max() / scale < 2e-2, name


def test_bf16_cpu_attention_is_float32_where_it_is_differentiated(tiny_mlm, monkeypatch):
    """The CPU flash-attention backward is slow in bf16: under bf16 autocast a training
    forward hands the attention float32 inputs (its output is rounded back to bf16), an
    inference forward keeps bf16 (the faster forward)."""
    model = copy.deepcopy(tiny_mlm("modernbert").model)
    use_fast_layers(model)
    seen = []
    sdpa = F.scaled_dot_product_attention

    def spy(query, *args, **kwargs):
        seen.append(query.dtype)
        return sdpa(query, *args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    input_ids = torch.randint(5, model.config.vocab_size, (2, 24))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model.train()
        model(input_ids=input_ids).logits.float().sum().backward()
        trained, seen[:] = list(seen), []
        with torch.no_grad():
            model.eval()
            model(input_ids=input_ids)
    assert trained and set(trained) == {torch.float32}
    assert seen and set(seen) == {torch.bfloat16}


def test_fast_rotary_of_bf16_projections_is_transformers_float32_rotation():
    from transformers.models.modernbert.modeling_modernbert import apply_rotary_pos_emb

    from mlmkit.models.fast_modernbert import rotate_projections

    generator = torch.Generator().manual_seed(2)
    qkv = torch.randn(2, 7, 3, 4, 16, generator=generator).bfloat16().requires_grad_()
    angles = torch.rand(1, 7, 16, generator=generator) * 6
    cos, sin = angles.cos(), angles.sin()
    q, k, v = rotate_projections(qkv, cos[:, :, None], sin[:, :, None], rotated=2)
    want_q, want_k = apply_rotary_pos_emb(qkv[:, :, 0], qkv[:, :, 1], cos, sin, unsqueeze_dim=2)
    assert q.dtype == k.dtype == torch.bfloat16
    # equal but where a float32 rounding difference crosses a bf16 rounding boundary
    torch.testing.assert_close(q, want_q, rtol=2 ** -7, atol=1e-6)
    torch.testing.assert_close(k, want_k, rtol=2 ** -7, atol=1e-6)
    assert torch.equal(v, qkv[:, :, 2])
    weights = torch.randn(3, 2, 7, 4, 16, generator=generator).bfloat16()
    (grad,) = torch.autograd.grad((q * weights[0]).sum() + (k * weights[1]).sum()
                                  + (v * weights[2]).sum(), qkv)
    # the gradient is the float32 one rounded once (transformers rounds each of its two
    # terms to bf16 before adding them, so it is further from this float32 reference)
    wide = qkv.detach().float().requires_grad_()
    q32, k32 = apply_rotary_pos_emb(wide[:, :, 0], wide[:, :, 1], cos, sin, unsqueeze_dim=2)
    w32 = weights.float()
    (want,) = torch.autograd.grad((q32 * w32[0]).sum() + (k32 * w32[1]).sum()
                                  + (wide[:, :, 2] * w32[2]).sum(), wide)
    assert grad.dtype == torch.bfloat16
    torch.testing.assert_close(grad.float(), want, rtol=2 ** -7, atol=1e-6)

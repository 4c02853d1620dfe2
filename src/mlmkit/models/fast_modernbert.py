"""ModernBERT's rotary embedding and GeGLU with hand-written backward passes, for training.

transformers' ModernBERT splits the fused QKV projection with `unbind`, rotates q and k
with `rotate_half` (two slices, a negation, a concatenation) and splits the GeGLU input
with `chunk`; autograd then answers each of those views with a zero-filled gradient, a
copy and a concatenation: element-wise passes over every activation, a few percent of a
CPU training step of the default model. The two functions here compute the same values (the same
products, summed in the same order) and write each gradient once into one buffer, with
no zero fill and no concatenation. `use_fast_layers` swaps them into a model's ModernBERT
layers; the model, its weights and its checkpoints are unchanged, and the outputs and
gradients equal transformers' within float rounding (tests/models/test_fast_training_ops.py).
In bf16 (a bf16 model, or autocast where bf16 is native) the rotation is still computed
in float32 and rounded once, transformers' rule; its gradient is summed in float32 before
that one rounding (transformers rounds each of its two terms first).
"""

from __future__ import annotations

import contextlib
import types

import torch
import torch.nn.functional as F
from transformers.activations import GELUActivation
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.modernbert.modeling_modernbert import (
    ModernBertAttention,
    ModernBertMLP,
    eager_attention_forward,
)


def _rotate_into(out: torch.Tensor, x: torch.Tensor, cos: torch.Tensor,
                 signed_sin: torch.Tensor) -> None:
    """out = x·cos + swap(x)·signed_sin, swap exchanging the halves of the last dim: with
    signed_sin = (−sin₁, sin₂) that is ModernBERT's x·cos + rotate_half(x)·sin, and with
    (sin₂, −sin₁) reversed it is the transpose of that rotation (the backward)."""
    half = x.shape[-1] // 2
    torch.mul(x, cos, out=out)
    out[..., :half].addcmul_(x[..., half:], signed_sin[..., :half])
    out[..., half:].addcmul_(x[..., :half], signed_sin[..., half:])


def _rotated(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """`_rotate_into` a new tensor, computed in float32 (cos, sin: float32) and returned in
    x's dtype: a bf16 projection is rotated as transformers rotates it (upcast, rotate in
    float32, round once)."""
    wide = x.float()
    out = torch.empty_like(wide, memory_format=torch.contiguous_format)
    _rotate_into(out, wide, cos, signed_sin)
    return out if x.dtype == torch.float32 else out.to(x.dtype)


class _Rotary(torch.autograd.Function):
    """Projections [..., k, H, dh] → k tensors [..., H, dh]: the first `rotated` rotated
    (q and k of a QKV projection: 2 of 3), the rest passed through as views."""

    @staticmethod
    def forward(ctx, projections: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                rotated: int):
        half = cos.shape[-1] // 2
        signed_sin = torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)
        outputs = []
        for i in range(projections.shape[-3]):
            part = projections[..., i, :, :]
            if i < rotated:
                part = _rotated(part, cos, signed_sin)
            outputs.append(part)
        ctx.save_for_backward(cos, sin)
        ctx.rotated, ctx.shape, ctx.dtype = rotated, projections.shape, projections.dtype
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grads):
        cos, sin = ctx.saved_tensors
        half = cos.shape[-1] // 2
        # the transpose of the rotation: g·cos + swap(g)·(sin₂, −sin₁)
        signed_sin = torch.cat((sin[..., half:], -sin[..., :half]), dim=-1)
        grad = cos.new_empty(ctx.shape, dtype=ctx.dtype)
        for i, part in enumerate(grads):
            into = grad[..., i, :, :]
            if part is None:  # an output the loss does not read
                into.zero_()
            elif i < ctx.rotated and part.dtype == torch.float32:
                _rotate_into(into, part, cos, signed_sin)
            elif i < ctx.rotated:
                into.copy_(_rotated(part, cos, signed_sin))
            else:
                into.copy_(part)
        return grad, None, None, None


def rotate_projections(projections: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                       rotated: int) -> tuple[torch.Tensor, ...]:
    """ModernBERT's rotary embedding on the first `rotated` of `projections` [..., k, H, dh]
    (cos, sin: broadcastable to [..., H, dh]), computed in float32 whatever the projections'
    dtype (transformers' rule); one gradient buffer, no zero fill."""
    return _Rotary.apply(projections, cos.float(), sin.float(), rotated)


class _GeGLU(torch.autograd.Function):
    """[..., 2I] → gelu(first half) · second half, [..., I] (exact, erf GELU)."""

    @staticmethod
    def forward(ctx, hidden: torch.Tensor):
        inner = hidden.shape[-1] // 2
        activated = F.gelu(hidden[..., :inner])
        ctx.save_for_backward(hidden, activated)
        return activated * hidden[..., inner:]

    @staticmethod
    def backward(ctx, grad):
        hidden, activated = ctx.saved_tensors
        inner = hidden.shape[-1] // 2
        grad_hidden = torch.empty_like(hidden, memory_format=torch.contiguous_format)
        torch.mul(grad, activated, out=grad_hidden[..., inner:])
        # d/da [gelu(a)·b] = g·b·gelu'(a): g·b is written where the result goes and
        # gelu_backward scales it there, element by element (no temporary)
        gate = torch.mul(grad, hidden[..., inner:], out=grad_hidden[..., :inner])
        torch.ops.aten.gelu_backward.grad_input(gate, hidden[..., :inner], grad_input=gate)
        return grad_hidden


def attention_in_float32(query: torch.Tensor) -> bool:
    """Whether a bf16 attention should be computed in float32: on a CPU, where autograd
    will differentiate it. PyTorch's CPU flash-attention backward is 2–4× slower in bf16
    than in float32 at the lengths of fine-tuning and pretraining rows (32–128 tokens),
    more than the casts cost; its bf16 forward is the faster one, so inference keeps bf16.
    The inputs are the same bf16 values and the softmax and sums are float32 either way
    (the kernel accumulates in float32); the output is rounded to bf16 once, as the kernel
    rounds it."""
    return (query.device.type == "cpu" and query.dtype == torch.bfloat16
            and query.requires_grad and torch.is_grad_enabled())


def widened(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask):
    """(query, key, value, mask) in float32 (a bool mask as it is), and a context in which
    autocast leaves them so: for an attention that `attention_in_float32`."""
    if mask is not None and mask.is_floating_point():
        mask = mask.float()
    return (query.float(), key.float(), value.float(), mask,
            torch.autocast(query.device.type, enabled=False))


def _attention_forward(self, hidden_states, position_embeddings=None, attention_mask=None,
                       **kwargs):
    """transformers' `ModernBertAttention.forward` with the projections split and rotated
    by `rotate_projections` (the same attention call, mask and scaling)."""
    input_shape = hidden_states.shape[:-1]
    qkv = self.Wqkv(hidden_states).view(*input_shape, 3, -1, self.head_dim)
    cos, sin = position_embeddings  # [B|1, L, dh]
    query, key, value = rotate_projections(qkv, cos[:, :, None], sin[:, :, None], rotated=2)
    interface = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation,
                                                      eager_attention_forward)
    dtype, context = query.dtype, contextlib.nullcontext()
    if self.config._attn_implementation == "sdpa" and attention_in_float32(query):
        query, key, value, attention_mask, context = widened(query, key, value,
                                                             attention_mask)
    with context:
        output, weights = interface(
            self, query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
            attention_mask, dropout=self.attention_dropout if self.training else 0.0,
            scaling=self.head_dim ** -0.5, sliding_window=self.sliding_window,
            deterministic=self.deterministic_flash_attn, **kwargs)
    output = output.to(dtype).reshape(*input_shape, -1).contiguous()
    return self.out_drop(self.Wo(output)), weights


def _mlp_forward(self, hidden_states):
    return self.Wo(self.drop(_GeGLU.apply(self.Wi(hidden_states))))


def _exact_gelu(module) -> bool:
    return (type(module) is GELUActivation and module.act is F.gelu) or (
        type(module) is torch.nn.GELU and module.approximate == "none")


def use_fast_layers(model: torch.nn.Module) -> int:
    """Swap the fast rotary/QKV and GeGLU forwards into `model`'s ModernBERT attention and
    MLP modules (any precision; activations other than exact GELU keep transformers' MLP
    code). Returns how many modules were changed."""
    changed = 0
    for module in model.modules():
        if isinstance(module, ModernBertAttention):
            module.forward = types.MethodType(_attention_forward, module)
            changed += 1
        elif isinstance(module, ModernBertMLP) and _exact_gelu(module.act):
            module.forward = types.MethodType(_mlp_forward, module)
            changed += 1
    return changed

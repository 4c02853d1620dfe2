"""Per-token cross-entropy and top-1 of [n, V] logits in fewer passes over the logits.

`F.cross_entropy` then `argmax` reads a training step's [masked tokens, vocabulary] logits
many times: log-softmax (max, exp-sum, output), argmax, and in the backward a zero
fill, a scatter and the softmax again. Here the forward takes the row maxima and the
top-1 in one pass (`max` returns both) and the softmax once, kept for the backward,
which is one scaled copy: grad = softmax · g − onehot · g. The loss is the same quantity,
logsumexp − logit of the target, in float32, equal to `F.cross_entropy` within float
rounding (tests/models/test_fast_training_ops.py). Every target must be a vocabulary id (no
ignore index: the MLM loss passes only the masked positions).

bf16 / fp16 logits (a bf16 step) are read as they are: the softmax accumulates and
returns float32 (`softmax(dtype=float32)` converts each value exactly), so no float32 copy
of the logits is made, and the gradient is rounded to the logits' dtype once, at the end.
The loss and the gradient are those of the logits cast to float32 first.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

_FAST_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


class _CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor):
        top, top1 = logits.max(dim=-1)  # exact in any dtype
        prob = logits.softmax(dim=-1, dtype=torch.float32)
        # the top-1's probability is 1 / Σ exp(z − max) ≥ 1/V: its log never underflows
        logsumexp = top.float() - prob.gather(1, top1[:, None]).squeeze(1).log()
        per_token = logsumexp - logits.gather(1, targets[:, None]).squeeze(1).float()
        ctx.logits_dtype = logits.dtype
        ctx.save_for_backward(prob, targets)
        ctx.mark_non_differentiable(top1)
        return per_token, top1

    @staticmethod
    def backward(ctx, grad: torch.Tensor, _grad_top1):
        prob, targets = ctx.saved_tensors
        # in place: the softmax is not read again, and a second backward through this
        # graph (retain_graph) fails autograd's version check instead of reading it
        grad_logits = prob.mul_(grad[:, None])
        grad_logits.scatter_add_(1, targets[:, None], -grad[:, None])
        return grad_logits.to(ctx.logits_dtype), None


def cross_entropy_top1(logits: torch.Tensor, targets: torch.Tensor,
                       label_smoothing: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token cross-entropy [n] (float32) of `logits` [n, V] (float32, bf16 or fp16)
    against `targets` [n], and each row's top-1 id [n] (not differentiable). With label
    smoothing, `F.cross_entropy` of the logits in float32."""
    if label_smoothing or logits.dtype not in _FAST_DTYPES or logits.dim() != 2:
        logits = logits.float()
        per_token = F.cross_entropy(logits, targets, reduction="none",
                                    label_smoothing=label_smoothing)
        return per_token, logits.detach().argmax(-1)
    with torch.autocast(logits.device.type, enabled=False):  # float32, as F.cross_entropy
        return _CrossEntropy.apply(logits, targets)

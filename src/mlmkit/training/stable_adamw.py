"""StableAdamW: AdamW with per-tensor update clipping, and optionally decoupled weight decay.

Wortsman et al. 2023 ("Stable and low-precision training for large-scale vision-language
models", Algorithm 1) add AdaFactor's update clipping to AdamW: for each tensor,

    v̂_t  = bias-corrected second moment,  m̂_t = bias-corrected first moment
    RMS_t = sqrt(mean(g_t² / max(v̂_t, ε²)))
    η_t   = α_t / max(1, RMS_t)
    θ_t   = θ_{t-1} - η_t·λ·θ_{t-1} - η_t · m̂_t / (sqrt(v̂_t) + ε)

RMS_t > 1 means this step's gradient is large for what the second moment has seen (v̂_t
lags behind a gradient spike), the update m̂/sqrt(v̂) would be too large, and the step
size is divided by it: η_t·RMS_t ≤ α_t. ModernBERT and its descendants (Ettin, mmBERT)
train with it.

Weight decay. torch's AdamW multiplies the decay by the learning rate (θ ← θ(1 - α_t·λ)),
so the decay per step changes whenever the peak learning rate does. ModernBERT's (and
MosaicBERT's) optimizers are Composer's "decoupled" ones, following Loshchilov & Hutter's
original decoupling: the decay follows the schedule but not the learning rate's size,
θ ← θ(1 - (α_t / α_max)·λ); their λ = 1e-5 is that decoupled value (about torch's 0.01 at
lr 1e-3). With `decoupled=True` this optimizer does that (with update clipping, η_t takes
the place of α_t, as in the paper's algorithm: a clipped step also decays less).

With `clip_updates=False` and `decoupled=False` this is exactly torch's AdamW (same
operations in the same order; tested). The update runs as foreach (multi-tensor) ops over
all tensors of one device, dtype and step count: a handful of kernels a step instead of a
dozen per parameter. `foreach=False` runs the same arithmetic one tensor at a time: the
reference the multi-tensor path is tested against (and measured against in
benchmarks/optimizer_step.py). The state (step, exp_avg, exp_avg_sq per parameter) is a
plain `Optimizer.state_dict()`, the same for both paths.
"""

from __future__ import annotations

import torch


class StableAdamW(torch.optim.Optimizer):
    """AdamW with AdaFactor-style per-tensor update clipping (`clip_updates`) and optionally
    decoupled weight decay (`decoupled`: the decay scaled by lr / `max_lr`, not by lr)."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.98),
                 eps: float = 1e-6, weight_decay: float = 0.0, *, clip_updates: bool = True,
                 decoupled: bool = False, max_lr: float | None = None, foreach: bool = True):
        if not lr > 0 or not eps > 0 or weight_decay < 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError(f"StableAdamW: bad hyperparameters lr={lr} betas={betas} "
                             f"eps={eps} weight_decay={weight_decay}")
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                    "clip_updates": clip_updates, "decoupled": decoupled,
                    "max_lr": lr if max_lr is None else max_lr}
        super().__init__(params, defaults)
        self.foreach = foreach
        self.last_rms: list[torch.Tensor] = []  # each stepped tensor's RMS_t (diagnostics)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.last_rms = []
        for group in self.param_groups:
            buckets: dict[tuple, list] = {}
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("StableAdamW does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0, dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p,
                                                           memory_format=torch.preserve_format)
                state["step"] += 1
                key = (p.device, p.dtype, int(state["step"].item()))
                buckets.setdefault(key, []).append(p)
            for (_, _, step), params in buckets.items():
                if self.foreach:
                    self._update(group, params, step)
                else:
                    for p in params:
                        self._update_one(group, p, step)
        return loss

    def _update_one(self, group: dict, p: torch.Tensor, step: int) -> None:
        """One step of one tensor: `_update`'s arithmetic, op for op, without foreach."""
        beta1, beta2 = group["betas"]
        lr, eps, decay = group["lr"], group["eps"], group["weight_decay"]
        grad, state = p.grad, self.state[p]
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias1, bias2 = 1 - beta1 ** step, 1 - beta2 ** step
        denom = exp_avg_sq.sqrt().div_(bias2 ** 0.5)
        scale = None
        if group["clip_updates"]:
            ratio = grad * denom.clamp_min(eps).reciprocal_()
            size = torch.tensor(float(p.numel()), device=ratio.device).sqrt()
            rms = torch.linalg.vector_norm(ratio).float() / size
            self.last_rms.append(rms)
            scale = float(1.0 / rms.clamp_min(1.0))
        denom.add_(eps)
        step_size = lr / bias1
        if decay:
            factor = decay * (lr / group["max_lr"] if group["decoupled"] else lr)
            p.mul_(1 - factor * (1.0 if scale is None else scale))
        p.addcdiv_(exp_avg, denom, value=-step_size * (1.0 if scale is None else scale))

    def _update(self, group: dict, params: list, step: int) -> None:
        """One step of tensors sharing device, dtype and step count (foreach ops, two
        temporaries: the denominator and, with clipping, the normalised gradient)."""
        beta1, beta2 = group["betas"]
        lr, eps, decay = group["lr"], group["eps"], group["weight_decay"]
        grads = [p.grad for p in params]
        exp_avgs = [self.state[p]["exp_avg"] for p in params]
        exp_avg_sqs = [self.state[p]["exp_avg_sq"] for p in params]
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
        bias1, bias2 = 1 - beta1 ** step, 1 - beta2 ** step
        denom = torch._foreach_sqrt(exp_avg_sqs)  # sqrt(v̂) once the bias is divided out
        torch._foreach_div_(denom, bias2 ** 0.5)
        scale = None
        if group["clip_updates"]:
            # RMS_t = sqrt(mean(g² / max(v̂, ε²))) = ‖g / max(sqrt(v̂), ε)‖ / sqrt(numel)
            ratio = torch._foreach_clamp_min(denom, eps)
            torch._foreach_reciprocal_(ratio)
            torch._foreach_mul_(ratio, grads)
            norms = torch.stack(torch._foreach_norm(ratio)).float()
            del ratio
            sizes = torch.tensor([p.numel() for p in params], dtype=torch.float32,
                                 device=norms.device)
            rms = norms / sizes.sqrt()
            self.last_rms.extend(rms.unbind())
            scale = (1.0 / rms.clamp_min(1.0)).tolist()  # η_t / α_t per tensor
        torch._foreach_add_(denom, eps)
        step_size = lr / bias1
        if decay:
            factor = decay * (lr / group["max_lr"] if group["decoupled"] else lr)
            if scale is None:
                torch._foreach_mul_(params, 1 - factor)
            else:
                torch._foreach_mul_(params, [1 - factor * k for k in scale])
        if scale is None:
            torch._foreach_addcdiv_(params, exp_avgs, denom, value=-step_size)
        else:
            torch._foreach_addcdiv_(params, exp_avgs, denom, [-step_size * k for k in scale])

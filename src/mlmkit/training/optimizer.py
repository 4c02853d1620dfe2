"""The optimizer of a run: AdamW or StableAdamW (`mlmkit.training.stable_adamw`), with weight
decay on weight matrices only (not on norms, biases or 1-d params)."""

from __future__ import annotations

import torch

from mlmkit.training.stable_adamw import StableAdamW


def parameter_groups(modules: dict[str, torch.nn.Module], weight_decay: float) -> list[dict]:
    """Two groups: decayed matrices, and undecayed norms/biases; shared params counted once."""
    decay, no_decay, seen = [], [], set()
    for module in modules.values():
        for name, param in module.named_parameters():
            if not param.requires_grad or id(param) in seen:
                continue
            seen.add(id(param))
            is_norm = "norm" in name.lower() or "layernorm" in name.lower()
            (no_decay if param.ndim < 2 or is_norm or name.endswith("bias") else decay).append(
                param)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def build_optimizer(modules: dict[str, torch.nn.Module], *, lr: float, weight_decay: float,
                    betas: tuple[float, float], eps: float, device: torch.device,
                    kind: str = "adamw", decoupled: bool = False) -> torch.optim.Optimizer:
    """`kind` adamw: torch's fused AdamW where the device supports it (CUDA, and the CPU
    since torch 2.4), else its foreach one; with `decoupled` weight decay (scaled by lr /
    peak lr instead of lr), mlmkit's foreach StableAdamW without clipping; stableadamw:
    AdamW with per-tensor update clipping (foreach).

    Fused on the CPU too, by measurement (benchmarks/optimizer_step.py, the mini model,
    torch 2.13, one thread): its step took 13 ms against foreach's 73 ms and the
    single-tensor loop's 50 ms (foreach ops on a CPU loop over the tensors in C++ with a
    temporary per op; the fused kernel makes one pass)."""
    groups = parameter_groups(modules, weight_decay)
    if kind == "stableadamw" or decoupled:
        return StableAdamW(groups, lr=lr, betas=betas, eps=eps,
                           clip_updates=kind == "stableadamw", decoupled=decoupled, max_lr=lr)
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, **adamw_kernel(groups))


FUSED_DEVICES = ("cpu", "cuda")
"""Devices whose fused AdamW kernel mlmkit uses (measured on the CPU, the default on CUDA)."""


def adamw_kernel(groups: list[dict]) -> dict:
    """AdamW's keyword for its kernel: fused when every parameter is a float tensor on a
    device of `FUSED_DEVICES`, else foreach."""
    params = [p for group in groups for p in group["params"]]
    if params and all(p.device.type in FUSED_DEVICES and p.is_floating_point()
                      for p in params):
        return {"fused": True}
    return {"foreach": True}


def clip_in_step(optimizer: torch.optim.Optimizer, parameters: list[torch.Tensor],
                 max_norm: float) -> torch.Tensor:
    """Clip the gradients' total norm to `max_norm` as `torch.nn.utils.clip_grad_norm_`
    does, inside the optimizer's next step where its kernel can: a fused AdamW divides each
    gradient by its `grad_scale` as it reads it (the hook `torch.amp.GradScaler` uses), so
    the clip costs one pass over the gradients (the norm) instead of two (the norm, then a
    scaling pass). The scale is the clip's coefficient inverted, (norm + 1e-6) / max_norm
    and at least 1: the step equals clipping first within float rounding. Other optimizers
    are clipped first. Returns the total norm before clipping."""
    if not getattr(optimizer, "defaults", {}).get("fused"):
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm, foreach=True)
    grads = [p.grad for p in parameters if p.grad is not None]
    norm = torch.nn.utils.get_total_norm(grads, foreach=True)
    optimizer.grad_scale = ((norm + 1e-6) / max_norm).clamp_(min=1.0)
    return norm

"""Changing a RoPE model's θ in place (context extension), config and rotary buffers alike."""

from __future__ import annotations

import torch

from mlmkit.errors import InvalidArgument
from mlmkit.models.info import rope_thetas


def rotary_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    return [m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")]


def has_rope(model: torch.nn.Module) -> bool:
    return rope_thetas(model.config) is not None and bool(rotary_modules(model))


def set_rope_theta(model: torch.nn.Module, theta: float) -> None:
    """Set the RoPE θ of `model`'s global attention (ModernBERT: its full-attention layers;
    local layers keep theirs, as in ModernBERT's context extension; one-θ models: all), in
    the config it is saved with and in its rotary modules' inverse frequencies."""
    config = model.config
    params = getattr(config, "rope_parameters", None)
    if not isinstance(params, dict) or not rotary_modules(model):
        raise InvalidArgument(f"rope_theta: a {config.model_type!r} model has no rotary "
                              "position embeddings (RoPE); only RoPE families (modernbert, "
                              "ettin, mmbert, eurobert, neobert) take a RoPE θ")
    if "rope_theta" in params:
        params["rope_theta"] = float(theta)
    elif isinstance(params.get("full_attention"), dict):
        params["full_attention"]["rope_theta"] = float(theta)
    else:
        raise InvalidArgument(f"rope_theta: cannot find the θ of {config.model_type!r}'s "
                              f"rope_parameters {sorted(params)}")
    for module in rotary_modules(model):
        fresh = type(module)(config=config)  # the inverse frequencies of the new θ
        for name, buffer in list(module.named_buffers(recurse=False)):
            new = getattr(fresh, name, None)
            if isinstance(new, torch.Tensor) and new.shape == buffer.shape:
                buffer.copy_(new.to(buffer.dtype))

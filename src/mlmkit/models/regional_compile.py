"""Regional compilation: `torch.compile` each encoder layer on its own, not the whole model.

The layers of an encoder are one class repeated, so the compiled code of the first is
reused by the others: compile time is that of one layer whatever the depth, and the
embedding, the head and the loss (with their data-dependent shapes, such as the sparse
last layer's masked positions) stay eager.
"""

from __future__ import annotations

import torch

from mlmkit.errors import MlmkitError


def encoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The model's list of transformer layers: the longest `ModuleList` of one class."""
    best = None
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) and \
                len({type(layer) for layer in module}) == 1 and \
                (best is None or len(module) > len(best)):
            best = module
    if best is None:
        raise MlmkitError(f"{type(model).__name__} has no list of layers to compile: drop "
                          "--compile-layers")
    return best


def has_layer_list(model: torch.nn.Module) -> bool:
    """Whether `model` has a list of layers `compile_layers` can compile (the default of a
    GPU run compiles them where it has; `--compile-layers` asked for refuses otherwise)."""
    try:
        encoder_layers(model)
    except MlmkitError:
        return False
    return True


def compile_layers(model: torch.nn.Module, **options) -> int:
    """Compile every encoder layer in place (`Module.compile`); returns how many."""
    layers = encoder_layers(model)
    for layer in layers:
        layer.compile(**options)
    return len(layers)

"""The model layer: loading, presets, adapters and the `masked_log_probs` primitive.

Names are imported lazily, so reading a constant of one module (e.g. the preset table for
`--help`) does not import torch.
"""

import importlib

_EXPORTS = {
    "ADAPTERS": "adapters", "SUPPORTED_ARCHITECTURES": "adapters", "adapter_for": "adapters",
    "MASK_SPELLINGS": "load", "LoadedMLM": "load", "as_mlm": "load", "load_mlm": "load",
    "prepare_mlm": "load",
    "ModelInfo": "info", "model_info": "info",
    "FAMILIES": "preset_table", "SIZES": "preset_table", "build_mlm": "presets",
    "parse_preset": "preset_table", "preset_config": "presets", "family_available": "presets",
    "masked_log_probs": "primitive", "masked_logits": "primitive",
    "sparse_last_layer_supported": "sparse_last_layer",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"mlmkit.models.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'mlmkit.models' has no attribute {name!r}")

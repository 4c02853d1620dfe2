"""The model layer: loading, presets, adapters and the `masked_log_probs` primitive."""

from mlmkit.models.adapters import ADAPTERS, SUPPORTED_ARCHITECTURES, adapter_for
from mlmkit.models.load import MASK_SPELLINGS, MLM, as_mlm, load_mlm, prepare_mlm, resolve_device
from mlmkit.models.presets import FAMILIES, SIZES, build_mlm, parse_preset, preset_config
from mlmkit.models.primitive import masked_log_probs, masked_logits

__all__ = [
    "ADAPTERS", "FAMILIES", "MASK_SPELLINGS", "MLM", "SIZES", "SUPPORTED_ARCHITECTURES",
    "adapter_for", "as_mlm", "build_mlm", "load_mlm", "masked_log_probs", "masked_logits",
    "parse_preset", "prepare_mlm", "preset_config", "resolve_device",
]

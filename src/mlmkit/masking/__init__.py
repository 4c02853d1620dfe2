"""Masking policies: which units, how many, which ones, and how they are corrupted.

`build_policy(config, tokenizer, stats=None)` turns a preset name ("bert", "whole_word",
"span", "pmi", "diffusion", ...) or a plain config mapping into a `MaskingPolicy`, whose
call returns a `MaskedBatch`. Statistics for PMI / frequency / tf-idf / InforMask come from
`compute_stats` (`mlmkit mask stats`).
"""

from mlmkit.masking.batch import IGNORE_INDEX, MaskedBatch
from mlmkit.masking.config import PRESETS, build_policy, resolve
from mlmkit.masking.policy import MaskingPolicy
from mlmkit.masking.registry import COUNTS, RATES, UNITS, WEIGHTS
from mlmkit.masking.stats import MaskingStats, compute_stats, load_stats

__all__ = ["COUNTS", "IGNORE_INDEX", "PRESETS", "RATES", "UNITS", "WEIGHTS", "MaskedBatch",
           "MaskingPolicy", "MaskingStats", "build_policy", "compute_stats", "load_stats",
           "resolve"]

"""The preset table: families, sizes and position counts, and the position count of a local
model folder. Plain data, no torch: `--help`, the pretraining config's checks and the
recipes read it before any model is built (`mlmkit.models.presets` builds them)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Size:
    """Width and depth of a preset size."""

    hidden: int
    layers: int
    heads: int
    intermediate: int


SIZES: dict[str, Size] = {
    "tiny": Size(hidden=128, layers=2, heads=2, intermediate=512),
    "mini": Size(hidden=256, layers=4, heads=4, intermediate=1024),
    "small": Size(hidden=512, layers=4, heads=8, intermediate=2048),
    "base": Size(hidden=768, layers=12, heads=12, intermediate=3072),
}

# ESM-2's published shapes (Lin et al. 2023), named by parameter count, and a tiny one for
# tests: `esm2-8m`, `esm2-35m`, `esm2-150m`, `esm2-tiny`. ESM-2 has its own sizes because
# its widths (20 heads of 16 to 32 dimensions) are not the text presets'.
ESM2_SIZES: dict[str, Size] = {
    "tiny": Size(hidden=64, layers=2, heads=4, intermediate=256),
    "8m": Size(hidden=320, layers=6, heads=20, intermediate=1280),
    "35m": Size(hidden=480, layers=12, heads=20, intermediate=1920),
    "150m": Size(hidden=640, layers=30, heads=20, intermediate=2560),
}
# ESM-2's longest input in tokens: 1,022 residues + <cls> + <eos>. Its config holds two
# positions more (the released models' 1,026): ESM numbers positions after the padding
# index, as RoBERTa does.
ESM2_TOKENS = 1024
# model types whose position ids start after the padding index
POSITIONS_AFTER_PADDING_TYPES = ("roberta", "xlm-roberta", "camembert", "esm")


def input_tokens(positions: int, model_type: str | None, pad_token_id: int | None) -> int:
    """The longest input, in tokens, of a config with `positions` position embeddings: all
    of them, or those after the padding index where the family numbers positions from
    there (RoBERTa's 514 hold 512 tokens, ESM-2's 1,026 hold 1,024)."""
    if model_type in POSITIONS_AFTER_PADDING_TYPES:
        return positions - (int(pad_token_id or 0) + 1)
    return positions


def position_embeddings(tokens: int, model_type: str, pad_token_id: int | None) -> int:
    """The position embeddings a config of `model_type` needs for inputs of `tokens` tokens
    (the inverse of `input_tokens`)."""
    if model_type in POSITIONS_AFTER_PADDING_TYPES:
        return tokens + int(pad_token_id or 0) + 1
    return tokens

# Position embeddings of every preset (BERT's 512): a model trained with a shorter
# --seq-len keeps them, so it can later be trained or used on longer inputs.
PRESET_POSITIONS = 512
MAX_POSITIONS = 8192  # `model init --max-length` bound: far above any preset's need

# The three families of the preset table, the other architectures the model layer
# supports (so that every adapter can be exercised on a fresh model), and the encoders of
# 2024-26 built with the transformers classes that carry their architecture.
FAMILIES: tuple[str, ...] = (
    "bert",
    "roberta",
    "modernbert",
    "xlm-roberta",
    "distilbert",
    "albert",
    "electra",
    "deberta-v2",
    "eurobert",
    "ettin",
    "mmbert",
    "neobert",
    "deberta-v3",
    "esm2",
)


@dataclass(frozen=True)
class Family:
    """What a preset family is built with, and what it stands for."""

    config_class: str  # the transformers config class (checked to be installed)
    description: str


FAMILY_INFO: dict[str, Family] = {
    "bert": Family("BertConfig", "BERT (Devlin et al. 2019): post-LN, absolute positions"),
    "roberta": Family("RobertaConfig", "RoBERTa (Liu et al. 2019): BERT's shape, BPE"),
    "modernbert": Family("ModernBertConfig", "ModernBERT (Warner et al. 2024): pre-LN, RoPE, "
                                             "GeGLU, local/global attention"),
    "xlm-roberta": Family("XLMRobertaConfig", "XLM-R (Conneau et al. 2020)"),
    "distilbert": Family("DistilBertConfig", "DistilBERT (Sanh et al. 2019)"),
    "albert": Family("AlbertConfig", "ALBERT (Lan et al. 2020): factorised embeddings"),
    "electra": Family("ElectraConfig", "ELECTRA generator (Clark et al. 2020)"),
    "deberta-v2": Family("DebertaV2Config", "DeBERTa-v2 (He et al. 2021): relative attention"),
    "eurobert": Family("EuroBertConfig", "EuroBERT (Boizard et al. 2025): Llama-style "
                                         "encoder, RoPE, SwiGLU, RMSNorm (native class)"),
    "ettin": Family("ModernBertConfig", "Ettin encoders (Weller et al. 2025): ModernBERT "
                                        "classes, [CLS]/[SEP] tokenizers"),
    "mmbert": Family("ModernBertConfig", "mmBERT (Marone et al. 2025): ModernBERT classes, "
                                         "Gemma-style <bos>/<eos> tokenizers"),
    "neobert": Family("EuroBertConfig", "NeoBERT's shape (Le Breton et al. 2025): deeper and "
                                        "narrower, RoPE, SwiGLU, pre-RMSNorm, built with the "
                                        "EuroBERT classes (NeoBERT checkpoints load with "
                                        "--trust-remote-code)"),
    "deberta-v3": Family("DebertaV2Config", "DeBERTa-v3 (He et al. 2023): DeBERTa-v2 "
                                            "classes, 256 position buckets; released "
                                            "checkpoints have no MLM head (trained by RTD)"),
    "esm2": Family("EsmConfig", "ESM-2 protein LMs (Lin et al. 2023): pre-LN, rotary "
                                "positions, the amino-acid alphabet; sizes tiny, 8m, 35m, "
                                "150m"),
}

# Families whose model uses rotary position embeddings (a recipe may set their RoPE θ).
ROPE_FAMILIES = ("modernbert", "ettin", "mmbert", "eurobert", "neobert")


def preset_positions(preset: str) -> int:
    """The longest input, in tokens, of a model built from `preset`: ESM-2's 1,024, else
    BERT's 512."""
    return ESM2_TOKENS if parse_preset(preset)[0] == "esm2" else PRESET_POSITIONS


def parse_preset(preset: str) -> tuple[str, Size]:
    """Split `FAMILY-SIZE` into a family and a Size; errors list the valid names."""
    family, _, size = preset.rpartition("-")
    family = family or "bert"
    if family == "esm2":
        if size not in ESM2_SIZES:
            raise ValueError(f"unknown model preset {preset!r}: ESM-2 sizes are "
                             f"{', '.join('esm2-' + s for s in ESM2_SIZES)}")
        return family, ESM2_SIZES[size]
    if size not in SIZES or family not in FAMILIES:
        valid = ", ".join(f"{f}-{s}" for f in FAMILIES[:3] for s in SIZES)
        raise ValueError(
            f"unknown model preset {preset!r}: use SIZE or FAMILY-SIZE with SIZE in "
            f"{list(SIZES)} and FAMILY in {list(FAMILIES)} (e.g. {valid})"
        )
    return family, SIZES[size]

def init_positions(init: str) -> int | None:
    """The sequence length a local --init model accepts (None: not a local folder)."""
    path = Path(init) / "config.json"
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # a hub name, or a damaged folder: loading it will say
    limit = values.get("max_position_embeddings") if isinstance(values, dict) else None
    if not isinstance(limit, int):
        return None
    return input_tokens(limit, values.get("model_type"), values.get("pad_token_id"))

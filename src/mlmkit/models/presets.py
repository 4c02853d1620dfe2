"""Named model presets: fresh, randomly initialised masked LMs sized for a laptop or a GPU.

A preset is `SIZE` or `FAMILY-SIZE` (e.g. `mini`, `roberta-small`, `modernbert-base`);
the family defaults to bert. The vocabulary, special token ids and maximum length come
from the tokenizer, so a model built here always matches the tokenizer it was built with.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlmkit.errors import InvalidArgument


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
}

# Families whose model uses rotary position embeddings (a recipe may set their RoPE θ).
ROPE_FAMILIES = ("modernbert", "ettin", "mmbert", "eurobert", "neobert")


def family_available(family: str) -> bool:
    """Whether the installed transformers has the classes `family` is built with."""
    import transformers

    return hasattr(transformers, FAMILY_INFO[family].config_class)


def check_family(family: str, what: str = "--model") -> None:
    """A one-line error when the installed transformers lacks `family`'s classes."""
    if not family_available(family):
        import transformers

        raise InvalidArgument(
            f"{what}: family {family!r} needs transformers.{FAMILY_INFO[family].config_class}, "
            f"which transformers {transformers.__version__} lacks: upgrade transformers "
            "(pip install -U transformers) or pick another family")


def parse_preset(preset: str) -> tuple[str, Size]:
    """Split `FAMILY-SIZE` into a family and a Size; errors list the valid names."""
    family, _, size = preset.rpartition("-")
    family = family or "bert"
    if size not in SIZES or family not in FAMILIES:
        valid = ", ".join(f"{f}-{s}" for f in FAMILIES[:3] for s in SIZES)
        raise ValueError(
            f"unknown model preset {preset!r}: use SIZE or FAMILY-SIZE with SIZE in "
            f"{list(SIZES)} and FAMILY in {list(FAMILIES)} (e.g. {valid})"
        )
    return family, SIZES[size]



def preset_config(preset: str, tokenizer, max_length: int = PRESET_POSITIONS):
    """The Hugging Face config of a preset, with vocabulary and special ids from `tokenizer`.

    `max_length` is the longest input (position embeddings); pretraining keeps the
    presets' `PRESET_POSITIONS` whatever its --seq-len, so a trained model can be used or
    trained further on longer inputs.
    """
    import transformers  # here, not at import: --help must not load it

    family, s = parse_preset(preset)
    if isinstance(max_length, bool) or not isinstance(max_length, int) or not (
            1 <= max_length <= MAX_POSITIONS):
        raise InvalidArgument(f"max_length={max_length!r} (--max-length) must be a whole number "
                              f"between 1 and {MAX_POSITIONS}")
    vocab = len(tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    common = dict(vocab_size=vocab, pad_token_id=pad)
    bos = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    eos = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    ids = dict(bos_token_id=bos, eos_token_id=eos)
    bert_like = dict(
        hidden_size=s.hidden,
        num_hidden_layers=s.layers,
        num_attention_heads=s.heads,
        intermediate_size=s.intermediate,
    )
    if family == "bert":
        return transformers.BertConfig(**common, **bert_like, max_position_embeddings=max_length)
    if family in ("roberta", "xlm-roberta"):
        cls = transformers.RobertaConfig if family == "roberta" else transformers.XLMRobertaConfig
        # RoBERTa's positions start after the padding index.
        return cls(**common, **ids, **bert_like, max_position_embeddings=max_length + pad + 1)
    if family == "modernbert":
        return transformers.ModernBertConfig(
            **common,
            **ids,
            cls_token_id=bos,
            sep_token_id=eos,
            hidden_size=s.hidden,
            num_hidden_layers=s.layers,
            num_attention_heads=s.heads,
            intermediate_size=s.intermediate * 3 // 4,  # GeGLU: two input projections
            max_position_embeddings=max_length,
            global_attn_every_n_layers=min(3, s.layers),
            local_attention=min(128, max_length),
        )
    if family in ("ettin", "mmbert"):
        return preset_config(f"modernbert-{size_name(s)}", tokenizer, max_length=max_length)
    if family == "distilbert":
        return transformers.DistilBertConfig(
            **common, dim=s.hidden, n_layers=s.layers, n_heads=s.heads, hidden_dim=s.intermediate,
            max_position_embeddings=max_length,
        )
    if family == "albert":
        return transformers.AlbertConfig(
            **common, **ids, **bert_like, embedding_size=max(64, s.hidden // 4),
            max_position_embeddings=max_length,
        )
    if family == "electra":
        return transformers.ElectraConfig(
            **common, **bert_like, embedding_size=s.hidden, max_position_embeddings=max_length,
        )
    if family in ("eurobert", "neobert"):
        check_family(family)
        # NeoBERT's shape: about twice the depth at the same width (28 × 768 against
        # BERT-base's 12 × 768); SwiGLU's three projections hold 8/3 × hidden.
        layers = s.layers * 2 if family == "neobert" else s.layers
        swiglu = (s.intermediate * 2 // 3 + 7) // 8 * 8
        return transformers.EuroBertConfig(
            **common, **ids, mask_token_id=tokenizer.mask_token_id, hidden_size=s.hidden,
            num_hidden_layers=layers, num_attention_heads=s.heads,
            num_key_value_heads=s.heads, head_dim=s.hidden // s.heads,
            intermediate_size=swiglu, max_position_embeddings=max_length,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        )
    if family == "deberta-v3":
        return transformers.DebertaV2Config(
            **common, **bert_like, max_position_embeddings=max_length, relative_attention=True,
            position_buckets=256, pos_att_type=["p2c", "c2p"], position_biased_input=False,
            norm_rel_ebd="layer_norm", share_att_key=True, max_relative_positions=-1,
        )
    return transformers.DebertaV2Config(
        **common, **bert_like, max_position_embeddings=max_length, relative_attention=True,
        position_buckets=64, pos_att_type=["p2c", "c2p"], position_biased_input=False,
    )


def size_name(size: Size) -> str:
    return next(name for name, s in SIZES.items() if s == size)


def build_mlm(preset: str, tokenizer, max_length: int = PRESET_POSITIONS, seed: int = 0):
    """A fresh masked LM (transformers model, random weights seeded by `seed`) for `preset`."""
    import torch
    import transformers  # here, not at import: --help must not load it

    config = preset_config(preset, tokenizer, max_length=max_length)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.AutoModelForMaskedLM.from_config(config)
    return model

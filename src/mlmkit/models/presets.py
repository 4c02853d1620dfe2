"""Named model presets: fresh, randomly initialised masked LMs sized for a laptop or a GPU.

A preset is `SIZE` or `FAMILY-SIZE` (e.g. `mini`, `roberta-small`, `modernbert-base`);
the family defaults to bert. The vocabulary, special token ids and maximum length come
from the tokenizer, so a model built here always matches the tokenizer it was built with.
"""

from __future__ import annotations

import torch
import transformers

from mlmkit.errors import InvalidArgument
from mlmkit.models.preset_table import (
    FAMILY_INFO,
    MAX_POSITIONS,
    SIZES,
    Size,
    parse_preset,
    position_embeddings,
    preset_positions,
)


def family_available(family: str) -> bool:
    """Whether the installed transformers has the classes `family` is built with."""
    return hasattr(transformers, FAMILY_INFO[family].config_class)


def check_family(family: str, what: str = "--model") -> None:
    """A one-line error when the installed transformers lacks `family`'s classes."""
    if not family_available(family):
        raise InvalidArgument(
            f"{what}: family {family!r} needs transformers.{FAMILY_INFO[family].config_class}, "
            f"which transformers {transformers.__version__} lacks: upgrade transformers "
            "(pip install -U transformers) or pick another family")


def preset_config(preset: str, tokenizer, max_length: int | None = None):
    """The Hugging Face config of a preset, with vocabulary and special ids from `tokenizer`.

    `max_length` is the longest input (position embeddings); pretraining keeps the
    family's positions (`preset_positions`) whatever its --seq-len, so a trained model can be used or
    trained further on longer inputs.
    """
    family, s = parse_preset(preset)
    if max_length is None:  # the family's own: ESM-2's 1,024, else BERT's 512
        max_length = preset_positions(preset)
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
        return cls(**common, **ids, **bert_like, max_position_embeddings=position_embeddings(
            max_length, "roberta", pad))
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
    if family == "esm2":
        return esm2_config(s, tokenizer, max_length)
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


def esm2_config(s: Size, tokenizer, max_length: int):
    """ESM-2's configuration: pre-LN layers, rotary positions, token dropout (the embedding
    rescaled by the share of masked tokens, as ESM-2 was trained), a final layer norm.
    `max_length` counts <cls> and <eos> (ESM-2's 1,024: 1,022 residues); the config holds
    two positions more, numbered after the padding index as in the released models."""
    return transformers.EsmConfig(
        vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
        mask_token_id=tokenizer.mask_token_id, hidden_size=s.hidden,
        num_hidden_layers=s.layers, num_attention_heads=s.heads,
        intermediate_size=s.intermediate, hidden_act="gelu",
        max_position_embeddings=position_embeddings(max_length, "esm", tokenizer.pad_token_id),
        position_embedding_type="rotary", token_dropout=True,
        emb_layer_norm_before=False, layer_norm_eps=1e-5,
    )


def size_name(size: Size) -> str:
    return next(name for name, s in SIZES.items() if s == size)


def build_mlm(preset: str, tokenizer, max_length: int | None = None, seed: int = 0):
    """A fresh masked LM (transformers model, random weights seeded by `seed`) for `preset`
    (`max_length` None: the family's default positions)."""
    config = preset_config(preset, tokenizer, max_length=max_length)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.AutoModelForMaskedLM.from_config(config)
    return model

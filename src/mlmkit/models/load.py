"""Load any Hugging Face masked LM with its tokenizer, from a directory or a hub name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import transformers

from mlmkit.errors import MlmkitError
from mlmkit.models.adapters import SUPPORTED_ARCHITECTURES

MASK_SPELLINGS = ("[MASK]", "<mask>")


@dataclass
class MLM:
    """A masked LM with its tokenizer: what every mlmkit feature takes."""

    model: transformers.PreTrainedModel
    tokenizer: transformers.PreTrainedTokenizerBase
    name: str = "model"

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def max_length(self) -> int:
        """Longest input the model accepts, in tokens (positions minus any offset)."""
        return model_max_length(self.model, self.tokenizer)


def model_max_length(model, tokenizer) -> int:
    config = model.config
    limit = getattr(config, "max_position_embeddings", None)
    if limit is not None and config.model_type in ("roberta", "xlm-roberta", "camembert"):
        limit -= (config.pad_token_id or 0) + 1  # positions start after the padding index
    if getattr(config, "model_type", "") == "deberta-v2" and not getattr(
        config, "position_biased_input", True
    ):
        limit = None  # relative positions only: the tokenizer's limit is the model's
    tok_limit = getattr(tokenizer, "model_max_length", None)
    if tok_limit is not None and tok_limit < 1_000_000:
        limit = tok_limit if limit is None else min(limit, tok_limit)
    return int(limit or 512)


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    names = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16,
             "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16}
    if dtype not in names:
        raise MlmkitError(f"unknown dtype {dtype!r}: use one of {sorted(names)}")
    return names[dtype]


def resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def check_mask_token(tokenizer, name: str) -> None:
    if tokenizer.mask_token is None or tokenizer.mask_token_id is None:
        raise MlmkitError(
            f"the tokenizer of {name!r} has no mask token: a masked LM needs one "
            f"(e.g. {' or '.join(MASK_SPELLINGS)}); set tokenizer.mask_token or use a "
            f"masked-LM checkpoint"
        )


def load_mlm(
    name_or_path: str | Path,
    device: str | torch.device | None = "auto",
    dtype: str | torch.dtype | None = None,
) -> MLM:
    """Load a masked LM and its tokenizer (`bert-base-uncased`, `./runs/x/final`, ...).

    Errors name what is wrong: a missing path, a checkpoint that is not a masked LM
    (with the supported architectures), a tokenizer without a mask token.
    """
    name = str(name_or_path)
    path = Path(name)
    looks_local = path.exists() or name.startswith((".", "/", "~")) or name.count("/") > 1
    if looks_local and not path.exists():
        raise MlmkitError(f"model path {name!r} does not exist: pass a directory saved with "
                          "save_pretrained or a Hugging Face hub name")
    if path.is_dir() and not (path / "config.json").exists():
        raise MlmkitError(f"{name!r} has no config.json: it is not a saved Hugging Face model")
    try:
        config = transformers.AutoConfig.from_pretrained(name)
    except OSError as error:
        raise MlmkitError(f"cannot load a model config from {name!r}: {error}") from error
    mlm_types = transformers.models.auto.modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
    if config.model_type not in mlm_types:
        raise MlmkitError(
            f"{name!r} is a {config.model_type!r} model, which has no masked-LM head in "
            f"transformers; mlmkit's fast path supports {', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    tokenizer = transformers.AutoTokenizer.from_pretrained(name)
    check_mask_token(tokenizer, name)
    kwargs = {}
    if dtype is not None:
        kwargs["dtype"] = resolve_dtype(dtype)
    model = transformers.AutoModelForMaskedLM.from_pretrained(name, config=config, **kwargs)
    model.to(resolve_device(device)).eval()
    return MLM(model=model, tokenizer=tokenizer, name=name)


def as_mlm(model, tokenizer=None, **load_kwargs) -> MLM:
    """Accept an `MLM`, a name or path, or a model with its tokenizer."""
    if isinstance(model, MLM):
        return model
    if isinstance(model, (str, Path)):
        return load_mlm(model, **load_kwargs)
    if isinstance(model, tuple) and len(model) == 2:
        model, tokenizer = model
    if tokenizer is None:
        raise MlmkitError("pass a tokenizer with the model, or an MLM from load_mlm()")
    check_mask_token(tokenizer, getattr(model, "name_or_path", "model"))
    return MLM(model=model, tokenizer=tokenizer, name=getattr(model, "name_or_path", "model"))

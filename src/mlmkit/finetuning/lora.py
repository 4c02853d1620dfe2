"""LoRA through `peft`: low-rank adapters on the attention projections, saved as an adapter
that `peft` loads (`PeftModel.from_pretrained(base, dir)`), or merged into a full model."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from mlmkit.core.checks import count, positive, probability
from mlmkit.errors import InvalidArgument
from mlmkit.extras import require

# The attention projections each family calls by these names (query and value, as in the
# LoRA paper); other families: pass target modules.
DEFAULT_TARGETS = {
    "bert": ("query", "value"), "roberta": ("query", "value"), "xlm-roberta": ("query", "value"),
    "camembert": ("query", "value"), "electra": ("query", "value"), "albert": ("query", "value"),
    "distilbert": ("q_lin", "v_lin"), "deberta-v2": ("query_proj", "value_proj"),
    "modernbert": ("Wqkv",),
}


@dataclass(frozen=True)
class LoraOptions:
    """Rank, scaling (alpha) and the modules that get adapters (None: the family's default)."""

    rank: int = 8
    alpha: float = 16.0
    targets: tuple[str, ...] | None = None
    dropout: float = 0.0

    def check(self) -> LoraOptions:
        count("lora_rank", self.rank, 1, 4096)
        positive("lora_alpha", self.alpha)
        probability("lora_dropout", self.dropout)
        return self


def peft_module():
    """peft, which the extra mlmkit[finetune] installs (a one-line error without it)."""
    return require("peft", extra="finetune", feature="LoRA fine-tuning (--lora)")


def add_lora(model, options: LoraOptions, method: str):
    """`model` wrapped by peft with LoRA adapters (only they, and a new head, train)."""
    peft = peft_module()

    model_type = model.config.model_type
    targets = list(options.targets or DEFAULT_TARGETS.get(model_type, ()))
    if not targets:
        raise InvalidArgument(f"lora_targets (--lora-targets): mlmkit knows no attention "
                              f"module names for {model_type!r}; name them, e.g. query,value")
    names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    unknown = [t for t in targets if t not in names]
    if unknown:
        raise InvalidArgument(f"lora_targets (--lora-targets) {unknown}: no such module in "
                              f"{model_type!r}; e.g. {sorted(n for n in names if n)[:12]}")
    save = None
    if method == "head":
        save = [n for n in ("classifier", "score", "pooler") if n in names]
    config = peft.LoraConfig(r=options.rank, lora_alpha=options.alpha, target_modules=targets,
                             lora_dropout=options.dropout, modules_to_save=save)
    with warnings.catch_warnings():  # peft calls a transformers name deprecated in v5
        warnings.simplefilter("ignore", FutureWarning)
        return peft.get_peft_model(model, config)


def base_of(model):
    """The transformers model under a peft wrapper (the model itself otherwise)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model

"""Per-architecture adapters: the encoder part and the MLM-head part of each HF masked LM.

The split is what lets `masked_logits` run the head only where predictions are needed.
Each adapter is two small functions, registered under the config's `model_type`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Adapter:
    """How to run one architecture in two halves."""

    encode: Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]
    """(model, input_ids [B, L], attention_mask [B, L]) -> hidden states [B, L, d]."""
    head: Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]
    """(model, hidden states [n, d]) -> logits [n, V]."""


def _encoder(attribute: str):
    def encode(model, input_ids, attention_mask):
        encoder = getattr(model, attribute)
        return encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    return encode


def _distilbert_head(model, hidden):
    hidden = model.activation(model.vocab_transform(hidden))
    return model.vocab_projector(model.vocab_layer_norm(hidden))


def _electra_head(model, hidden):
    return model.generator_lm_head(model.generator_predictions(hidden))


def _deberta_v2_head(model, hidden):
    if model.legacy:
        return model.cls(hidden)
    return model.lm_predictions(hidden, model.deberta.embeddings.word_embeddings)


def _modernbert_head(model, hidden):
    return model.decoder(model.head(hidden))


ADAPTERS: dict[str, Adapter] = {
    "bert": Adapter(_encoder("bert"), lambda m, h: m.cls(h)),
    "roberta": Adapter(_encoder("roberta"), lambda m, h: m.lm_head(h)),
    "xlm-roberta": Adapter(_encoder("roberta"), lambda m, h: m.lm_head(h)),
    "camembert": Adapter(_encoder("roberta"), lambda m, h: m.lm_head(h)),
    "distilbert": Adapter(_encoder("distilbert"), _distilbert_head),
    "albert": Adapter(_encoder("albert"), lambda m, h: m.predictions(h)),
    "electra": Adapter(_encoder("electra"), _electra_head),
    "deberta-v2": Adapter(_encoder("deberta"), _deberta_v2_head),
    "modernbert": Adapter(_encoder("model"), _modernbert_head),
    "eurobert": Adapter(_encoder("model"), lambda m, h: m.lm_head(h)),
    "esm": Adapter(_encoder("esm"), lambda m, h: m.lm_head(h)),
}

SUPPORTED_ARCHITECTURES = tuple(sorted(ADAPTERS))


def adapter_for(model: torch.nn.Module) -> Adapter | None:
    """The adapter of `model`'s architecture, or None (the caller falls back to full logits)."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    return ADAPTERS.get(model_type)

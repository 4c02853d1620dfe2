"""The two ways to fine-tune: a classification head, or a cloze prompt through the MLM head.

- `head`: `AutoModelForSequenceClassification` built from the masked LM's config, its encoder
  weights copied from the masked LM (the head is new); cross-entropy, or MSE for regression.
- `prompt` (PET / LM-BFF): no new weights. The prompt's mask position goes through the
  primitive (`masked_logits`: the encoder once, the MLM head only at the mask) and the
  logits of the verbalizer's words are the class scores.
"""

from __future__ import annotations

import copy
import inspect

import torch
from transformers import AutoModelForSequenceClassification

from mlmkit.core.checks import choice
from mlmkit.errors import InvalidArgument, ModelError
from mlmkit.models.load import classifier_from_checkpoint
from mlmkit.models.primitive import masked_logits

METHODS = ("head", "prompt")


def build_classifier(mlm, label_names: list[str] | None, seed: int):
    """A sequence classifier with `mlm`'s encoder weights and a new head (seeded).

    A masked LM loaded from a checkpoint starts as a Hugging Face script's classifier
    starts (`set_seed(seed)`, then `AutoModelForSequenceClassification.from_pretrained`):
    the checkpoint's pooler, which the masked LM drops, and the same draws for the head.
    A checkpoint that is itself a classifier still gets a new head (drawn from the config,
    its pooler kept). The masked LM's weights in memory are then copied over the encoder."""
    config = copy.deepcopy(mlm.model.config)
    if label_names is None:
        config.num_labels, config.problem_type = 1, "regression"
    else:
        config.num_labels = len(label_names)
        config.problem_type = "single_label_classification"
        config.id2label = dict(enumerate(label_names))
        config.label2id = {name: i for i, name in enumerate(label_names)}
    config.architectures = None
    weights = mlm.model.state_dict()
    torch.manual_seed(seed)
    pretrained = _from_checkpoint(mlm, config)
    model = pretrained[0] if pretrained is not None else None
    if model is not None:
        new = set(model.state_dict()) - set(weights)  # the pooler and the head
        head = {k for k in new if "pooler" not in k}
        if not head <= pretrained[1]:  # a classifier checkpoint: its head is not new
            torch.manual_seed(seed)
            model = _from_config(mlm, config)
            model.load_state_dict({k: v for k, v in pretrained[0].state_dict().items()
                                   if "pooler" in k}, strict=False)
    if model is None:
        model = _from_config(mlm, config)
    prefix = model.base_model_prefix
    missing, _ = model.load_state_dict(weights, strict=False)
    lost = [k for k in missing if k.startswith(prefix + ".") and "pooler" not in k]
    if lost:
        raise ModelError(f"{mlm.name!r}: {len(lost)} encoder weight(s) of the classifier are not "
                         f"in the masked LM (e.g. {lost[0]}); the architectures do not match")
    return model.to(mlm.device)


def _from_checkpoint(mlm, config):
    source = getattr(mlm, "source", None)
    if not source:
        return None
    remote = type(mlm.model).__module__.startswith("transformers_modules")  # trusted at load
    return classifier_from_checkpoint(source, config, trust_remote_code=remote)


def _from_config(mlm, config):
    try:
        return AutoModelForSequenceClassification.from_config(config)
    except ValueError as error:
        raise ModelError(f"{mlm.name!r} ({config.model_type}) has no sequence-classification "
                         "model in transformers: use --method prompt") from error


def takes_segments(model) -> bool:
    """Whether the classifier reads token type ids (BERT's segments: which text of a pair a
    token is from), as the Trainer passes them to a model whose forward takes them."""
    return "token_type_ids" in inspect.signature(model.forward).parameters


def head_logits(model, batch) -> torch.Tensor:
    """A sequence classifier's logits of a padded batch, with its token type ids where the
    batch has them."""
    extra = {"token_type_ids": batch["token_type_ids"]} if "token_type_ids" in batch else {}
    return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                 **extra).logits


def head_loss(model, batch, regression: bool) -> torch.Tensor:
    logits = head_logits(model, batch)
    if regression:
        return torch.nn.functional.mse_loss(logits.squeeze(-1).float(), batch["labels"].float())
    return torch.nn.functional.cross_entropy(logits.float(), batch["labels"])


def head_outputs(model, batch, regression: bool) -> torch.Tensor:
    """Predicted class indices (or values) of a batch."""
    logits = head_logits(model, batch)
    return logits.squeeze(-1).float() if regression else logits.argmax(dim=-1)


def prompt_logits(model, batch, word_ids: torch.Tensor) -> torch.Tensor:
    """[B, n_labels] MLM logits of the verbalizer words at each prompt's mask."""
    logits = masked_logits(model, batch["input_ids"], batch["attention_mask"],
                           batch["positions"])
    return logits.index_select(1, word_ids).float()


def prompt_loss(model, batch, word_ids) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(prompt_logits(model, batch, word_ids),
                                             batch["labels"])


def prompt_outputs(model, batch, word_ids) -> torch.Tensor:
    return prompt_logits(model, batch, word_ids).argmax(dim=-1)


def check_method(method: str, regression: bool, mlm) -> None:
    choice("method", method, METHODS)
    if method == "prompt":
        if regression:
            raise InvalidArgument("method='prompt' (--method prompt) classifies through a "
                                  "verbalizer; a regression task needs --method head")
        if mlm is None:
            return
        get = getattr(mlm.model, "get_output_embeddings", None)
        if get is None or get() is None:
            raise ModelError(f"{mlm.name!r} has no MLM head: the prompt method needs a masked "
                             "LM (use --method head)")

"""Fill-mask examples from a freshly trained model: a quick look at what it learned."""

from __future__ import annotations

import torch

from mlmkit.models import MLM, masked_log_probs

EXAMPLE_TEMPLATES = (
    "Return a {mask} of the items in the list.",
    "Raise a {mask} if the file does not exist.",
    "This module provides functions for working with regular {mask}.",
    "If the value is not found, the function returns {mask}.",
    "The {mask} argument must be a string.",
    "Close the {mask} when you are done reading from it.",
)


def example_texts(tokenizer, count: int) -> list[str]:
    return [t.format(mask=tokenizer.mask_token) for t in EXAMPLE_TEMPLATES[:count]]


@torch.no_grad()
def fill_mask_examples(mlm: MLM, count: int = 4, top_k: int = 3) -> list[tuple[str, list]]:
    """(text, [(token, probability), ...]) for `count` fixed sentences with one mask each."""
    texts = example_texts(mlm.tokenizer, count)
    if not texts:
        return []
    try:
        from mlmkit.generate.fill_mask import fill_mask
    except ImportError:
        fill_mask = None
    if fill_mask is not None:
        try:
            results = fill_mask(mlm, texts, top_k=top_k)
            return [(text, _pairs(result)) for text, result in zip(texts, results, strict=True)]
        except (TypeError, AttributeError, KeyError):  # an unexpected result shape: fall back
            pass
    model, tokenizer = mlm.model.eval(), mlm.tokenizer
    device = next(model.parameters()).device
    batch = tokenizer(texts, padding=True, return_tensors="pt").to(device)
    positions = batch["input_ids"] == tokenizer.mask_token_id
    probs = masked_log_probs(model, batch["input_ids"], batch["attention_mask"], positions).exp()
    top = probs.topk(top_k, dim=-1)
    rows = []
    for text, values, ids in zip(texts, top.values.tolist(), top.indices.tolist(), strict=True):
        rows.append((text, [(tokenizer.decode([i]).strip(), p) for i, p in zip(ids, values,
                                                                                strict=True)]))
    return rows


def _pairs(result) -> list[tuple[str, float]]:
    """Normalise a fill_mask result for one text into (token, probability) pairs."""
    candidates = getattr(result, "candidates", result)
    if candidates and isinstance(candidates[0], list):  # one list per mask
        candidates = candidates[0]
    pairs = []
    for c in candidates:
        if isinstance(c, dict):
            pairs.append((str(c.get("token_str", c.get("token"))), float(c.get("score", 0.0))))
        elif isinstance(c, (tuple, list)):
            pairs.append((str(c[0]), float(c[1])))
        else:
            token = getattr(c, "token_str", None) or getattr(c, "token", None)
            score = getattr(c, "score", None)
            if score is None:
                score = getattr(c, "probability", 0.0)
            pairs.append((str(token), float(score)))
    return pairs

"""Fill-mask examples from a freshly trained model: a quick look at what it learned."""

from __future__ import annotations

from mlmkit.generation.fill_mask import fill_mask
from mlmkit.models import LoadedMLM

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


def fill_mask_examples(mlm: LoadedMLM, count: int = 4, top_k: int = 3) -> list[tuple[str, list]]:
    """(text, [(token, probability), ...]) for `count` fixed sentences with one mask each."""
    texts = example_texts(mlm.tokenizer, count)
    if not texts:
        return []
    results = fill_mask(mlm, texts, top_k=top_k)
    return [(text, [(c.token.strip(), c.score) for c in result.masks[0].candidates])
            for text, result in zip(texts, results, strict=True)]

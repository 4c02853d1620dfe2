"""What a policy does to one text: the tokens, what each became, and which are predicted."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mlmkit.core import checks
from mlmkit.errors import MlmkitError


@dataclass
class PreviewToken:
    original: str  # the token as the tokenizer spells it
    shown: str  # what the model sees ([MASK], a random token, or the token kept)
    predicted: bool  # True where the loss is computed (labels != -100)
    fate: str  # "mask", "random", "keep" or "" (not chosen)


def preview_masking(policy, tokenizer, text: str, *, seed: int = 0, step: int = 0):
    """Tokenize `text` (with special tokens), mask it once, and return one entry per token
    plus the `MaskedBatch`."""
    if not text.strip():
        raise MlmkitError("the text to preview is empty")
    checks.count("step", step, 0)
    checks.count("seed", seed, 0, 2**63 - 1)
    encoded = tokenizer(text, return_tensors="pt", verbose=False)
    ids = encoded["input_ids"]
    words = encoded.word_ids(0) if getattr(encoded, "encodings", None) else None
    starts = None
    if words is not None:
        flags = [w is None or k == 0 or w != words[k - 1] for k, w in enumerate(words)]
        starts = torch.tensor([flags])
    out = policy(ids, step=step, seed=seed, word_starts=starts)
    tokens = tokenizer.convert_ids_to_tokens(ids[0].tolist())
    shown = tokenizer.convert_ids_to_tokens(out.input_ids[0].tolist())
    entries = []
    for k, (original, now) in enumerate(zip(tokens, shown, strict=True)):
        predicted = bool(out.mask[0, k])
        fate = ""
        if predicted:
            new_id = int(out.input_ids[0, k])
            fate = ("mask" if new_id == policy.vocabulary.mask_id
                    else "keep" if new_id == int(ids[0, k]) else "random")
        entries.append(PreviewToken(original=original, shown=now, predicted=predicted, fate=fate))
    return entries, out

"""The runtime keywords every probe and bias entry point takes, checked before any work.

`model` may be a loaded `MLM`, a name or path, or a `(model, tokenizer)` pair; `device`,
`precision` and `threads` go to `mlmkit.models.prepare_mlm` (the one resolver every
inference entry point uses); `batch_tokens` is checked by the batching layer's rule.
"""

from __future__ import annotations

from mlmkit.engine.batching import check_budget
from mlmkit.models.load import prepare_mlm


def check_batch_tokens(batch_tokens) -> int | None:
    return check_budget(batch_tokens)


def prepare_model(model, *, device=None, precision: str | None = "auto", threads=None,
                  batch_tokens=None):
    """(MLM on its device, resolved precision 'fp32'/'bf16'); threads set."""
    check_batch_tokens(batch_tokens)
    return prepare_mlm(model, device=device, precision=precision, threads=threads)

"""mlmkit: masked language models — pretrain, score, fill, generate, probe and audit.

The public functions are imported lazily, so `import mlmkit` stays fast and a command
pulls in only the stage it needs.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_PUBLIC = {
    "MLM": "mlmkit.models",
    "load_mlm": "mlmkit.models",
    "build_mlm": "mlmkit.models",
    "masked_logits": "mlmkit.models",
    "masked_log_probs": "mlmkit.models",
    "train_tokenizer": "mlmkit.tokenizer",
    "python_docs": "mlmkit.corpus.python_docs",
    "read_corpus": "mlmkit.corpus",
    "fill_mask": "mlmkit.generate",
    "build_policy": "mlmkit.masking",
    "score": "mlmkit.scoring",
    "rescore": "mlmkit.scoring",
    "generate": "mlmkit.generate",
    "infill": "mlmkit.generate",
    "elbo": "mlmkit.generate",
    "pretrain": "mlmkit.train",
    "PretrainConfig": "mlmkit.train",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'mlmkit' has no attribute {name!r}")

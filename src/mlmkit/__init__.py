"""mlmkit: masked language models — pretrain, score, fill, generate, probe and audit.

Everything public is imported lazily, so `import mlmkit` is fast (no torch) and a command
pulls in only the stage it needs. The rule (docs/API.md):

- `mlmkit.NAME` for a public function or class (`mlmkit.score`, `mlmkit.fill_mask`,
  `mlmkit.load_mlm`, ...) is that object, imported on first use;
- `mlmkit.NAME` for a subpackage (`mlmkit.scoring`, `mlmkit.probe`, `mlmkit.bias`,
  `mlmkit.errors`, ...) is that module, imported on first use, whether or not it was
  imported by name before;
- one name is both: `mlmkit.generate` is always the subpackage `mlmkit.generate`, and the
  subpackage is callable: `mlmkit.generate(model, prompt, ...)` calls
  `mlmkit.generation.generate` (whose signature and docstring are the reference).
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# Public functions and classes: name -> the module that defines (or re-exports) it.
_FUNCTIONS = {
    # the bound model: load once, then call its methods
    "load": "mlmkit.mlm",
    "MLM": "mlmkit.mlm",
    # models
    "load_mlm": "mlmkit.models",
    "as_mlm": "mlmkit.models",
    "build_mlm": "mlmkit.models",
    "masked_logits": "mlmkit.models",
    "masked_log_probs": "mlmkit.models",
    "model_info": "mlmkit.models",
    # data
    "train_tokenizer": "mlmkit.tokenizer",
    "python_docs": "mlmkit.corpus.python_docs",
    "read_corpus": "mlmkit.corpus",
    "corpus_stats": "mlmkit.corpus",
    "build_policy": "mlmkit.masking",
    # scoring
    "score": "mlmkit.mlm",
    "rescore": "mlmkit.mlm",
    "evaluate_pairs": "mlmkit.mlm",
    # fill and generate
    "fill_mask": "mlmkit.mlm",
    "generate": "mlmkit.mlm",
    "infill": "mlmkit.mlm",
    "elbo": "mlmkit.mlm",
    # probes and bias audits
    "cloze_classify": "mlmkit.mlm",
    "rank_statements": "mlmkit.mlm",
    "knowledge_probe": "mlmkit.mlm",
    "audit": "mlmkit.mlm",
    # embeddings
    "embed": "mlmkit.mlm",
    "embed_sparse": "mlmkit.mlm",
    # proteins
    "variant_effects": "mlmkit.mlm",
    "design_binders": "mlmkit.mlm",
    "protein_tokenizer": "mlmkit.protein",
    "dna_tokenizer": "mlmkit.protein",
    # training
    "pretrain": "mlmkit.evaluation.training",
    "PretrainConfig": "mlmkit.pretraining",
    "finetune": "mlmkit.finetuning",
    # a fine-tuned classifier: predictions and metrics
    "predict": "mlmkit.finetuning",
    "evaluate_classifier": "mlmkit.finetuning",
    "load_classifier": "mlmkit.finetuning",
    "train_embeddings": "mlmkit.finetuning",
    # downstream evaluation
    "evaluate_suite": "mlmkit.evaluation", "compare_suites": "mlmkit.evaluation",
}

# Other spellings of a public function: `mlmkit.fill` is the CLI's name of `fill_mask`.
_ALIASES = {"fill": "fill_mask"}

# Subpackages and modules reachable as attributes without importing them by name.
_SUBPACKAGES = ("errors", "core", "models", "tokenizer", "engine", "masking", "corpus", "scoring",
                "generation", "probe", "bias", "embeddings", "protein", "training", "pretraining", "finetuning",
                "evaluation", "mlm")

__all__ = sorted({*_FUNCTIONS, *_ALIASES, *_SUBPACKAGES})


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"mlmkit.{name}")
    target = _ALIASES.get(name, name)
    if target in _FUNCTIONS:
        return getattr(importlib.import_module(_FUNCTIONS[target]), target)
    raise AttributeError(f"module 'mlmkit' has no attribute {name!r}; the public names are "
                         "listed in mlmkit.__all__ (docs/API.md)")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

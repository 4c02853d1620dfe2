"""One bound model: `mlmkit.load(...)` resolves the runtime once and returns an `MLM` whose
methods are the features.

Device, precision, threads and the token budget are properties of the model in use, not of
each call: resolving them again in every entry point let two features treat the
same arguments differently. `load` runs the one resolver (`mlmkit.models.prepare_mlm`)
once; each method then takes task options only and hands the bound model to the task
function, whose resolver sees a bound model and uses it as it is. The free functions
(`mlmkit.score(model_or_path, texts, device=...)`) are shims over `load` and the method, so
the Python API, the CLI and the server share one path.

The rule for a model passed in (an `MLM`, a `(model, tokenizer)` pair): it stays on its
device unless `device` names another, and then it is moved there (as a transformers
pipeline or a sentence-transformers model does) — the caller's module moves with it.
"""

from __future__ import annotations

import difflib
import inspect
from dataclasses import dataclass, fields
from pathlib import Path

import mlmkit.generation as generation
from mlmkit import bias, embeddings, probe, protein, scoring
from mlmkit.embeddings.st_directory import is_st_directory
from mlmkit.engine.batching import check_budget
from mlmkit.errors import InvalidArgument, ModelError, UnknownOption
from mlmkit.models.load import LoadedMLM, prepare_mlm

# Keywords that belong to `load`, not to a feature call: set once for the model.
RUNTIME_KEYWORDS = ("device", "precision", "threads", "trust_remote_code")

# Features that run the encoder alone: a checkpoint without a trained MLM head serves them.
ENCODER_ONLY = ("embed",)

# method name -> the task function it calls. The free function keeps the task function's
# name (`mlmkit.fill_mask(model, ...)` is `mlmkit.load(model).fill(...)`).
FEATURES = {
    "score": scoring.score,
    "rescore": scoring.rescore,
    "evaluate_pairs": scoring.evaluate_pairs,
    "fill": generation.fill_mask,
    "generate": generation.generate,
    "infill": generation.infill,
    "elbo": generation.elbo,
    "classify": probe.cloze_classify,
    "rank": probe.rank_statements,
    "probe": probe.knowledge_probe,
    "audit": bias.audit,
    "embed": embeddings.embed,
    "embed_sparse": embeddings.embed_sparse,
    "variant_effects": protein.variant_effects,
    "design_binders": protein.design_binders,
}


# Keywords other libraries use for a batch of rows or texts: mlmkit's budget is in tokens.
ROW_BATCH_KEYWORDS = ("batch_size", "batch_rows", "per_device_batch_size", "bs")


def _check_options(name: str, task, options: dict) -> None:
    """An unknown keyword of a feature call, refused in one line naming the close ones
    before any model loads (Python's bare TypeError came after the load and named nothing;
    `batch_size=`, the habit of other libraries, is pointed at `batch_tokens`)."""
    parameters = inspect.signature(task).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    known = [key for key in parameters if key not in RUNTIME_KEYWORDS][1:]
    for key in options:
        if key in parameters:
            continue
        unexpected = f"{name}() got an unexpected keyword argument {key!r}"
        if key in ROW_BATCH_KEYWORDS:
            raise UnknownOption(f"{unexpected}: batches are cut by padded tokens, not rows; "
                                "pass batch_tokens=N (e.g. 8192), or leave it None to size "
                                "it for the model and memory")
        close = difflib.get_close_matches(key, known, n=3)
        hint = f"did you mean {' or '.join(close)}?" if close else \
            f"its options are {', '.join(known)}"
        raise UnknownOption(f"{unexpected}: {hint}")


def _task_parameters(task) -> list[inspect.Parameter]:
    """The task function's parameters after the model, less the runtime keywords."""
    params = list(inspect.signature(task).parameters.values())[1:]
    return [p for p in params if p.name not in RUNTIME_KEYWORDS]


def _feature(name: str):
    """The method `name`: it calls its task function with the bound model and the call's
    task options. Its signature is the task function's, so help() and editors show the
    real options."""
    task = FEATURES[name]
    takes_budget = "batch_tokens" in inspect.signature(task).parameters

    def method(self, *args, **options):
        if self.untrained_head and not self.head_allowed and name not in ENCODER_ONLY:
            raise ModelError(f"{self.name!r} has no trained MLM head ({len(self.untrained_head)} "
                             f"head weight(s) missing): MLM.{name}() would give noise; use "
                             ".embed(), or load with allow_untrained_head=True "
                             "(--allow-untrained-head) to use the random head anyway")
        given = [key for key in RUNTIME_KEYWORDS if key in options]
        if given:
            key = given[0]
            raise InvalidArgument(f"MLM.{name}() takes task options only: {key}= is the "
                                  f"model's, set once with mlmkit.load(model, {key}=...)")
        _check_options(f"MLM.{name}", task, options)
        if takes_budget and options.get("batch_tokens") is None:
            options["batch_tokens"] = self.batch_tokens
        return task(self, *args, **options)

    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    method.__signature__ = inspect.Signature([self_param, *_task_parameters(task)])
    method.__name__ = method.__qualname__ = name
    method.__doc__ = task.__doc__
    return method


@dataclass(repr=False, eq=False)
class MLM(LoadedMLM):
    """A masked LM bound to its runtime (device, precision, threads, token budget).

    Made by `mlmkit.load`. Methods: `score`, `rescore`, `evaluate_pairs`, `fill`,
    `generate`, `infill`, `elbo`, `classify`, `rank`, `probe`, `audit`, `embed`,
    `embed_sparse`, `variant_effects`, `design_binders`, and `finetune` and
    `train_embeddings` (trained copies); each takes the task's options only. `.model` and
    `.tokenizer` are the transformers objects.
    """

    score = _feature("score")
    rescore = _feature("rescore")
    evaluate_pairs = _feature("evaluate_pairs")
    fill = _feature("fill")
    generate = _feature("generate")
    infill = _feature("infill")
    elbo = _feature("elbo")
    classify = _feature("classify")
    rank = _feature("rank")
    probe = _feature("probe")
    audit = _feature("audit")
    embed = _feature("embed")
    embed_sparse = _feature("embed_sparse")
    variant_effects = _feature("variant_effects")
    design_binders = _feature("design_binders")

    def finetune(self, task: str = "sst2", **options):
        """Fine-tune this model on a classification or regression task: `mlmkit.finetune(
        self, task, **options)` (its docstring lists the options), in the bound device,
        precision and threads. The trained classifier is written to `run_dir` and its
        scores come back in the result."""
        import mlmkit  # the lazy facade: mlmkit.finetuning is a floor above this one

        self._check_task_options("finetune", options)
        options.setdefault("batch_tokens", self.batch_tokens)
        return mlmkit.finetune(self, task, device=str(self.device), precision=self.precision,
                               threads=self.threads, **options)

    def _check_task_options(self, name: str, options: dict) -> None:
        given = [key for key in RUNTIME_KEYWORDS if key in options]
        if given:
            raise InvalidArgument(f"MLM.{name}() takes task options only: "
                                  f"{given[0]}= is the model's, set once with "
                                  f"mlmkit.load(model, {given[0]}=...)")

    def train_embeddings(self, train, **options):
        """Fine-tune this model into a sentence encoder: `mlmkit.train_embeddings(self,
        train, **options)` (its docstring lists the options). Training sits on a floor above
        the bound model, so the method reaches it through the lazy `mlmkit` facade; the
        model keeps its device, and the trained copy comes back in the result (`.model`)."""
        import mlmkit  # the lazy facade: mlmkit.finetuning is a floor above this one

        self._check_task_options("train_embeddings", options)
        options.setdefault("batch_tokens", self.batch_tokens)
        return mlmkit.train_embeddings(self, train, device=str(self.device),
                                       precision=self.precision, threads=self.threads,
                                       **options)

    head_allowed: bool = False
    """Whether the caller accepted a random MLM head (`allow_untrained_head=True`); without
    it, a checkpoint loaded without its head (a sentence-transformers folder) serves only the
    encoder-only features."""

    def __repr__(self) -> str:
        return (f"MLM({self.name!r}, {self.model.config.model_type}, device={self.device}, "
                f"precision={self.precision!r}, threads={self.threads}, "
                f"batch_tokens={self.batch_tokens})")


def load(model, *, tokenizer=None, device=None, precision: str | None = "auto",
         threads: int | None = None, batch_tokens: int | None = None,
         trust_remote_code: bool | None = None, allow_untrained_head: bool = False) -> MLM:
    """A masked LM bound to its runtime, ready for every feature.

    `model`: a hub name or a directory (`bert-base-uncased`, `runs/pretrain/final`), an
    `MLM`, or a transformers model with its `tokenizer` (or a `(model, tokenizer)` pair).
    `device`: None or 'auto' loads a name on the first GPU if any (else the CPU) and leaves
    a given model where it is; a named device ('cpu', 'cuda:1', 'mps') loads or moves the
    model there. `precision`: 'auto' (fp32 for inference; a bound model keeps its own),
    'fp32' or 'bf16'. `threads`: intra-op threads (None: `$MLMKIT_THREADS`, else the usable
    cores). `batch_tokens`: the token budget of a batch (a memory bound; None sizes it for
    the model). A bound `MLM` passed again with nothing to change is returned as it is. A
    sentence-transformers directory (modules.json) loads without an MLM head for `.embed`,
    which reads its pooling and normalisation; its head features then refuse unless
    `allow_untrained_head=True`.

    >>> mlm = mlmkit.load("bert-base-uncased")          # doctest: +SKIP
    >>> mlm.score("The cat sat on the mat.").pll        # doctest: +SKIP
    """
    check_budget(batch_tokens)
    if isinstance(model, MLM) and tokenizer is None and device in (None, "auto") \
            and precision in (None, "auto") and threads is None and batch_tokens is None:
        return model
    if not isinstance(model, (str, Path, LoadedMLM, tuple)) and tokenizer is None \
            and not hasattr(model, "config"):
        raise InvalidArgument(f"model is a {type(model).__name__}: pass a model name or "
                              "directory, an MLM, or a transformers model with its tokenizer")
    # a sentence-transformers folder loads without its head; its methods then check it
    st_folder = isinstance(model, (str, Path)) and is_st_directory(model)
    loaded, resolved = prepare_mlm(model, device=device, precision=precision, threads=threads,
                                   tokenizer=tokenizer,
                                   allow_untrained_head=allow_untrained_head or st_folder,
                                   trust_remote_code=trust_remote_code)
    values = {f.name: getattr(loaded, f.name) for f in fields(LoadedMLM)}
    values["precision"] = resolved
    values["head_allowed"] = allow_untrained_head or getattr(model, "head_allowed", False)
    if threads is not None:
        values["threads"] = threads
    if batch_tokens is not None:
        values["batch_tokens"] = batch_tokens
    return MLM(**values)


def _free_function(name: str, method_name: str, **load_options):
    """`mlmkit.<name>(model, ..., device=, precision=, threads=, batch_tokens=)`: `load`
    (with `load_options`), then the method. The task function's signature and docstring
    are the reference."""
    task = FEATURES[method_name]

    def function(model, *args, tokenizer=None, device=None, precision="auto", threads=None,
                 batch_tokens=None, trust_remote_code=None, **options):
        _check_options(name, task, options)
        mlm = load(model, tokenizer=tokenizer, device=device, precision=precision,
                   threads=threads, batch_tokens=batch_tokens,
                   trust_remote_code=trust_remote_code, **load_options)
        return getattr(mlm, method_name)(*args, **options)

    function.__signature__ = inspect.signature(task)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = task.__doc__
    function.__module__ = __name__
    return function


score = _free_function("score", "score")
rescore = _free_function("rescore", "rescore")
evaluate_pairs = _free_function("evaluate_pairs", "evaluate_pairs")
fill_mask = _free_function("fill_mask", "fill")
generate = _free_function("generate", "generate")
infill = _free_function("infill", "infill")
elbo = _free_function("elbo", "elbo")
cloze_classify = _free_function("cloze_classify", "classify")
rank_statements = _free_function("rank_statements", "rank")
knowledge_probe = _free_function("knowledge_probe", "probe")
audit = _free_function("audit", "audit")
# embedding runs the encoder only: a checkpoint without a trained MLM head embeds as well
embed = _free_function("embed", "embed", allow_untrained_head=True)
embed_sparse = _free_function("embed_sparse", "embed_sparse")
variant_effects = _free_function("variant_effects", "variant_effects")
design_binders = _free_function("design_binders", "design_binders")

"""`mlmkit.train_embeddings(model, train, ...)`: contrastive fine-tuning of a masked LM into a
sentence encoder, saved as a sentence-transformers folder."""

from __future__ import annotations

from pathlib import Path

from mlmkit.core.checks import count
from mlmkit.core.devices import prepare
from mlmkit.core.progress import status
from mlmkit.core.records import read_table
from mlmkit.embeddings.denoising import DELETION_RATIO
from mlmkit.embeddings.losses import DEFAULT_SCALE
from mlmkit.embeddings.pairs import Examples, read_examples, read_sts_pairs
from mlmkit.embeddings.splade import (
    DOCUMENT_REGULARIZER,
    QUERY_REGULARIZER,
    REGULARIZER_WARMUP,
    SPLADE_SCALE,
)
from mlmkit.errors import InvalidArgument
from mlmkit.finetuning.embedding_run import (
    EmbeddingRecipe,
    EmbeddingTrainResult,
    parse_dims,
    train_embedding_run,
)
from mlmkit.mlm import load
from mlmkit.training.runtime import training_threads

DEFAULT_BATCH_SIZE = 32


def train_embeddings(
    model,
    train,
    *,
    loss: str = "mnrl",
    pooling: str = "mean",
    normalize: bool = False,
    matryoshka_dims=None,
    scale: float | None = None,
    epochs: int = 1,
    lr: float = 5e-5,
    batch_size: int | None = None,
    max_length: int = 128,
    warmup: float = 0.1,
    weight_decay: float = 0.01,
    dropout: float | None = None,
    mini_batch_size: int | None = None,
    deletion_ratio: float = DELETION_RATIO,
    tie_decoder: bool = True,
    query_regularizer: float = QUERY_REGULARIZER,
    document_regularizer: float = DOCUMENT_REGULARIZER,
    regularizer_warmup: float = REGULARIZER_WARMUP,
    score_field: str = "score",
    text_field: str | None = None,
    validation=None,
    train_limit: int | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
    save_every: int = 0,
    halt_after: int | None = None,
    batch_tokens: int | None = None,
    precision: str = "auto",
    device=None,
    threads: int | None = None,
    seed: int = 0,
    tokenizer=None,
    progress: bool | None = None,
) -> EmbeddingTrainResult:
    """Fine-tune `model` (a masked LM, or a sentence-transformers folder) into a sentence
    encoder on `train`, with the loss of sentence-transformers of the same name.

    `train`: a JSONL/TSV/CSV file (or a plain text file, one text a line, for simcse and
    tsdae), or `mlmkit.embeddings.pairs.Examples`. `loss`: "mnrl"
    (MultipleNegativesRankingLoss: (anchor, positive[, negative, ...]) rows, every other
    text of the batch a negative), "cached-mnrl" (the same loss and gradients through
    GradCache: the batch embedded in mini-batches of `mini_batch_size` texts (default 32),
    so a large batch needs one mini-batch's activation memory, for a second forward pass),
    "cosent" (CoSENT: (sentence1, sentence2, score) pairs; only the order of the scores
    counts), "simcse" (unsupervised SimCSE: single texts, each its own positive through
    two dropout draws; needs `dropout` > 0 where the model has none) or "tsdae" (single
    texts: a `deletion_ratio` share of each text's words deleted, a decoder rebuilds the
    text from the pooled vector; `tie_decoder` shares the encoder's weights with it; only
    the encoder is saved) or "splade" (SPLADE: (anchor, positive[, negative, ...]) rows,
    each text a vocabulary-sized vector from the MLM head, max over tokens of
    log(1 + relu(logit)); the ranking loss on dot products plus the FLOPS regulariser,
    weighted `query_regularizer` on the anchors and `document_regularizer` on the rest,
    both rising quadratically from 0 over the first `regularizer_warmup` share of the
    steps; the model, head included, is saved as a SparseEncoder folder that
    `mlmkit.load(dir).embed_sparse` reads; the validation pairs are scored by dot product,
    with the vectors' mean non-zeros as `active_dims`). `text_field`: the
    text columns, comma-separated; `score_field`: cosent's score column.
    `scale`: the similarity scale (default 20; splade: 1).
    `matryoshka_dims` ("256,128,64" or a list): the loss summed over these prefixes.
    `batch_size` (default 32): examples per optimizer step, the in-batch negatives of
    mnrl and simcse. `pooling` and `normalize` are saved with the model. `validation`: STS pairs scored
    each epoch (Spearman of the cosine, the best epoch kept). `run_dir` keeps the best
    epoch as a sentence-transformers folder (`run_dir/best`, which
    `SentenceTransformer(dir)` and `mlmkit.load(dir)` load), metrics.json and checkpoints
    for `resume=True`. `batch_tokens` bounds a forward pass's padded tokens (memory only).
    `tokenizer` (a folder or hub name) is the model's tokenizer when its folder has none.
    """
    if resume and run_dir is None:
        raise InvalidArgument("resume=True (--resume) needs the run_dir (--run-dir) to resume")
    count("save_every", save_every, 0)
    for name, value in (("train_limit", train_limit), ("halt_after", halt_after),
                        ("batch_tokens", batch_tokens)):
        if value is not None:
            count(name, value, 1)
    if score_field != "score" and loss != "cosent":
        raise InvalidArgument(f"score_field (--score-field) is the cosent loss's; loss={loss!r} "
                              "trains on unscored texts: leave it out")
    if scale is None:
        scale = SPLADE_SCALE if loss == "splade" else DEFAULT_SCALE
    recipe = EmbeddingRecipe(loss=loss, pooling=pooling, normalize=normalize,
                             matryoshka_dims=parse_dims(matryoshka_dims), scale=scale,
                             epochs=epochs, lr=lr,
                             batch_size=DEFAULT_BATCH_SIZE if batch_size is None else batch_size,
                             max_length=max_length,
                             warmup=warmup, weight_decay=weight_decay, dropout=dropout, seed=seed,
                             mini_batch_size=mini_batch_size, deletion_ratio=deletion_ratio,
                             tie_decoder=tie_decoder, query_regularizer=query_regularizer,
                             document_regularizer=document_regularizer,
                             regularizer_warmup=regularizer_warmup)
    recipe.check(1 << 30)  # the settings alone, before reading the data (the width: below)
    if isinstance(train, Examples):
        examples = train
    else:
        if loss == "splade":
            _refuse_scores(train)
        examples = read_examples(train, text_field=text_field, single=loss in ("simcse", "tsdae"),
                                 score_field=score_field if loss == "cosent" else None)
    if train_limit is not None and train_limit < len(examples):
        examples = examples.subset(range(train_limit))
    pairs = read_sts_pairs(validation) if validation is not None else None
    target, precision = prepare(device, precision, training_threads(threads), task="training")
    mlm = load(model, tokenizer=tokenizer, device=str(target), allow_untrained_head=True)
    recipe.check(int(mlm.model.config.hidden_size))
    return train_embedding_run(mlm, examples, recipe, precision=precision, validation=pairs,
                               run_dir=run_dir, resume=resume, save_every=save_every,
                               halt_after=halt_after, batch_tokens=batch_tokens,
                               progress=progress,
                               say=status if progress is not False else None)


def _refuse_scores(path) -> None:
    """splade learns from which text is whose positive, not from scores: a file of scored
    pairs (a `score` column) would train on every pair as a match, so it is refused."""
    try:
        first = next(iter(read_table(path, what="train examples")), None)
    except (OSError, ValueError):  # read_examples reports on it by itself
        return
    if first is not None and "score" in first[1]:
        raise InvalidArgument(f"{path} holds scored pairs (a score column): the splade loss "
                              "trains on (anchor, positive[, negative...]) rows; give those, "
                              "or use --loss cosent for scored pairs")

"""The embedding options: how `mlmkit.embed` turns a text into one vector. `MLM.embed` takes
these fields as keywords, `mlmkit embed` as flags, the server's /v1/embeddings as fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mlmkit.options import option

POOLINGS = ("mean", "cls", "max", "weighted-mean", "last-k-layers")
OUTPUT_FORMATS = ("jsonl", "npy")  # of `mlmkit embed`: JSON lines, or one float32 .npy array


@dataclass(frozen=True)
class Embedding:
    """How texts become vectors (each field is a flag of `mlmkit embed`)."""

    pooling: Literal["mean", "cls", "max", "weighted-mean", "last-k-layers"] | None = option(
        None, "How token vectors become one: mean, cls, max, weighted-mean (position-weighted "
        "mean) or last-k-layers (mean over tokens of the mean of the last --layers layers). "
        "Default: a sentence-transformers directory's own pooling, else mean.")
    normalize: bool | None = option(
        None, "Scale each vector to unit length (after --dimensions). Default: a "
        "sentence-transformers directory's Normalize module, else no.")
    dimensions: int | None = option(
        None, "Keep the first N dimensions (Matryoshka truncation); default: all.")
    prompt: str | None = option(
        None, "Text put before every input (e.g. 'query: '), as sentence-transformers' "
        "prompt.")
    layers: int = option(4, "last-k-layers pooling: how many of the last layers to average.")


TRAINING_LOSSES = ("mnrl", "cached-mnrl", "cosent", "simcse", "tsdae", "splade")


@dataclass(frozen=True)
class EmbeddingTraining:
    """How a masked LM is trained into a sentence encoder (each field is a flag of
    `mlmkit embed train` and a keyword of `mlmkit.train_embeddings`)."""

    loss: Literal["mnrl", "cached-mnrl", "cosent", "simcse", "tsdae", "splade"] = option(
        "mnrl", "mnrl: in-batch negatives on (anchor, positive[, negative...]) rows; "
        "cached-mnrl: the same through GradCache (large batches in --mini-batch-size pieces of "
        "memory); cosent: scored pairs (STS-B: sentence1, sentence2, score); simcse: single "
        "texts, each its own positive through two dropout draws (unsupervised); tsdae: single "
        "texts, rebuilt by a decoder from the vector of a copy with words deleted "
        "(unsupervised); splade: sparse vectors from the MLM head on (anchor, positive[, "
        "negative...]) rows, ranked by dot product, made sparse by the FLOPS regulariser.")
    pooling: Literal["mean", "cls", "max", "weighted-mean"] = option(
        "mean", "How token vectors become one (saved in the sentence-transformers folder).")
    normalize: bool = option(
        False, "Save the model with a Normalize module (unit-length vectors).")
    matryoshka_dims: str | None = option(
        None, "Matryoshka: the loss summed over these nested prefixes of the vector, "
        "comma-separated (e.g. 256,128,64), so a vector cut to its first N dimensions works.")
    scale: float | None = option(
        None, "The similarity scale (1 / temperature) of the loss (default 20; splade: 1, "
        "its dot products are unbounded).")
    epochs: int = option(1, "Passes over the training examples.")
    lr: float = option(5e-5, "Peak learning rate (AdamW, linear warm-up and decay).")
    batch_size: int | None = option(
        None, "Examples per optimizer step (default 32; for mnrl and simcse: the in-batch "
        "negatives).")
    max_length: int = option(
        128, "Longest text in tokens; longer ones are truncated and counted in metrics.json.")
    warmup: float = option(0.1, "Share of the steps of linear warm-up.")
    weight_decay: float = option(0.01, "AdamW weight decay.")
    dropout: float | None = option(
        None, "Dropout while training (default: the model's own; simcse needs it above 0).")
    mini_batch_size: int | None = option(
        None, "cached-mnrl: texts per forward pass (default 32; at most --batch-size): the "
        "memory a step needs, not its result.")
    deletion_ratio: float = option(
        0.6, "tsdae: the share of each text's words deleted before it is embedded.")
    tie_decoder: bool = option(
        True, "tsdae: the decoder shares the encoder's weights (the TSDAE set-up); "
        "--no-tie-decoder gives it its own copy.")
    query_regularizer: float = option(
        5e-5, "splade: the weight of the FLOPS regulariser on the anchors (queries).")
    document_regularizer: float = option(
        3e-5, "splade: the weight of the FLOPS regulariser on the positives and negatives "
        "(documents).")
    regularizer_warmup: float = option(
        1 / 3, "splade: the share of the steps over which the regulariser weights rise "
        "quadratically from 0 (0: full weight from the first step).")
    score_field: str = option("score", "cosent: the column holding each pair's score.")
    text_field: str | None = option(
        None, "The text columns, comma-separated (default: anchor,positive,negative*... if "
        "present, else sentence1,sentence2; simcse and tsdae: text, or one text a line).")
    validation: str | None = option(
        None, "STS pairs (sentence1, sentence2, score) scored each epoch (Spearman of the "
        "cosine); the best epoch is kept.")
    train_limit: int | None = option(None, "Use at most the first N training examples.")
    run_dir: str | None = option(
        None, "Where the model (best/, a sentence-transformers folder), metrics.json and the "
        "checkpoints go.")
    resume: bool = option(False, "Continue the run in --run-dir.", flag="--resume")
    save_every: int = option(
        0, "Also save the training state every N steps (always: each epoch's end and on "
        "Ctrl-C).")
    halt_after: int | None = option(None, "Stop (resumably) after N steps.")

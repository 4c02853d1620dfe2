"""The embedding options: how `mlmkit.embed` turns a text into one vector. `MLM.embed` takes
these fields as keywords, `mlmkit embed` as flags, the server's /v1/embeddings as fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mlmkit.options import option

POOLINGS = ("mean", "cls", "max", "weighted-mean", "last-k-layers")


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

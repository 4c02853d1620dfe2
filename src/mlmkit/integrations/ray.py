"""Scoring, fill-mask and embedding over Ray Data: `Dataset.map_batches` callable classes.

    import ray
    from mlmkit.integrations.ray import Scorer

    texts = ray.data.read_parquet("texts.parquet")          # a "text" column
    scores = texts.map_batches(Scorer, fn_constructor_kwargs={"model": "./tiny-bert"},
                               batch_size=256,
                               compute=ray.data.ActorPoolStrategy(size=2))  # 2 actors
    scores.write_parquet("scores/")

Ray schedules the actors over a cluster's machines (`num_gpus=1` gives each a GPU); each
actor loads the model once, in its constructor, and scores every batch it is given with
mlmkit's engine (the same numbers as `mlmkit.score` / `mlmkit.fill_mask`: one token budget,
length-bucketed batches). A batch is a dict of column arrays (Ray's default "numpy"
format) or a pandas DataFrame; the output is the batch with result columns added. Install
with `pip install 'mlmkit[ray]'`; this module imports Ray itself only where it needs it
(the classes are plain Python, callable on a dict of lists without Ray).

`embed_parquet(source, output, model=...)` is the one call that embeds a corpus of Parquet
files across a cluster: `Embedder` actors write an `embedding` column (float32, one
fixed-size list per row) beside the input's columns, as Parquet files under `output`.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

import mlmkit
from mlmkit.errors import InvalidArgument, InvalidData
from mlmkit.scoring.text_scores import check_score_options


def _texts(batch, column: str) -> list[str]:
    if column not in batch:
        names = list(batch.columns) if hasattr(batch, "columns") else sorted(batch)
        raise InvalidData(f"the batch has no column {column!r} (columns: {names}): pass "
                          "column=NAME for the text column")
    values = list(batch[column])
    texts = []
    for value in values:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            texts.append("")
        elif isinstance(value, bytes):
            texts.append(value.decode("utf-8"))
        else:
            texts.append(str(value))
    return texts


def _with_columns(batch, columns: dict):
    """The batch with `columns` added (a new dict of arrays, or a DataFrame copy)."""
    if hasattr(batch, "assign"):  # pandas
        return batch.assign(**columns)
    out = dict(batch)
    for name, values in columns.items():
        out[name] = np.asarray(values, dtype=object if any(
            isinstance(v, (list, dict, str)) for v in values) else None)
    return out


class _Model:
    def __init__(self, model, device, precision, threads, batch_tokens):
        self.mlm = mlmkit.load(model, device=device, precision=precision, threads=threads,
                               batch_tokens=batch_tokens)


class Scorer(_Model):
    """`map_batches` callable class: the PLL of the texts of `column`.

    Adds `pll` (float, NaN for an empty text), `n_tokens`, `pppl` (NaN for an empty text)
    and, with `per_word`, `word_plls` (a list per text). `metric`, `unk`, `stride`,
    `batch_tokens`, `precision`, `device`, `threads`: as `mlmkit.score`."""

    def __init__(self, model, *, column: str = "text", metric: str = "pll",
                 per_word: bool = False, unk: str = "score", stride: int = 1,
                 batch_tokens: int | None = None, precision: str = "auto", device=None,
                 threads: int | None = None):
        check_score_options(metric, unk, stride, batch_tokens)
        super().__init__(model, device, precision, threads, batch_tokens)
        self.column, self.metric, self.per_word = column, metric, per_word
        self.unk, self.stride = unk, stride

    def __call__(self, batch):
        texts = _texts(batch, self.column)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # empty texts: NaN, documented
            results = self.mlm.score(texts, metric=self.metric, per_word=self.per_word,
                                     unk=self.unk, stride=self.stride,
                                     progress=False) if texts else []
        nan = float("nan")
        columns = {
            "pll": [r.pll if r.pll is not None else nan for r in results],
            "n_tokens": [r.n_tokens for r in results],
            "pppl": [r.pppl if r.pppl is not None else nan for r in results],
        }
        if self.per_word:
            columns["word_plls"] = [[w.pll for w in (r.words or [])] for r in results]
        return _with_columns(batch, columns)


class FillMask(_Model):
    """`map_batches` callable class: the `top_k` likeliest tokens at the masks of each text
    of `column` (written with the model's mask token, e.g. [MASK]).

    Adds `filled` (the text with each mask replaced by its best token), `fills` (per text,
    per mask, the top tokens) and `fill_scores` (their probabilities). `mode`, `top_k`,
    `batch_tokens`, `precision`, `device`, `threads`: as `mlmkit.fill_mask`."""

    def __init__(self, model, *, column: str = "text", top_k: int = 5,
                 mode: str = "independent", batch_tokens: int | None = None,
                 precision: str = "auto", device=None, threads: int | None = None):
        if not isinstance(top_k, int) or top_k < 1:
            raise InvalidArgument(f"top_k={top_k!r}: give a whole number ≥ 1")
        super().__init__(model, device, precision, threads, batch_tokens)
        self.column, self.top_k, self.mode = column, top_k, mode

    def __call__(self, batch):
        texts = _texts(batch, self.column)
        results = self.mlm.fill(texts, top_k=self.top_k, mode=self.mode,
                                progress=False) if texts else []
        return _with_columns(batch, {
            "filled": [r.filled for r in results],
            "fills": [[[c.token for c in m.candidates] for m in r.masks] for r in results],
            "fill_scores": [[[c.score for c in m.candidates] for m in r.masks]
                            for r in results],
        })


class Embedder(_Model):
    """`map_batches` callable class: the vector of each text of `column` (as `mlmkit.embed`).

    Adds `embedding`: one float32 vector per row (an [n, d] array in a dict batch, which
    Ray stores as a tensor column; a column of arrays in a DataFrame). `pooling`,
    `normalize`, `dimensions`, `prompt`, `layers`, `batch_tokens`, `precision`, `device`,
    `threads`: as `mlmkit.embed`. A missing text (None, NaN) is the empty text."""

    def __init__(self, model, *, column: str = "text", pooling: str | None = None,
                 normalize: bool | None = None, dimensions: int | None = None,
                 prompt: str | None = None, layers: int = 4, batch_tokens: int | None = None,
                 precision: str = "auto", device=None, threads: int | None = None):
        super().__init__(model, device, precision, threads, batch_tokens)
        self.column = column
        self.options = dict(pooling=pooling, normalize=normalize, dimensions=dimensions,
                            prompt=prompt, layers=layers)
        self.mlm.embed([], **self.options)  # the options checked before any batch

    def __call__(self, batch):
        vectors = self.mlm.embed(_texts(batch, self.column), **self.options, progress=False)
        if hasattr(batch, "assign"):  # pandas: a column of arrays
            return batch.assign(embedding=list(vectors))
        return {**dict(batch), "embedding": vectors}


def embed_parquet(source, output, *, model, column: str = "text", actors: int = 1,
                  batch_size: int = 1024, num_gpus: float = 0, **options) -> None:
    """Embed the `column` of the Parquet file(s) `source` (a path, a folder or a list,
    local or on a store Ray reads) into Parquet files under the folder `output`: every
    input column, plus `embedding`. `actors` models run at once across the cluster Ray is
    connected to (`ray.init` first, or a local one is started), each with `num_gpus`
    GPUs; `options`: those of `Embedder` (pooling, normalize, device, ...)."""
    import ray  # the [ray] extra: only here

    if not isinstance(actors, int) or actors < 1:
        raise InvalidArgument(f"actors={actors!r}: give a whole number ≥ 1 (models run at "
                              "once)")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgument(f"batch_size={batch_size!r}: give a whole number ≥ 1 (texts "
                              "per batch)")
    dataset = ray.data.read_parquet(source)
    if column not in dataset.schema().names:
        raise InvalidData(f"{source!r} has no column {column!r} (columns: "
                          f"{dataset.schema().names}): pass column=NAME for the text column")
    vectors = dataset.map_batches(Embedder, fn_constructor_kwargs={
        "model": model, "column": column, **options}, batch_size=batch_size,
        num_gpus=num_gpus, compute=ray.data.ActorPoolStrategy(size=actors))
    vectors.write_parquet(str(output))


__all__ = ["Embedder", "FillMask", "Scorer", "embed_parquet"]

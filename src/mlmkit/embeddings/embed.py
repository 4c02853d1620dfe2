"""`embed`: texts → one vector each, from the encoder alone (no MLM head), on the batching
engine.

The texts are tokenized once, sorted by length and cut into token-budget batches (a batch
of one length runs unpadded, without an attention mask); each batch runs the encoder (the
model's `base_model`, so the head's d×V projection never runs) and is pooled on the spot, so
only [b, d] per batch is kept. Results come back in input order as one float32 array.
Nothing is truncated: a text longer than the model's maximum length is an error naming it.

On a CPU the default budget is at most `CPU_BATCH_TOKENS`: embedding reads one forward per
text, so what pays is batches of one length (no padding, no attention mask), which a small
budget cuts more often; past ~2k tokens a CPU matmul gains nothing from a larger batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from mlmkit.core import checks
from mlmkit.embeddings.fused_encoder import fused_hidden_states, fused_layers
from mlmkit.embeddings.pooling import check_pooling, pool
from mlmkit.embeddings.st_directory import StConfig, read_st_config
from mlmkit.engine.batching import TokenJobs, default_batch_tokens, run_jobs
from mlmkit.errors import InvalidArgument
from mlmkit.models.load import prepare_mlm

CPU_BATCH_TOKENS = 2048


@lru_cache(maxsize=16)
def _st_config_of(path: str, stamp: float) -> StConfig | None:
    return read_st_config(path)


def st_config_of(mlm) -> StConfig | None:
    """The sentence-transformers settings of the directory `mlm` was loaded from, if any."""
    path = Path(str(getattr(mlm, "name", ""))).expanduser()
    modules = path / "modules.json"
    if not modules.is_file():
        return None
    return _st_config_of(str(path.resolve()), modules.stat().st_mtime)


def _texts(texts) -> list[str]:
    if isinstance(texts, str):
        return [texts]
    try:
        texts = list(texts)
    except TypeError:
        raise InvalidArgument(f"texts is a {type(texts).__name__}: pass a text or a list "
                              "of texts") from None
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidArgument(f"text {index + 1} is a {type(text).__name__}, not a "
                                  "string: pass texts as str")
    return texts


def embed(
    model,
    texts: str | Sequence[str],
    *,
    pooling: str | None = None,
    normalize: bool | None = None,
    dimensions: int | None = None,
    prompt: str | None = None,
    layers: int = 4,
    batch_tokens: int | None = None,
    precision: str = "auto",
    device=None,
    threads: int | None = None,
    progress: bool | None = None,
    name_of: Callable[[int], str] | None = None,
) -> np.ndarray:
    """float32 vectors of `texts`: [n, d] for a list, [d] for one text.

    `pooling`: mean (of every token the attention covers, [CLS] and [SEP] included), cls,
    max, weighted-mean (token i weighs i), or last-k-layers (mean over tokens of the mean
    of the last `layers` layers); None: the pooling of a sentence-transformers directory,
    else mean. `normalize`: unit length (None: a sentence-transformers directory's
    Normalize module, else False). `dimensions`: keep the first N (Matryoshka), before
    normalising. `prompt`: put before every text (None: the directory's default prompt).
    Equal to sentence-transformers' `encode` for the same model and settings. A text longer
    than the model reads is an error before any work (a vector is never of a cut text),
    naming it by `name_of(i)` (default: "text i+1"; a file's job names its line).
    """
    items = _texts(texts)
    if layers is not None:
        checks.count("layers", layers, 1)
    if dimensions is not None:
        dimensions = checks.count("dimensions", dimensions, 1)
    if prompt is not None and not isinstance(prompt, str):
        raise InvalidArgument(f"prompt is a {type(prompt).__name__}: pass a string")
    if pooling is not None:
        check_pooling(pooling)
    mlm, precision = prepare_mlm(model, device=device, precision=precision, threads=threads,
                                 allow_untrained_head=True)
    settings = st_config_of(mlm)
    pooling = pooling or (settings.pooling if settings else "mean")
    normalize = bool(settings.normalize if normalize is None and settings else normalize)
    if prompt is None and settings is not None:
        prompt = settings.prompt
    net = mlm.model
    width = int(net.config.hidden_size)
    if dimensions is not None and dimensions > width:
        raise InvalidArgument(f"dimensions={dimensions} is more than the model's {width}: "
                              f"ask for at most {width}")
    n_layers = int(getattr(net.config, "num_hidden_layers", 0) or 0)
    if pooling == "last-k-layers" and n_layers and layers > n_layers:
        raise InvalidArgument(f"layers={layers} is more than the model's {n_layers} layers: "
                              f"ask for at most {n_layers}")
    if not items:
        return np.zeros((0, dimensions or width), dtype=np.float32)
    if prompt:
        items = [prompt + text for text in items]
    # verbose=False: transformers' warning of a text longer than the model would come
    # before run_jobs' own one-line error for it
    ids = mlm.tokenizer(items, add_special_tokens=True, verbose=False)["input_ids"]
    if batch_tokens is None and mlm.device.type == "cpu":
        longest = max(len(row) for row in ids)
        batch_tokens = max(min(default_batch_tokens(net, longest), CPU_BATCH_TOKENS), longest)
    encoder = net.base_model
    hidden_states = pooling == "last-k-layers"
    fused = fused_layers(net) if precision == "fp32" and not net.training else None

    def encode(input_ids, attention_mask):
        """The pooled vectors of a batch, through the transformers encoder."""
        full = bool(attention_mask.all())
        out = encoder(input_ids=input_ids, attention_mask=None if full else attention_mask,
                      output_hidden_states=hidden_states)
        if hidden_states:
            hidden = torch.stack([h.float() for h in out.hidden_states[-layers:]]).mean(0)
        else:
            hidden = out.last_hidden_state
        return pool(hidden, attention_mask, pooling)

    def encode_fused(input_ids, attention_mask):
        """The same through the fused layer kernel, one length at a time (no padding)."""
        lengths = attention_mask.sum(1)
        vectors = torch.empty(len(lengths), width, dtype=torch.float32,
                              device=input_ids.device)
        for length in torch.unique(lengths).tolist():
            rows = torch.nonzero(lengths == length).squeeze(1)
            ids = input_ids[rows, :length]
            states = fused_hidden_states(net, fused, ids)
            hidden = torch.stack(states[-layers:]).mean(0) if hidden_states else states[-1]
            vectors[rows] = pool(hidden, torch.ones_like(ids), pooling)
        return vectors

    def reduce(batch, _):
        vectors = (encode_fused if fused is not None else encode)(batch.input_ids,
                                                                   batch.attention_mask)
        if dimensions is not None:
            vectors = vectors[:, :dimensions]
        if normalize:
            vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
        return vectors

    vectors = run_jobs(mlm, TokenJobs(ids, [[] for _ in ids]), reduce,
                       batch_tokens=batch_tokens, precision=precision, progress=progress,
                       description="embedding", unit="texts", call=None,
                       max_length=mlm.max_length,
                       name_of=name_of or (lambda i: f"text {i + 1}"))
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    return vectors[0] if isinstance(texts, str) else vectors

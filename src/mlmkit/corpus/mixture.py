"""Several corpora in one run: the `--corpus` list and its weighted mixture.

`--corpus` takes one source or several, as repeated flags or one comma-separated value
(`--corpus a.txt --corpus 'web/*.jsonl'` or `--corpus a.txt,web/*.jsonl`). Without weights
the sources are read one after the other as one corpus. With a weight on every source
(`--corpus a.txt:0.7 --corpus b.txt:0.3`, as ModernBERT and Ettin mix sources) each is
tokenized into its own cached shards and training draws blocks from them in those
proportions: `MixedBlocks` lays the sources' blocks out as one index space in which source
k fills a share w_k of the entries, a small source repeated (t-th entry: block t mod n_k),
and the run's ordinary shuffled block order (a function of seed and position, saved in the
checkpoint) reads it. So which block a global row of a step gets is a pure function of
(seed, step, row): a resumed run and a run on any number of ranks read the same rows, and
over each pass through the index space every source has exactly its share (largest
remainders). Within one step the shares vary as in a shuffled deck.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from mlmkit.corpus.packing import BlockBatch
from mlmkit.errors import InvalidArgument

MAX_REPEAT = 64  # the index space is at most this many times the blocks it mixes


@dataclass(frozen=True)
class CorpusPart:
    """One source of a `--corpus` list and its weight (None: no weights given)."""

    source: str
    weight: float | None = None


def _exists(text: str) -> bool:
    return os.path.exists(os.path.expanduser(text))


def _part(text: str, spec: str) -> CorpusPart:
    text = text.strip()
    if not text:
        raise InvalidArgument(f"--corpus {spec!r}: an empty source in the list; separate "
                              "sources with one comma or give --corpus once per source")
    head, sep, tail = text.rpartition(":")
    if sep and head and not _exists(text):
        try:
            weight = float(tail)
        except ValueError:
            weight = None
        if weight is not None:
            if not math.isfinite(weight) or weight <= 0:
                raise InvalidArgument(f"--corpus {text!r}: the weight {tail} must be a "
                                      "positive number (the weights are shares: 0.7 and 0.3)")
            return CorpusPart(head.strip(), weight)
    return CorpusPart(text)


def _split_list(text: str) -> list[str]:
    """`text` cut at its commas, except those inside a glob's `[...]` class."""
    pieces, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]" and depth:
            depth -= 1
        elif char == "," and not depth:
            pieces.append(text[start:i])
            start = i + 1
    return pieces + [text[start:]]


def parse_corpus_spec(spec: str | Sequence[str]) -> list[CorpusPart]:
    """The sources (and weights) of a `--corpus` value: a string, comma-separated or not,
    or a list of them. A value that names an existing path is one source whatever it
    holds; `SOURCE:W` gives a weight W > 0. Weights are given to every source or to none."""
    items = [spec] if isinstance(spec, str | os.PathLike) else list(spec)
    parts: list[CorpusPart] = []
    for item in items:
        text = str(item)
        if _exists(text) or text.strip() == "python-docs":
            parts.append(CorpusPart(text))
        else:
            parts += [_part(piece, text) for piece in _split_list(text)]
    if not parts:
        raise InvalidArgument("--corpus: give at least one source")
    weighted = [p for p in parts if p.weight is not None]
    if weighted and len(weighted) != len(parts):
        bare = next(p.source for p in parts if p.weight is None)
        raise InvalidArgument(f"--corpus {bare!r} has no weight while others do: give every "
                              f"source a weight ({bare}:0.3) or none")
    return parts


def join_corpus_spec(values: Sequence[str]) -> str:
    """Repeated `--corpus` flags as the one string a config holds (comma-separated)."""
    return ",".join(str(v).strip() for v in values)


def mixture_weights(parts: list[CorpusPart]) -> list[float] | None:
    """The normalised weights of a weighted list; None when it has no weights."""
    if not parts or parts[0].weight is None:
        return None
    total = sum(p.weight for p in parts)
    return [p.weight / total for p in parts]


def shares(weights: Sequence[float], total: int) -> list[int]:
    """`total` split in proportion to `weights`, exactly (largest remainders)."""
    exact = [w * total for w in weights]
    counts = [int(e) for e in exact]
    for j in sorted(range(len(exact)), key=lambda j: exact[j] - counts[j],
                    reverse=True)[:total - sum(counts)]:
        counts[j] += 1
    return counts


class MixedBlocks:
    """Blocks of several corpora as one index space, source k filling a share `weights[k]`
    of it: `blocks[indices]` gathers a `BlockBatch` like `PackedBlocks`."""

    def __init__(self, sources: list, weights: Sequence[float], names: Sequence[str]):
        sizes = [len(b) for b in sources]
        for name, size in zip(names, sizes, strict=True):
            if size == 0:
                raise InvalidArgument(f"--corpus {name!r} holds no block to train on: it is "
                                      "empty at this --seq-len")
        # the smallest space in which every block of every source appears at least once
        total = max(math.ceil(size / weight - 1e-9) for size, weight in zip(sizes, weights,
                                                                              strict=True))
        if total > MAX_REPEAT * sum(sizes):
            k = int(np.argmax([s / w for s, w in zip(sizes, weights, strict=True)]))
            raise InvalidArgument(
                f"--corpus {names[k]}:{weights[k]:g}: so small a share of so large a corpus "
                f"would repeat the other sources over {MAX_REPEAT} times per pass; raise its "
                "weight or train on a part of it")
        self.sources, self.sizes, self.names = sources, sizes, list(names)
        self.weights = list(weights)
        self.counts = shares(weights, total)
        self.offsets = np.cumsum([0] + self.counts)
        self.length = sources[0].length

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def source_of(self, indices) -> np.ndarray:
        """The source of each index."""
        indices = np.asarray(indices, dtype=np.int64)
        return np.searchsorted(self.offsets, indices, side="right") - 1

    def __getitem__(self, indices):
        return self.gather(indices)

    def gather(self, indices, draws=None):
        """The blocks `indices`, `draws` handed to their sources (`PackedBlocks.gather`)."""
        indices = np.atleast_1d(np.asarray(indices, dtype=np.int64))
        which = self.source_of(indices)
        parts, rows = [], []
        for k, blocks in enumerate(self.sources):
            chosen = np.nonzero(which == k)[0]
            if len(chosen):
                within = (indices[chosen] - self.offsets[k]) % self.sizes[k]
                parts.append(blocks[within] if draws is None else
                             blocks.gather(within, np.asarray(draws)[chosen]))
                rows.append(chosen)
        order = torch.from_numpy(np.argsort(np.concatenate(rows), kind="stable"))
        fields = ("input_ids", "attention_mask", "word_starts", "document_ids")
        return BlockBatch(*(torch.cat([getattr(p, f) for p in parts]).index_select(0, order)
                            for f in fields))


@dataclass
class MixedShards:
    """The token shards of a mixture's sources, seen as one for summaries and the resume
    fingerprint (its `path` name hashes every source's shard key and weight)."""

    parts: list
    weights: list[float]

    @property
    def path(self) -> Path:
        payload = "|".join(f"{Path(s.path).name}:{w!r}" for s, w in zip(self.parts,
                                                                       self.weights,
                                                                       strict=True))
        return Path("mixture-" + hashlib.blake2b(payload.encode(), digest_size=12).hexdigest())

    @property
    def n_tokens(self) -> int:
        return sum(s.n_tokens for s in self.parts)

    @property
    def n_documents(self) -> int:
        return sum(s.n_documents for s in self.parts)

"""Corpus statistics for informed masking, computed once and saved (`mlmkit mask stats`).

- token frequencies (frequency weights), document frequencies (tf-idf weights);
- n-gram collocations, n ≤ 5 tokens, scored by PMI; for n > 2 the minimum PMI over the
  n-gram's binary splits (PMI-Masking, Levine et al. 2021); only n-grams of whole words
  spanning at least two words are candidates;
- token informativeness: a token's mean PMI with the tokens around it (InforMask).

Saved as `stats.safetensors` (tensors) plus `stats.json` (counts and settings) in a
directory, both written atomically.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save

from mlmkit.core import checks
from mlmkit.core.cache import atomic_write_bytes, atomic_write_text
from mlmkit.errors import MlmkitError
from mlmkit.masking import ngrams

FORMAT_VERSION = 1
TENSORS_FILE, META_FILE = "stats.safetensors", "stats.json"


@dataclass
class MaskingStats:
    token_counts: torch.Tensor  # int64 [V]
    doc_freq: torch.Tensor  # int64 [V]
    informativeness: torch.Tensor  # float32 [V]
    ngram_ids: torch.Tensor  # int64 [K, MAX_N], -1 padded, sorted by PMI (highest first)
    ngram_pmi: torch.Tensor  # float32 [K]
    ngram_counts: torch.Tensor  # int64 [K]
    n_docs: int
    n_tokens: int
    meta: dict = field(default_factory=dict)

    @property
    def vocab_size(self) -> int:
        return int(self.token_counts.numel())

    def collocation_ids(self, min_pmi=None, max_ngrams=None) -> torch.Tensor:
        """Int64 [K, MAX_N] (-1 padded): the `max_ngrams` best n-grams with PMI ≥ `min_pmi`."""
        keep = torch.ones(len(self.ngram_pmi), dtype=torch.bool)
        if min_pmi is not None:
            keep &= self.ngram_pmi >= float(min_pmi)
        index = keep.nonzero().squeeze(1)
        if max_ngrams is not None:
            index = index[: int(max_ngrams)]  # rows are sorted by PMI already
        return self.ngram_ids[index]

    def top_collocations(self, tokenizer, k: int = 20) -> list[tuple[str, float, int]]:
        """(text, PMI, count) of the k highest-PMI collocations, for display."""
        out = []
        best = zip(self.ngram_ids[:k], self.ngram_pmi[:k], self.ngram_counts[:k], strict=True)
        for row, pmi, count in best:
            ids = [int(i) for i in row if i >= 0]
            out.append((tokenizer.decode(ids), float(pmi), int(count)))
        return out


def _tokenize(texts: Iterable[str], tokenizer, batch_size: int, progress):
    """Flat id stream, document index and word-start flag per token."""
    ids, docs, starts = [], [], []
    n_docs = 0
    batch: list[str] = []

    def flush():
        nonlocal n_docs
        encoded = tokenizer(batch, add_special_tokens=False, verbose=False)
        for i, row in enumerate(encoded["input_ids"]):
            words = np.asarray([-1 if w is None else w for w in encoded.word_ids(i)])
            flags = np.ones(len(row), dtype=bool)
            flags[1:] = words[1:] != words[:-1]
            ids.append(np.asarray(row, dtype=np.int64))
            docs.append(np.full(len(row), n_docs, dtype=np.int64))
            starts.append(flags)
            n_docs += 1
        if progress is not None:
            progress(len(batch))
        batch.clear()

    for text in texts:
        batch.append(text)
        if len(batch) >= batch_size:
            flush()
    if batch:
        flush()
    if n_docs == 0:
        raise MlmkitError("the corpus has no document to compute masking statistics from")
    return np.concatenate(ids), np.concatenate(docs), np.concatenate(starts), n_docs


def _count(keys: np.ndarray):
    unique, counts = np.unique(keys, return_counts=True)
    return unique, counts


def _lookup(unique: np.ndarray, counts: np.ndarray, keys: np.ndarray) -> np.ndarray:
    where = np.searchsorted(unique, keys).clip(max=len(unique) - 1)
    found = unique[where] == keys
    return np.where(found, counts[where], 0)


def _informativeness(ids, docs, vocab_size: int, window: int) -> np.ndarray:
    """Mean PMI of each token with the tokens within `window` of it (both sides)."""
    pair_keys, pair_counts = [], []
    for d in range(1, window + 1):
        same = docs[d:] == docs[:-d]
        a, b = ids[:-d][same], ids[d:][same]
        for left, right in ((a, b), (b, a)):
            unique, counts = _count(left * vocab_size + right)
            pair_keys.append(unique)
            pair_counts.append(counts)
    if not pair_keys or not sum(len(k) for k in pair_keys):
        return np.zeros(vocab_size, dtype=np.float32)
    keys = np.concatenate(pair_keys)
    counts = np.concatenate(pair_counts).astype(np.float64)
    order = np.argsort(keys, kind="stable")
    keys, counts = keys[order], counts[order]
    first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    keys, counts = keys[first], np.add.reduceat(counts, first)
    a, b = keys // vocab_size, keys % vocab_size
    marginal = np.bincount(a, weights=counts, minlength=vocab_size)
    total = counts.sum()
    pmi = np.log(counts * total / (marginal[a] * marginal[b]))
    score = np.bincount(a, weights=counts * pmi, minlength=vocab_size)
    return (score / np.maximum(marginal, 1.0)).astype(np.float32)


def _collocations(ids, docs, starts, max_n: int, min_count: int, min_pmi: float, max_ngrams: int):
    """Candidate n-grams of whole words (≥ 2 words, no document crossing) with their PMI."""
    total = len(ids)
    stream = torch.from_numpy(ids)[None]
    window = {n: ngrams.window_keys(stream, n)[0].numpy() for n in range(1, max_n + 1)}
    tables = {}
    for n in range(1, max_n):  # counts of every window, for the sub-grams of candidates
        same_doc = docs[n - 1:] == docs[: total - n + 1]
        tables[n] = _count(window[n][same_doc])
    word_end = np.r_[starts[1:] | (docs[1:] != docs[:-1]), True]
    found_ids, found_pmi, found_counts = [], [], []
    for n in range(2, max_n + 1):
        width = total - n + 1
        if width <= 0:
            break
        ok = (docs[n - 1:] == docs[:width]) & starts[:width] & word_end[n - 1:]
        inner = np.zeros(width, dtype=bool)
        for k in range(1, n):
            inner |= starts[k:k + width]
        ok &= inner
        positions = np.flatnonzero(ok)
        if len(positions) == 0:
            continue
        unique, first, counts = np.unique(window[n][positions], return_index=True,
                                          return_counts=True)
        keep = counts >= min_count
        at, counts = positions[first[keep]], counts[keep].astype(np.float64)
        if len(at) == 0:
            continue
        pmi = np.full(len(at), np.inf)
        for k in range(1, n):  # every binary split: prefix of k tokens, suffix of n - k
            left = _lookup(*tables[k], window[k][at]).astype(np.float64)
            right = _lookup(*tables[n - k], window[n - k][at + k]).astype(np.float64)
            pmi = np.minimum(pmi, np.log(counts * total / np.maximum(left * right, 1.0)))
        good = pmi >= min_pmi
        rows = np.full((int(good.sum()), ngrams.MAX_N), -1, dtype=np.int64)
        for k in range(n):
            rows[:, k] = ids[at[good] + k]
        found_ids.append(rows)
        found_pmi.append(pmi[good])
        found_counts.append(counts[good])
    if not found_ids:
        return (np.zeros((0, ngrams.MAX_N), np.int64), np.zeros(0, np.float32),
                np.zeros(0, np.int64))
    rows, pmi, counts = np.concatenate(found_ids), np.concatenate(found_pmi), np.concatenate(
        found_counts)
    order = np.lexsort((np.arange(len(pmi)), -pmi))[:max_ngrams]
    return rows[order], pmi[order].astype(np.float32), counts[order].astype(np.int64)


def compute_stats(texts: Iterable[str], tokenizer, *, max_n: int = 5, min_count: int = 5,
                  min_pmi: float = 0.0, max_ngrams: int = 200_000, window: int = 5,
                  batch_size: int = 1000, progress=None) -> MaskingStats:
    """Token / document frequencies, PMI collocations and informativeness of a corpus."""
    if not 2 <= max_n <= ngrams.MAX_N:
        raise MlmkitError(f"--max-n {max_n} must be between 2 and {ngrams.MAX_N}")
    if min_count < 1:
        raise MlmkitError(f"--min-count {min_count} must be at least 1")
    checks.finite("min_pmi", min_pmi)
    checks.count("max_ngrams", max_ngrams, 1)
    checks.count("window", window, 1)
    checks.count("batch_size", batch_size, 1)
    vocab_size = len(tokenizer)
    ids, docs, starts, n_docs = _tokenize(texts, tokenizer, batch_size, progress)
    if len(ids) and ids.max() >= vocab_size:
        raise MlmkitError(f"the tokenizer produced id {ids.max()} beyond its size {vocab_size}")
    token_counts = np.bincount(ids, minlength=vocab_size)
    doc_freq = np.bincount(np.unique(docs * vocab_size + ids) % vocab_size, minlength=vocab_size)
    info = _informativeness(ids, docs, vocab_size, window)
    rows, pmi, counts = _collocations(ids, docs, starts, max_n, min_count, min_pmi, max_ngrams)
    meta = {"format_version": FORMAT_VERSION, "vocab_size": vocab_size, "n_docs": n_docs,
            "n_tokens": int(len(ids)), "max_n": max_n, "min_count": min_count,
            "min_pmi": min_pmi, "max_ngrams": max_ngrams, "window": window,
            "tokenizer": getattr(tokenizer, "name_or_path", ""), "n_collocations": len(pmi)}
    return MaskingStats(
        token_counts=torch.from_numpy(token_counts.astype(np.int64)),
        doc_freq=torch.from_numpy(doc_freq.astype(np.int64)),
        informativeness=torch.from_numpy(info), ngram_ids=torch.from_numpy(rows),
        ngram_pmi=torch.from_numpy(pmi), ngram_counts=torch.from_numpy(counts),
        n_docs=n_docs, n_tokens=int(len(ids)), meta=meta)


_TENSORS = ("token_counts", "doc_freq", "informativeness", "ngram_ids", "ngram_pmi",
            "ngram_counts")


def save_stats(stats: MaskingStats, directory: str | Path) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {name: getattr(stats, name).contiguous() for name in _TENSORS}
    atomic_write_bytes(directory / TENSORS_FILE, save(tensors))
    atomic_write_text(directory / META_FILE, json.dumps(stats.meta, indent=2) + "\n")
    return directory


def load_stats(directory: str | Path) -> MaskingStats:
    directory = Path(directory)
    tensors_path, meta_path = directory / TENSORS_FILE, directory / META_FILE
    for path in (tensors_path, meta_path):
        if not path.is_file():
            raise MlmkitError(f"masking statistics {directory} lack {path.name}: compute them "
                              "with `mlmkit mask stats CORPUS TOKENIZER -o DIR`")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    if meta.get("format_version") != FORMAT_VERSION:
        raise MlmkitError(f"{meta_path} has format version {meta.get('format_version')}, not "
                          f"{FORMAT_VERSION}: recompute the statistics")
    tensors = load_file(str(tensors_path))
    missing = [name for name in _TENSORS if name not in tensors]
    if missing:
        raise MlmkitError(f"{tensors_path} lacks {missing}: recompute the statistics")
    return MaskingStats(**{name: tensors[name] for name in _TENSORS}, n_docs=meta["n_docs"],
                        n_tokens=meta["n_tokens"], meta=meta)

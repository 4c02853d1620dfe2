"""Token shards: a corpus tokenized once into memory-mapped files, cached by a hash.

A shard directory holds `tokens.bin` (uint16 when the vocabulary fits, else uint32),
`word_starts.bin` (uint8, 1 where a token begins a word, from the fast tokenizer's
`word_ids()`), `doc_offsets.npy` (int64, document i is tokens[off[i]:off[i+1]]) and
`meta.json`, written last. The directory is built under a temporary name and renamed,
so a crash never leaves a half-written shard behind that a later run would trust.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlmkit.cache import atomic_write_text, cache_dir
from mlmkit.errors import MlmkitError
from mlmkit.runtime.progress import Progress
from mlmkit.runtime.staging import fsync_tree, remove_leftovers, staging_dir

FORMAT_VERSION = 1  # bump when the shard layout or the tokenization rules change
BATCH_DOCUMENTS = 512


@dataclass
class TokenShards:
    """A tokenized corpus: tokens, word-start flags and document boundaries (memory-mapped)."""

    path: Path
    tokens: np.ndarray
    word_starts: np.ndarray
    doc_offsets: np.ndarray
    meta: dict

    @property
    def n_tokens(self) -> int:
        return int(self.doc_offsets[-1])

    @property
    def n_documents(self) -> int:
        return len(self.doc_offsets) - 1

    def document(self, index: int) -> np.ndarray:
        return np.asarray(self.tokens[self.doc_offsets[index]:self.doc_offsets[index + 1]])


def tokenizer_fingerprint(tokenizer) -> str:
    """A hash of everything that decides the token ids: the serialized fast tokenizer."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise MlmkitError(
            f"tokenizer {type(tokenizer).__name__} is not a fast tokenizer: pretraining needs "
            "one (word starts come from word_ids()); load it with AutoTokenizer(use_fast=True)"
        )
    digest = hashlib.blake2b(backend.to_str().encode("utf-8"), digest_size=16)
    digest.update(str(len(tokenizer)).encode())
    return digest.hexdigest()


def documents_fingerprint(documents: Iterable[str]) -> tuple[str, int]:
    """A hash of the documents' text (in order) and their count: the corpus part of a key."""
    digest = hashlib.blake2b(digest_size=16)
    count = 0
    for document in documents:
        data = document.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
        count += 1
    return digest.hexdigest(), count


def shard_key(corpus_hash: str, tokenizer, settings: dict | None = None) -> str:
    """The cache key of (corpus, tokenizer, settings)."""
    payload = json.dumps(
        {"corpus": corpus_hash, "tokenizer": tokenizer_fingerprint(tokenizer),
         "settings": settings or {}, "format": FORMAT_VERSION},
        sort_keys=True,
    )
    return hashlib.blake2b(payload.encode(), digest_size=12).hexdigest()


def _word_starts(word_ids: list) -> np.ndarray:
    ids = np.array([-1 if w is None else w for w in word_ids], dtype=np.int64)
    starts = np.ones(len(ids), dtype=np.uint8)
    if len(ids) > 1:
        starts[1:] = ids[1:] != ids[:-1]
    return starts


def _batches(documents: Iterable[str], size: int):
    batch: list[str] = []
    for document in documents:
        if not isinstance(document, str):
            raise MlmkitError(f"corpus documents must be strings, got {type(document).__name__}")
        if document.strip():
            batch.append(document)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _write_shards(
    documents: Iterable[str], tokenizer, target: Path, total: int | None, show_progress: bool,
    description: str,
) -> None:
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_truncation()  # a document is never cut: packing splits long ones into blocks
    backend.no_padding()
    dtype = np.uint16 if len(tokenizer) <= np.iinfo(np.uint16).max + 1 else np.uint32
    lengths: list[np.ndarray] = []
    n_tokens = 0
    started = time.perf_counter()
    # stderr only, and a bar only on a terminal (the shared progress layer)
    bar = Progress(description, total=total, unit="docs",
                   enabled=None if show_progress else False)
    with bar, open(target / "tokens.bin", "wb") as tok_file, \
            open(target / "word_starts.bin", "wb") as ws_file:
        for batch in _batches(documents, BATCH_DOCUMENTS):
            encodings = backend.encode_batch(batch, add_special_tokens=False)
            ids = [np.asarray(e.ids, dtype=dtype) for e in encodings]
            starts = [_word_starts(e.word_ids) for e in encodings]
            tok_file.write(np.concatenate(ids).tobytes())
            ws_file.write(np.concatenate(starts).tobytes())
            batch_lengths = np.array([len(i) for i in ids], dtype=np.int64)
            lengths.append(batch_lengths)
            n_tokens += int(batch_lengths.sum())
            bar.advance(len(batch))
    all_lengths = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
    all_lengths = all_lengths[all_lengths > 0]  # a document of only whitespace has no tokens
    if len(all_lengths) == 0:
        raise MlmkitError(f"the corpus {description!r} has no text to tokenize: it is empty")
    offsets = np.zeros(len(all_lengths) + 1, dtype=np.int64)
    np.cumsum(all_lengths, out=offsets[1:])
    np.save(target / "doc_offsets.npy", offsets)
    meta = {"dtype": np.dtype(dtype).name, "n_tokens": int(offsets[-1]),
            "n_documents": len(all_lengths), "vocab_size": len(tokenizer),
            "format": FORMAT_VERSION, "seconds": round(time.perf_counter() - started, 3)}
    atomic_write_text(target / "meta.json", json.dumps(meta, indent=1))


def open_shards(path: str | Path) -> TokenShards:
    """Open a finished shard directory (memory-mapped, read-only)."""
    path = Path(path)
    meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    dtype = np.dtype(meta["dtype"])
    n = meta["n_tokens"]
    tokens = np.memmap(path / "tokens.bin", dtype=dtype, mode="r", shape=(n,))
    word_starts = np.memmap(path / "word_starts.bin", dtype=np.uint8, mode="r", shape=(n,))
    offsets = np.load(path / "doc_offsets.npy")
    if int(offsets[-1]) != n or len(offsets) != meta["n_documents"] + 1:
        raise MlmkitError(f"token shards at {path} are inconsistent: delete the directory")
    return TokenShards(path=path, tokens=tokens, word_starts=word_starts, doc_offsets=offsets,
                       meta=meta)


def tokenize_corpus(
    documents: Callable[[], Iterable[str]],
    tokenizer,
    *,
    name: str = "corpus",
    settings: dict | None = None,
    total: int | None = None,
    show_progress: bool = True,
    root: str | Path | None = None,
) -> TokenShards:
    """Tokenize `documents()` into cached shards, or reuse the shards of an earlier run.

    `documents` is called once to hash the text (the cache key is built from the corpus
    text, the tokenizer and `settings`) and once more only when the shards must be built.
    """
    corpus_hash, count = documents_fingerprint(documents())
    if count == 0:
        raise MlmkitError(f"the corpus {name!r} has no documents: it is empty")
    key = shard_key(corpus_hash, tokenizer, settings)
    base = Path(root) if root is not None else cache_dir("shards")
    final = base / key
    if (final / "meta.json").exists():
        try:
            shards = open_shards(final)
            shards.meta["reused"] = True
            return shards
        except (OSError, ValueError, KeyError):
            shutil.rmtree(final, ignore_errors=True)
    base.mkdir(parents=True, exist_ok=True)
    # shards of killed builds (this host's dead processes; older versions' after a day)
    remove_leftovers(base, legacy_age=86400)
    staging = staging_dir(final)  # umask permissions, named by this process
    try:
        _write_shards(documents(), tokenizer, staging, total or count, show_progress, name)
        fsync_tree(staging)
        try:
            os.replace(staging, final)
        except OSError:  # another process finished the same shards first: use theirs
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shards = open_shards(final)
    shards.meta["reused"] = False
    return shards
